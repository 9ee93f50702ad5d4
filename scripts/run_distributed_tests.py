#!/usr/bin/env python
"""Run distributed's own tests without and with dask-analytics-lab preloaded on every
scheduler, and show what analytics changes (issue 14).

    python scripts/run_distributed_tests.py SRC [TEST ...] [options]

SRC is a checkout (or `git archive`) of dask/distributed, e.g. /tmp/distributed-src;
TEST are paths or pytest node ids relative to SRC (default: the scheduler, client,
worker, spans, metrics, stealing and plugin tests, and distributed/diagnostics/tests/).

Each TEST runs in its own pytest process, twice: as is, and with

    DASK_DISTRIBUTED__SCHEDULER__PRELOAD='["dal_schedulers", "dask_analytics_lab"]'
    DASK_ANALYTICS__STORE=<a fresh SQLite file>
    DASK_ANALYTICS_SETUP_COUNT_FILE=<a file our dask_setup appends a line to per scheduler>

(dal_schedulers, written by this script, counts every scheduler that starts: the
"schedulers" column; "dask_setup" counts the lines our own dask_setup wrote once it
completed; "recorded" counts the clusters the plugin then wrote into the store).

(distributed.utils_test resets Dask's config to its import-time snapshot, which holds
the environment's keys but not the package's defaults: the preload must cope, which is
issue 8 item 10).  Tests that fail only with analytics are then run alone, --reruns
times each way, to tell flaky from broken.  --repeat N runs every TEST N times each way
instead (for a few node ids).

The tests import `distributed` from SRC (pytest puts SRC first on sys.path).  To test
the installed release with the snapshot's tests, --use-installed-distributed first
copies the installed package's modules over SRC/distributed (its tests are kept).
Nothing here is written outside SRC and a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter, defaultdict
from pathlib import Path

DEFAULT_TESTS = [
    "distributed/tests/test_scheduler.py",
    "distributed/tests/test_client.py",
    "distributed/tests/test_worker.py",
    "distributed/tests/test_spans.py",
    "distributed/tests/test_worker_metrics.py",
    "distributed/tests/test_steal.py",
    "distributed/tests/test_scheduler_plugin.py",
    "distributed/diagnostics/tests/",
]
MODES = ("without", "with")

# A scheduler preload listed before ours: one line per scheduler that starts, whatever
# our own dask_setup then does, so "set up on every scheduler" is counted, not assumed.
SCHEDULER_COUNTER = """
import os


def dask_setup(scheduler):
    fd = os.open(os.environ["DAL_SCHEDULERS_FILE"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {scheduler.id}\\n".encode())
    finally:
        os.close(fd)
"""

# A pytest plugin, loaded with -p, that writes one JSON line per test: its node id and
# outcome.  Junit XML would lose the node ids of parametrised and class-based tests.
OUTCOME_PLUGIN = """
import json, os

_out = os.environ["DAL_OUTCOMES_FILE"]
_seen = {}


def pytest_configure(config):
    # distributed marks some tests flaky (pytest-rerunfailures) and runs with
    # --strict-markers: without that plugin, collection of those files fails.  Declared
    # here, such tests run once, the same both ways.
    config.addinivalue_line("markers", "flaky(reruns=0, reruns_delay=0): pytest-rerunfailures' marker")


def _write(nodeid, outcome):
    with open(_out, "a") as f:
        f.write(json.dumps({"nodeid": nodeid, "outcome": outcome}) + "\\n")


def pytest_collectreport(report):
    if report.failed:
        _write(report.nodeid or "<collection>", "error")


def pytest_runtest_logreport(report):
    prev = _seen.get(report.nodeid)
    if report.failed:
        outcome = "failed" if report.when == "call" else "error"
    elif report.skipped:
        outcome = "skipped"
    elif report.when == "call":
        outcome = "passed"
    else:
        outcome = None
    # The worst phase wins: a test that passed and then erred in teardown erred.
    rank = {None: 0, "passed": 1, "skipped": 2, "error": 3, "failed": 4}
    if outcome is not None and rank[outcome] > rank[prev]:
        _seen[report.nodeid] = outcome
    if report.when == "teardown":
        _write(report.nodeid, _seen.pop(report.nodeid, "error"))
"""


def use_installed_distributed(src: Path) -> None:
    """Copy the installed distributed's modules over SRC/distributed, keeping its tests."""
    import distributed

    installed = Path(distributed.__file__).parent
    if installed.resolve() == (src / "distributed").resolve():
        return
    n = 0
    for path in installed.rglob("*"):
        rel = path.relative_to(installed)
        if "__pycache__" in rel.parts or "tests" in rel.parts or path.is_dir():
            continue
        target = src / "distributed" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        n += 1
    print(
        f"copied {n} files of distributed {distributed.__version__} from {installed} over {src / 'distributed'}"
    )


def run_pytest(
    src: Path,
    tests: list[str],
    mode: str,
    work: Path,
    *,
    timeout: float,
    file_timeout: float,
    label: str,
) -> dict:
    """One pytest process; returns {"outcomes": {nodeid: outcome}, "setups": n, "rc": rc, "log": path}."""
    work.mkdir(parents=True, exist_ok=True)
    outcomes_file = work / f"{label}.{mode}.jsonl"
    count_file = work / f"{label}.{mode}.setups"
    schedulers_file = work / f"{label}.{mode}.schedulers"
    log = work / f"{label}.{mode}.log"
    for f in (outcomes_file, count_file, schedulers_file):
        f.unlink(missing_ok=True)
    env = dict(os.environ)
    env["DAL_OUTCOMES_FILE"] = str(outcomes_file)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(work.parent / "plugin"), env.get("PYTHONPATH")) if p
    )
    for k in (
        "DASK_DISTRIBUTED__SCHEDULER__PRELOAD",
        "DASK_ANALYTICS__STORE",
        "DASK_ANALYTICS_SETUP_COUNT_FILE",
    ):
        env.pop(k, None)
    if mode == "with":
        store = work / f"{label}.analytics.db"
        env["DASK_DISTRIBUTED__SCHEDULER__PRELOAD"] = json.dumps(
            ["dal_schedulers", "dask_analytics_lab"]
        )
        env["DAL_SCHEDULERS_FILE"] = str(schedulers_file)
        env["DASK_ANALYTICS__STORE"] = str(store)
        env["DASK_ANALYTICS_SETUP_COUNT_FILE"] = str(count_file)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "dal_outcomes",
        "-q",
        "--color=no",
        f"--timeout={timeout}",
        "--timeout-method=signal",
        *tests,
    ]
    started = time.monotonic()
    with log.open("w") as out:
        # A session of its own: on a timeout (or when this script is stopped) the
        # workers and nannies the tests started go too, not only pytest.
        proc = subprocess.Popen(
            cmd, cwd=src, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=file_timeout)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            if proc.poll() is None:
                _kill_group(proc)
    outcomes: dict[str, str] = {}
    if outcomes_file.exists():
        for line in outcomes_file.read_text().splitlines():
            row = json.loads(line)
            outcomes[row["nodeid"]] = row["outcome"]
    setups = len(count_file.read_text().splitlines()) if count_file.exists() else 0
    schedulers = len(schedulers_file.read_text().splitlines()) if schedulers_file.exists() else 0
    recorded = recorded_clusters(work / f"{label}.analytics.db") if mode == "with" else 0
    return {
        "outcomes": outcomes,
        "setups": setups,
        "schedulers": schedulers,
        "recorded": recorded,
        "rc": rc,
        "log": str(log),
        "seconds": time.monotonic() - started,
    }


def recorded_clusters(path: Path) -> int:
    """Clusters the plugin wrote into the run's store: proof it ran, not only set up."""
    if not path.exists():
        return 0
    from dask_analytics_lab.store import open_store

    with open_store(path) as store:
        return len(store.list_clusters(limit=None))


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue


def counts(outcomes: dict[str, str]) -> Counter:
    c = Counter(outcomes.values())
    return Counter(passed=c["passed"], failed=c["failed"] + c["error"], skipped=c["skipped"])


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)

    def fmt(r: list) -> str:
        return "  ".join(
            str(v).ljust(w) if i == 0 else str(v).rjust(w)
            for i, (v, w) in enumerate(zip(r, widths))
        )

    return "\n".join([fmt(header), line, *map(fmt, rows)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.dedent(__doc__),
    )
    p.add_argument("src", type=Path, help="dask/distributed source tree")
    p.add_argument("tests", nargs="*", help="test files, folders or node ids relative to SRC")
    p.add_argument(
        "--reruns",
        type=int,
        default=5,
        help="runs each way of a test that failed only with analytics",
    )
    p.add_argument("--repeat", type=int, default=1, help="run every TEST this many times each way")
    p.add_argument(
        "--timeout", type=float, default=300, help="per-test timeout (pytest-timeout), seconds"
    )
    p.add_argument("--file-timeout", type=float, default=3600, help="per pytest process, seconds")
    p.add_argument(
        "--work",
        type=Path,
        default=None,
        help="folder for logs, stores and outcomes (default: a temp dir)",
    )
    p.add_argument("--out", type=Path, default=None, help="also write the tables here")
    p.add_argument(
        "--use-installed-distributed",
        action="store_true",
        help="copy the installed distributed's modules over SRC/distributed first",
    )
    args = p.parse_intermixed_args(argv)

    src = args.src.resolve()
    if not (src / "distributed" / "tests").is_dir():
        p.error(f"{src} does not look like a dask/distributed source tree (no distributed/tests)")
    if args.use_installed_distributed:
        use_installed_distributed(src)
    tests = args.tests or [t for t in DEFAULT_TESTS if (src / t).exists()]
    missing = [t for t in tests if not (src / t.split("::", 1)[0]).exists()]
    if missing:
        p.error(f"not in {src}: {missing}")
    work = (args.work or Path(tempfile.mkdtemp(prefix="dal-distributed-tests-"))).resolve()
    (work / "plugin").mkdir(parents=True, exist_ok=True)
    (work / "plugin" / "dal_outcomes.py").write_text(OUTCOME_PLUGIN)
    (work / "plugin" / "dal_schedulers.py").write_text(SCHEDULER_COUNTER)
    runs = work / "runs"

    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import distributed, dask_analytics_lab as d; "
            "print(distributed.__version__, distributed.__file__); print(d.__file__)",
        ],
        cwd=src,
        capture_output=True,
        text=True,
    )
    header = [
        f"distributed under test: {probe.stdout.strip().splitlines()[0] if probe.stdout else probe.stderr}",
        f"dask_analytics_lab: {probe.stdout.strip().splitlines()[-1] if probe.stdout else '?'}",
        f"work folder (logs per run and way under runs/, stores): {work}",
    ]
    print("\n".join(header), flush=True)

    # --- the runs --------------------------------------------------------------------
    per_test: dict[str, dict[str, Counter]] = defaultdict(lambda: {m: Counter() for m in MODES})
    file_rows = []
    for test in tests:
        label = test.replace("/", "_").replace("::", "__").strip("_")[:120]
        totals = {m: Counter() for m in MODES}
        setups = recorded = schedulers = 0
        notes = []
        for i in range(args.repeat):
            for mode in MODES:
                r = run_pytest(
                    src,
                    [test],
                    mode,
                    runs,
                    timeout=args.timeout,
                    file_timeout=args.file_timeout,
                    label=f"{label}.{i}",
                )
                totals[mode] += counts(r["outcomes"])
                for nodeid, outcome in r["outcomes"].items():
                    per_test[nodeid][mode][outcome] += 1
                if mode == "with":
                    setups += r["setups"]
                    schedulers += r["schedulers"]
                    recorded += r["recorded"]
                if r["rc"] not in (0, 1, 5):  # 1: tests failed; 5: none collected
                    notes.append(
                        f"{mode}: "
                        + (
                            "ran past --file-timeout"
                            if r["rc"] == "timeout"
                            else f"pytest exit {r['rc']}"
                        )
                    )
                print(
                    f"  {test} [{mode}{'' if args.repeat == 1 else f' #{i + 1}'}]: "
                    f"{dict(counts(r['outcomes']))} in {r['seconds']:.0f}s"
                    + (
                        f", {r['schedulers']} schedulers, dask_setup x{r['setups']}, {r['recorded']} clusters recorded"
                        if mode == "with"
                        else ""
                    ),
                    flush=True,
                )
        file_rows.append(
            [
                test,
                *(totals["without"][k] for k in ("passed", "failed", "skipped")),
                *(totals["with"][k] for k in ("passed", "failed", "skipped")),
                schedulers,
                setups,
                recorded,
                "; ".join(notes),
            ]
        )

    out = [*header, ""]
    out.append(
        table(
            file_rows,
            [
                "test file",
                "w/o pass",
                "w/o fail",
                "w/o skip",
                "with pass",
                "with fail",
                "with skip",
                "schedulers",
                "dask_setup",
                "recorded",
                "notes",
            ],
        )
    )

    # --- tests that fail only with analytics ----------------------------------------------
    bad = lambda c: c["failed"] + c["error"]  # noqa: E731
    suspects = sorted(n for n, by in per_test.items() if bad(by["with"]) and not bad(by["without"]))
    also_without = sorted(n for n, by in per_test.items() if bad(by["with"]) and bad(by["without"]))
    if args.repeat > 1:
        rows = [
            [
                n,
                f"{by['without']['passed']}/{sum(by['without'].values())}",
                f"{by['with']['passed']}/{sum(by['with'].values())}",
            ]
            for n, by in sorted(per_test.items())
        ]
        out += [
            "",
            f"each test run {args.repeat} times each way (passed/runs):",
            table(rows, ["test", "without", "with"]),
        ]
    elif suspects and args.reruns > 0:
        print(
            f"re-running {len(suspects)} test(s) that failed only with analytics, {args.reruns}x each way",
            flush=True,
        )
        rows = []
        for nodeid in suspects:
            label = "rerun." + nodeid.replace("/", "_").replace("::", "__")[:100]
            passed = {m: 0 for m in MODES}
            for i in range(args.reruns):
                for mode in MODES:
                    r = run_pytest(
                        src,
                        [nodeid],
                        mode,
                        runs,
                        timeout=args.timeout,
                        file_timeout=args.file_timeout,
                        label=f"{label}.{i}",
                    )
                    passed[mode] += r["outcomes"].get(nodeid) == "passed"
            verdict = (
                "broken by analytics"
                if passed["with"] == 0 and passed["without"] == args.reruns
                else "flaky, not analytics"
                if passed["with"] == args.reruns
                else "flaky with analytics"
                if passed["without"] == args.reruns
                else "flaky either way"
            )
            rows.append(
                [
                    nodeid,
                    f"{passed['without']}/{args.reruns}",
                    f"{passed['with']}/{args.reruns}",
                    verdict,
                ]
            )
            print(
                f"  {nodeid}: without {passed['without']}/{args.reruns}, with {passed['with']}/{args.reruns}",
                flush=True,
            )
        out += [
            "",
            "failed only with analytics, re-run alone (passed/runs):",
            table(rows, ["test", "without", "with", "verdict"]),
        ]
    else:
        out += ["", "no test failed only with analytics"]
    if also_without and args.repeat == 1:
        out += ["", "failed both ways (not analytics): " + ", ".join(also_without)]

    text = "\n".join(out)
    print("\n" + text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    # SIGTERM unwinds like Ctrl-C, so the running pytest session is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
