"""A shared report of a big computation: its size, and how long Chromium takes to show it.

    python benchmarks/report_size.py [--tasks 100000] [--workers 2]

One computation of `--tasks` tasks runs on a LocalCluster recorded into a fresh SQLite
file, inside distributed's own `performance_report` (the baseline, written in the same
run).  Our report of it (reports/render.py: the HTML the Share button stores, and its
JSON twin) is measured against Dask's, and both are opened in headless Chromium
(/usr/bin/chromium) from file://, with every outside request blocked: time until the
first view is drawn (task groups / Dask's first plot), then until our task stream is
drawn.  Targets (issue 11): under 5 MB and under 2 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser_helpers import chromium  # noqa: E402


def inc(x: int) -> int:
    return x + 1


def record(tasks: int, workers: int, folder: Path) -> tuple[str, str, Path]:
    """(store url, computation id, Dask's report file) of one `tasks`-task computation."""
    import dask
    from distributed import Client, LocalCluster, performance_report, wait

    import dask_analytics_lab as dal

    store = folder / "analytics.db"
    url = f"sqlite:///{store}"
    dask_html = folder / "dask-report.html"
    with (
        dask.config.set({"distributed.admin.low-level-log-length": tasks}),
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        info = dal.register(client, store=str(store))
        with performance_report(filename=str(dask_html), mode="inline"):  # offline, as ours
            futures = client.map(inc, range(tasks), pure=False)
            wait(futures)
        del futures
        deadline = time.monotonic() + 120
        while True:  # the computation's last rows (its stream sealed) are in the store
            dal.flush(client)
            comps = dal.list_computations(info["cluster_id"], store=url)
            rows = dal.list_task_stream(comps[0]["computation_id"], store=url) if comps else []
            if (
                comps
                and comps[0]["state"] != "running"
                and sum(r["n_tasks"] for r in rows) >= tasks
            ):
                break
            if time.monotonic() > deadline:
                raise SystemExit("the computation's task stream did not land within 2 minutes")
            time.sleep(0.5)
    return url, comps[0]["computation_id"], dask_html


# Bokeh draws into shadow roots: a canvas with a size anywhere in them.
BOKEH_DRAWN = """() => { const walk = (root) => { for (const el of root.querySelectorAll("*")) {
  if (el.tagName === "CANVAS" && el.offsetWidth > 0 && el.width > 0) return true;
  if (el.shadowRoot && walk(el.shadowRoot)) return true; } return false; }; return walk(document); }"""


def open_time(
    browser, path: Path, ready: str, then: tuple[str, str] | None = None
) -> tuple[float, float | None]:
    """Seconds from navigation to `ready` (a selector, or a JS function that turns true),
    and to `then` (click, wait for a selector) after that."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.route("http*://**", lambda route: route.abort())  # offline: nothing from outside
    page = context.new_page()
    t0 = time.perf_counter()
    page.goto(path.as_uri(), wait_until="commit")
    if ready.startswith("()"):
        page.wait_for_function(ready, timeout=120_000)
    else:
        page.wait_for_selector(ready, state="visible", timeout=120_000)
    first = time.perf_counter() - t0
    second = None
    if then:
        click, wait_for = then
        t1 = time.perf_counter()
        page.locator(click).first.click()
        page.wait_for_selector(wait_for, state="visible", timeout=120_000)
        second = time.perf_counter() - t1
    context.close()
    return first, second


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--repeats", type=int, default=3, help="page loads of each report (median shown)"
    )
    args = parser.parse_args()

    import json
    import statistics

    from dask_analytics_lab.reports.render import computation_report

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        url, cid, dask_html = record(args.tasks, args.workers, folder)
        print(f"recorded {args.tasks:,} tasks in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        page, twin, _ = computation_report(cid, store=url)
        render_s = time.perf_counter() - t
        ours = folder / "report.html"
        ours.write_text(page)
        stream = twin["task_stream"]
        twin_bytes = len(json.dumps(twin, separators=(",", ":")).encode())
        with chromium() as browser:
            our_times = [
                open_time(
                    browser,
                    ours,
                    ".dal-monitor .dal-tab",
                    (".dal-tab:has-text('Task stream')", "[data-pane=stream] canvas[aria-label]"),
                )
                for _ in range(args.repeats)
            ]
            dask_times = [open_time(browser, dask_html, BOKEH_DRAWN) for _ in range(args.repeats)]
        first = statistics.median(s for s, _ in our_times)
        tab = statistics.median(s for _, s in our_times if s is not None)
        dask_first = statistics.median(s for s, _ in dask_times)
        ours_mb = os.path.getsize(ours) / 1e6
        dask_mb = os.path.getsize(dask_html) / 1e6
        print(
            f"\n{args.tasks:,} tasks on {args.workers} workers; task stream stored as {len(stream):,} rows "
            f"({'binned' if stream and stream[0].get('binned') else 'one per task'}, "
            f"{sum(r.get('n_tasks') or 1 for r in stream):,} tasks)\n"
        )
        print(
            f"{'report':<34}{'size MB':>10}{'vs Dask':>10}{'first view s':>14}{'stream tab s':>14}"
        )
        print(
            f"{'Dask performance_report (baseline)':<34}{dask_mb:>10.2f}{1:>10.2f}{dask_first:>14.2f}{'':>14}"
        )
        print(
            f"{'ours (Share button HTML)':<34}{ours_mb:>10.2f}{ours_mb / dask_mb:>10.2f}{first:>14.2f}{tab:>14.2f}"
        )
        print(
            f"{'ours, JSON twin':<34}{twin_bytes / 1e6:>10.2f}{twin_bytes / 1e6 / dask_mb:>10.2f}"
        )
        print(
            f"\nrendering our report took {render_s:.2f} s; targets: under 5 MB, first view under 2 s "
            f"({'met' if ours_mb < 5 and first < 2 else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
