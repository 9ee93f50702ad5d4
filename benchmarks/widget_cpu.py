"""Kernel CPU of a live monitor widget at a 1 s refresh during a busy computation
(target: under 2% of one core), and the bytes it sends per tick.

    python benchmarks/widget_cpu.py [--seconds 30]

A real LocalCluster (worker processes) records into a temporary SQLite store; a
MonitorWidget polls it from this process, as it would from a kernel: its updates are
JSON-encoded as the kernel would (the comm is otherwise a stand-in), and the poll
thread's own CPU time is measured.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def _slow(x: int) -> int:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.002:  # 2 ms of real work per task
        pass
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    import dask_analytics_lab as dal
    from dask_analytics_lab.widgets import MonitorWidget
    from dask_analytics_lab.widgets._ticker import TICKER

    store = f"sqlite:///{Path(tempfile.mkdtemp()) / 'analytics.db'}"
    with (
        dask.config.set({"analytics.store": store, "analytics.interval": "1s"}),
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        info = dal.register(client)
        widget = MonitorWidget(info["cluster_id"], interval=1.0)
        # As a view on screen says (js/common/onscreen.ts): the widget polls only then.
        widget._handle_custom_msg({"type": "view", "id": "benchmark", "visible": True}, [])
        sent = {"messages": 0, "bytes": 0}

        def send(data=None, metadata=None, buffers=None):
            sent["messages"] += 1
            sent["bytes"] += len(json.dumps(data))

        widget.comm.send = send
        time.sleep(2)  # first full load, not counted
        cpu0, ticks0 = TICKER.cpu_seconds, widget._feed.ticks
        sent.update(messages=0, bytes=0)
        t0 = time.monotonic()
        n_tasks = 0
        while time.monotonic() - t0 < args.seconds:
            # Busy: a 5,000-task map and an array reduction, back to back.
            client.gather(client.map(_slow, range(n_tasks, n_tasks + 5000)))
            n_tasks += 5000
            x = da.random.random((3000, 3000), chunks=(250, 250))
            (x + x.T).mean(axis=0).sum().compute()
            n_tasks += 600
        wall = time.monotonic() - t0
        cpu = TICKER.cpu_seconds - cpu0
        ticks = widget._feed.ticks - ticks0
        widget.close()
    print(
        f"monitor widget, 1 s refresh, {wall:.0f} s of busy cluster ({n_tasks:,}+ tasks, 2 worker processes):"
    )
    print(f"  ticks                {ticks}")
    print(
        f"  poll thread CPU      {cpu:.3f} s  = {100 * cpu / wall:.2f}% of one core   (target < 2%)"
    )
    print(f"  CPU per tick         {1000 * cpu / max(ticks, 1):.2f} ms")
    print(
        f"  sent                 {sent['messages']} messages, {sent['bytes'] / max(ticks, 1) / 1024:.1f} KiB per tick"
    )


if __name__ == "__main__":
    main()
