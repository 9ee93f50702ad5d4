#!/usr/bin/env bash
# The wheel carries the built JavaScript: built from a clean clone (Node used once, here),
# it installs where there is no Node and records a cluster.
#   bash scripts/check_wheel.sh            (2m10s on a busy 2-core machine, 43 s of CPU: mostly
#                                           npm install, build and pip install)
# `scripts/dev test` runs it after the linters: the wheel is how the package ships until it is
# published (README), and nothing else installs one.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

git clone -q "$repo" "$work/src"
echo "+ building the wheel from a clean clone of $(git -C "$repo" rev-parse --short HEAD)"
"$python" -m venv "$work/build-env"
"$work/build-env/bin/pip" install -q --upgrade pip build
(cd "$work/src" && "$work/build-env/bin/python" -m build --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1) || { tail -40 "$work/build.log"; exit 1; }
wheel="$(ls "$work"/dist/*.whl)"
echo "  $(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"
# The listing is read whole first: `unzip -l | grep -q` under pipefail fails at random,
# when grep stops reading before unzip has written everything (SIGPIPE).
unzip -l "$wheel" >"$work/listing"
for f in dask_analytics_lab/static/monitor.js dask_analytics_lab/static/style.css dask_analytics_lab/static/team.js \
         dask_analytics_lab/labextension/package.json; do
    grep -q " $f$" "$work/listing" || { echo "MISSING from the wheel: $f"; exit 1; }
done
echo "  holds the built widgets, stylesheet, team page and JupyterLab extension"

echo "+ installing the bare wheel into a fresh venv with no node or npm on PATH"
"$python" -m venv "$work/run-env"
bare_path="$work/run-env/bin:/usr/bin:/bin"
for tool in node npm; do
    if PATH="$bare_path" command -v "$tool" >/dev/null; then
        mkdir -p "$work/nonode" && ln -sf /bin/false "$work/nonode/$tool" && bare_path="$work/nonode:$bare_path"
    fi
done
PATH="$bare_path" "$work/run-env/bin/pip" install -q "$wheel"
PATH="$bare_path" "$work/run-env/bin/python" - "$work/check.db" <<'PY'
import sys
from importlib.util import find_spec

import dask
from distributed import Client, LocalCluster

import dask_analytics_lab as dal

absent = [m for m in ("bokeh", "cryptography", "anywidget", "jupyterlab", "pynvml") if find_spec(m)]
assert not absent, f"the bare wheel pulled in {absent}"
url = "sqlite:///" + sys.argv[1]
with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, Client(cluster) as client:
    info = dal.register(client, store=url)
    client.submit(sum, [1, 2]).result()
    dal.flush(client)
states = [c["state"] for c in dal.list_computations(info["cluster_id"], store=url)]
assert states == ["finished"], states
print(f"  recorded cluster {info['cluster_id']} and its computation ({states[0]}) into SQLite; "
      "no bokeh, cryptography, Jupyter or NVML installed")
PY
PATH="$bare_path" "$work/run-env/bin/dask" analytics --store "$work/check.db" clusters | head -3
echo "OK: the wheel installs without Node and records a cluster"
