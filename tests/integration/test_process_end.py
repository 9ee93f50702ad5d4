"""Issue 44: the record of a LocalCluster ends where the process it lives in ends.

Ctrl-C reads as `client.cancel` does: what ran at the interrupt was cancelled while
running, and the computation stopped at the interrupt, not seconds later when the
cluster's close has taken its workers away.  A SIGTERM (what a JupyterLab kernel
restart ends with) writes the end as an exit does, then does what the handler before
ours would have done.  Each program runs in its own interpreter (or kernel), with a
process-based LocalCluster, recording into a SQLite file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers

from ..cluster_helpers import FAST
from ..waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


# Two quick tasks finish, two run (30 s each) when the program ends, two never start.
PRELUDE = """
import json, os, signal, sys, threading, time
import dask
from distributed import Client, wait
from distributed.diagnostics.plugin import SchedulerPlugin
import dask_analytics_lab as dal

class FirstRemoval(SchedulerPlugin):
    # When the cluster's close starts taking its workers away, and when the scheduler
    # let the client go (after it released the client's keys).
    name = "first-removal"

    def __init__(self, path):
        self.path = path

    def remove_worker(self, scheduler, worker, **kwargs):
        if not os.path.exists(self.path):
            with open(self.path, "w") as f:
                f.write(repr(time.time()))

    def remove_client(self, scheduler, client):
        if not client.startswith("fire-and-forget"):
            with open(self.path + ".client", "w") as f:
                f.write(repr(time.time()))

def nap(seconds):
    time.sleep(seconds)
    return seconds

def running(dask_scheduler):
    return sum(len(ws.processing) for ws in dask_scheduler.workers.values())

def new_client():
    # One task per thread at a time, so what the scheduler calls processing is running.
    dask.config.set({"distributed.scheduler.worker-saturation": 1.0})
    return Client(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")

def start(client):
    dal.register(client, store=sys.argv[1])
    client.register_plugin(FirstRemoval(sys.argv[2]))
    futures = client.map(nap, [0.01, 0.01, 30, 30, 30, 30], pure=False)
    wait(futures[:2])
    while client.run_on_scheduler(running) != 2:
        time.sleep(0.05)
    return futures

def say(**what):
    print(json.dumps(what), flush=True)
"""


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run(tmp_path: Path, body: str, store: str, *args: str) -> tuple[int, dict, float | None]:
    """Run PRELUDE + body as `python script.py STORE REMOVAL_FILE *args`: its exit
    status, what it said (its JSON lines merged, and `client_left`: when the scheduler
    let its client go, if it did) and when its cluster's close first took a worker away
    (None: never)."""
    script = tmp_path / "script.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    removal = tmp_path / "first-removal"
    removal.unlink(missing_ok=True)
    client_left = Path(f"{removal}.client")
    client_left.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        **{"DASK_" + k.upper().replace(".", "__").replace("-", "_"): v for k, v in FAST.items()},
    }
    out = subprocess.run(
        [sys.executable, str(script), store, str(removal), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        start_new_session=True,  # its own process group, as a program run from a terminal
        # Ctrl-C as a terminal gives it: a test process (a pytest-xdist worker, after some
        # test's child set it) can hold SIGINT ignored, and an ignored signal survives exec.
        preexec_fn=_sigint_default,
    )
    # Nothing of ours may fail while the program ends.
    assert "Plugin call failed" not in out.stderr and "dask-analytics" not in out.stderr, (
        out.stderr[-3000:]
    )
    said: dict = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            said.update(json.loads(line))
    if client_left.exists():
        said["client_left"] = float(client_left.read_text())
    removed = float(removal.read_text()) if removal.exists() else None
    return out.returncode, said, removed


def stored(store: str) -> tuple[dict, dict]:
    (cluster,) = dal.list_clusters(store=store)
    (comp,) = dal.list_computations(cluster["cluster_id"], store=store)
    return cluster, comp


def assert_cancelled_at(comp: dict, store: str, at: float, by: float | None) -> None:
    """As `client.cancel` at `at` reads (tests/integration/test_endings.py), stopped by `by`."""
    assert comp["state"] == "cancelled"
    assert {k: comp[k] for k in ("n_tasks", "n_done", "n_cancelled", "n_not_run")} == {
        "n_tasks": 6,
        "n_done": 2,
        "n_cancelled": 2,
        "n_not_run": 2,
    }, comp
    assert comp["stop"] >= at
    if by is not None:
        assert comp["stop"] <= by
    (group,) = dal.get_computation(comp["computation_id"], store=store)["groups"]
    assert (group["n_cancelled"], group["n_not_run"]) == (2, 2)


# --- Ctrl-C ------------------------------------------------------------------------------
CTRL_C = """
def interrupt():
    say(interrupt=time.time())
    if sys.argv[3] == "terminal":
        # What Ctrl-C in a terminal does: SIGINT to the whole foreground process group,
        # the nannies and workers too (which may leave before the program ends).
        os.killpg(os.getpgid(0), signal.SIGINT)
    else:
        os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C does to the program

if __name__ == "__main__":
    if sys.argv[3] in ("held", "terminal"):
        # The program holds its futures (and the traceback them) until it ends.
        client = new_client()
        futures = start(client)
        threading.Thread(target=interrupt).start()
        client.gather(futures)
    else:
        with new_client() as client:
            futures = start(client)
            threading.Thread(target=interrupt).start()
            client.gather(futures)
"""


@pytest.mark.parametrize("how", ["held", "with-block", "terminal"])
def test_ctrl_c_reads_as_a_cancel_at_the_interrupt(tmp_path, sqlite_url, how):
    """Held: the program ends with its futures; the recording ends at exit, before the
    cluster's close takes the workers (whose nannies kill them 4 s later).  With-block:
    the Client leaves first, letting go of its tasks, then the cluster closes."""
    rc, said, removed = run(tmp_path, CTRL_C, sqlite_url, how)
    ended = time.time()
    assert rc == -signal.SIGINT and "interrupt" in said, said  # ended by the KeyboardInterrupt
    cluster, comp = stored(sqlite_url)
    assert cluster["status"] == "stopped"
    assert removed is not None  # the close took the workers away: after the stop
    # From a terminal the workers have the signal too, and may leave before the program
    # ends: their departure bounds nothing then, the program's end does.  A with-block
    # sends the client's close and then closes the cluster, on two connections: on a busy
    # machine the scheduler may take the first worker away before it reads the client's
    # close, whose release is the cancel.  The later of the two bounds the stop then.
    by = {"terminal": ended, "held": removed}.get(how) or max(removed, said["client_left"])
    assert_cancelled_at(comp, sqlite_url, said["interrupt"], by)
    if how != "with-block":
        # The program's end is the cluster's too.
        assert said["interrupt"] <= cluster["stopped"] <= by
        assert cluster["stop_reason"] == "closed"


# --- SIGTERM -----------------------------------------------------------------------------
SIGTERM = """
if __name__ == "__main__":
    if sys.argv[3] == "own":
        # A handler the program had: still called, after the end is written.
        def own(signum, frame):
            say(own_handler=time.time())
            os._exit(3)

        signal.signal(signal.SIGTERM, own)
    client = new_client()
    futures = start(client)
    say(terminate=time.time())
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(120)  # the signal ends the program
    say(survived=True)
"""


@pytest.mark.parametrize("previous", ["default", "own"])
def test_sigterm_writes_the_end_then_does_what_the_handler_before_did(
    tmp_path, sqlite_url, previous
):
    """SIGTERM runs no atexit: without a handler of ours the cluster would read lost."""
    rc, said, removed = run(tmp_path, SIGTERM, sqlite_url, previous)
    ended = time.time()
    assert "survived" not in said
    if previous == "default":
        assert rc == -signal.SIGTERM  # ended as SIGTERM ends it
    else:
        assert rc == 3 and said["own_handler"] >= said["terminate"]
    cluster, comp = stored(sqlite_url)
    assert cluster["status"] == "stopped" and cluster["stop_reason"] == "terminated"
    assert said["terminate"] <= cluster["stopped"] <= ended
    assert_cancelled_at(comp, sqlite_url, said["terminate"], cluster["stopped"])
    if previous == "own":
        assert cluster["stopped"] <= said["own_handler"]
    assert removed is None  # nothing closed the cluster: the process just ended


def test_sigterm_handler_is_installed_once_and_chains_the_one_before(tmp_path):
    """In-process: register() twice installs one handler, and it calls what was there."""
    code = """
    import signal, sys
    from dask_analytics_lab.collect import endings

    calls = []
    signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    assert endings.install_sigterm_handler()
    mine = signal.getsignal(signal.SIGTERM)
    assert endings.install_sigterm_handler()
    assert signal.getsignal(signal.SIGTERM) is mine  # not wrapped twice
    signal.raise_signal(signal.SIGTERM)
    assert calls == [signal.SIGTERM], calls
    print("ok")
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


# --- a JupyterLab kernel restart ---------------------------------------------------------
KERNEL_CODE = """
%load_ext dask_analytics
from distributed import Client
import dask_analytics_lab as dal
client = Client(n_workers=2, threads_per_worker=1)  # processes, as in a notebook
assert type(client.cluster.workers[0]).__name__ == "Nanny"
futures = client.map(lambda i: i + 1, range(20))
print("SUM", sum(client.gather(futures)))
print("CLUSTER", dal.flush(client)["cluster_id"])
"""


def test_a_kernel_restart_reads_stopped_at_the_restart(tmp_path):
    """JupyterLab's restart asks the kernel to shut down, sends SIGTERM 2.5 s later and
    SIGKILL 2.5 s after that: a process-based cluster's close does not fit in it."""
    from ..browser_helpers import jupyter_lab, run_in_kernel

    store = f"sqlite:///{tmp_path / 'analytics.db'}"
    with jupyter_lab(tmp_path, store, {"PYTHONPATH": str(ROOT)}) as lab:
        kernel_id, text = run_in_kernel(lab, KERNEL_CODE)
        assert "SUM 210" in text, text
        cluster_id = text.split("CLUSTER ")[1].split()[0]
        assert dal.get_cluster(cluster_id, store=store)["status"] == "live"
        before = time.time()
        restart = urllib.request.Request(
            lab.url(f"api/kernels/{kernel_id}/restart"),
            data=b"{}",
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(restart, timeout=120) as r:
            assert r.status == 200
        after = time.time()
    # A cluster nobody ended reads live until its heartbeats stop, then lost.
    cluster = wait_for(
        lambda: (c := dal.get_cluster(cluster_id, store=store))["status"] != "live" and c,
        what="the kernel's cluster to end",
    )
    assert cluster["status"] == "stopped", cluster
    assert before <= cluster["stopped"] <= after
    (comp,) = dal.list_computations(cluster_id, store=store)
    assert (comp["state"], comp["n_done"]) == ("finished", 20)
