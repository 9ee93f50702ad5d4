"""The bare package (no extras) is all a scheduler or worker image needs: with every
optional dependency unimportable, a real LocalCluster still records its cluster and a
computation into SQLite, and what needs an extra says which one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

OPTIONAL = [
    "anywidget",
    "ipywidgets",
    "jupyterlab",
    "jupyter_server",
    "notebook",
    "IPython",
    "bokeh",
    "cryptography",
    "pynvml",
    "psycopg",
    "playwright",
    "prometheus_client",
]

# Runs in a fresh interpreter: an import hook refuses the optional modules, as if they
# were not installed (the same ImportError pip's absence gives).
SCRIPT = textwrap.dedent("""
    import importlib.abc, json, sys
    BLOCKED = set(sys.argv[2].split(","))

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Absent())

    import dask
    from distributed import Client, LocalCluster
    import dask_analytics_lab as dal

    url = sys.argv[1]
    with dask.config.set({"analytics.interval": "100ms"}):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \\
                Client(cluster) as client:
            info = dal.register(client, store=url)
            assert client.submit(sum, [1, 2]).result() == 3
            dal.flush(client)
    computations = dal.list_computations(info["cluster_id"], store=url)
    try:
        from dask_analytics_lab import codecrypt
        codecrypt.generate_key()
        key_error = None
    except ImportError as e:
        key_error = str(e)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(json.dumps({"cluster": dal.get_cluster(info["cluster_id"], store=url)["status"],
                      "states": [c["state"] for c in computations], "loaded": loaded, "key_error": key_error}))
""")


def test_the_bare_package_records_a_cluster_without_any_extra(tmp_path):
    url = "sqlite:///" + str(tmp_path / "bare.db")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, url, ",".join(OPTIONAL)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["cluster"] == "stopped" and result["states"] == ["finished"], result
    assert result["loaded"] == []
    # What needs an extra names it.
    assert "dask-analytics-lab[server]" in result["key_error"]
