"""Check GPU monitoring on a real GPU machine: the real NVML path, end to end.

    python benchmarks/gpu_check.py                 # a GPU machine
    python benchmarks/gpu_check.py --fake          # here: the fake libnvidia-ml from tests/
    python benchmarks/gpu_check.py --e2e [--fake]  # recorder + Monitor into a store (issue 39)

Starts a LocalCluster (one worker per visible GPU, at most --workers), runs a real
CuPy or PyTorch workload on every GPU if one of them is installed (else the GPUs
are only sampled), with a Monitor sampling at --interval (default 100 ms = 10 Hz).
Prints: what attach() found, some samples, peak memory per worker per GPU, and the
sampler's CPU cost, measured as the sampler thread's own CPU time (thread_time)
over the run's wall time: target under 0.5% of one core at 10 Hz.  Also times one
NVML read of all devices in this process, as a breakdown.

--e2e runs the recorder (dal.register into a SQLite file) and the Monitor together on
real clusters: two workers sharing the first GPU (CUDA_VISIBLE_DEVICES the same, as a
LocalCluster on a one-GPU machine), then, with several GPUs, one worker per GPU; each
runs a dask.array matmul (CuPy blocks when cupy imports, else NumPy, said so).  After
the clusters close it reads everything back from the store and prints the share of
samples tied to a job (all of those inside a computation's window must be), peak memory
per GPU UUID (each GPU once, with the workers sharing it), the sampler's CPU and the
findings.  Exit status 1 when a sample inside a window is untied or the sampler's CPU
is over target.

Not a test: a printed report for the closing note.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_PCT = 0.5


def _fake_env() -> None:
    """Re-exec with the tests' fake libnvidia-ml.so.1 (the loader reads LD_LIBRARY_PATH at start)."""
    if os.environ.get("DAL_GPU_CHECK_FAKE") == "1":
        return
    sys.path.insert(0, str(ROOT / "tests"))
    import fake_nvml

    conf = fake_nvml.write_config(
        Path(tempfile.mkdtemp()) / "nvml.conf",
        [
            fake_nvml.device(
                "GPU-fake-0000",
                name="Fake A100",
                total="40G",
                used=["1G", "6G", "12G", "3G"],
                util=[5, 60, 95, 40],
                power=[90, 250, 300],
                temp=[45, 60],
            ),
            fake_nvml.device(
                "GPU-fake-1111", name="Fake A100", total="40G", used=["2G", "4G"], util=[0, 30]
            ),
        ],
    )
    env = dict(os.environ, **fake_nvml.env(conf), DAL_GPU_CHECK_FAKE="1")
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def workload(seconds: float) -> dict:
    """Keep this worker's GPU busy for `seconds` with growing allocations; say what ran."""
    import time as _time

    end = _time.monotonic() + seconds
    try:
        import cupy as cp

        arrays, n = [], 0
        while _time.monotonic() < end:
            a = cp.random.random((4096, 4096), dtype=cp.float32)
            for _ in range(10):
                a = a @ a
                a /= cp.linalg.norm(a)
            if len(arrays) < 8:
                arrays.append(a)  # memory grows: peak memory has something to show
            cp.cuda.Device().synchronize()
            n += 1
        return {"library": f"cupy {cp.__version__}", "rounds": n}
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            arrays, n = [], 0
            while _time.monotonic() < end:
                a = torch.rand((4096, 4096), device="cuda")
                for _ in range(10):
                    a = a @ a
                    a = a / a.norm()
                if len(arrays) < 8:
                    arrays.append(a)
                torch.cuda.synchronize()
                n += 1
            return {"library": f"torch {torch.__version__}", "rounds": n}
    except ImportError:
        pass
    _time.sleep(seconds)
    return {"library": None, "rounds": 0}


def direct_read_cost(interval: float, n: int = 200) -> None:
    """Time GPUReader.read() in this process: the per-sample cost, without Dask."""
    from dask_analytics_lab.collect import gpu_nvml

    try:
        reader = gpu_nvml.GPUReader()
    except gpu_nvml.NVMLUnavailable as e:
        print(f"direct read: {e}")
        return
    with reader:
        reader.read()  # first read: lazy symbol lookups
        cpu, wall = [], []
        for _ in range(n):
            c0, w0 = time.thread_time(), time.perf_counter()
            reader.read()
            cpu.append(time.thread_time() - c0)
            wall.append(time.perf_counter() - w0)
        per = statistics.median(cpu)
        print(
            f"direct read of {len(reader.devices)} device(s): median {per * 1e6:.0f} us CPU, "
            f"{statistics.median(wall) * 1e6:.0f} us wall per sample "
            f"-> {100 * per / interval:.3f}% of one core at {1 / interval:.0f} Hz"
        )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--duration", type=float, default=15.0, help="seconds of workload (default 15)")
    ap.add_argument(
        "--interval", type=float, default=0.1, help="sampling interval in seconds (default 0.1)"
    )
    ap.add_argument("--workers", type=int, default=8, help="at most this many workers, one per GPU")
    ap.add_argument(
        "--fake", action="store_true", help="use the fake libnvidia-ml.so.1 of the tests"
    )
    ap.add_argument("--csv", default=None, help="also write the CSVs into this folder")
    ap.add_argument(
        "--e2e",
        action="store_true",
        help="recorder + Monitor into a store, read back after the clusters close",
    )
    ap.add_argument(
        "--size",
        type=int,
        default=None,
        help="--e2e: side of the square matrix (default 8192 with CuPy, 2048 without)",
    )
    args = ap.parse_args()
    if args.fake:
        _fake_env()
    if args.e2e:
        return e2e(args)

    from distributed import Client, LocalCluster

    from dask_analytics_lab.collect import gpu_nvml
    from dask_analytics_lab.gpu import Monitor

    print(
        f"python {sys.version.split()[0]}, pynvml from {getattr(gpu_nvml.pynvml, '__file__', None)}"
    )
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}")
    found = gpu_nvml.probe()
    print("this host:", found)
    direct_read_cost(args.interval)
    n_gpus = len([d for d in found.get("devices", []) if not d["mig"]]) or 1
    n_workers = max(1, min(args.workers, n_gpus))

    # One worker per GPU, pinned the way dask-cuda does it: CUDA_VISIBLE_DEVICES per worker.
    uuids = [d["uuid"] for d in found.get("devices", []) if not d["mig"]][:n_workers]
    with (
        LocalCluster(
            n_workers=0, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        from distributed import Nanny

        specs = {}
        for i in range(n_workers):
            env = {"CUDA_VISIBLE_DEVICES": uuids[i]} if i < len(uuids) else {}
            specs[f"gpu-{i}"] = {"cls": Nanny, "options": {"nthreads": 1, "env": env}}
        cluster.worker_spec.update(specs)
        cluster.scale(n_workers)
        client.wait_for_workers(n_workers, timeout=120)

        monitor = Monitor(client, interval=args.interval)
        print("attach:", monitor.attach())
        monitor.start()
        t0 = time.time()
        workers = list(client.scheduler_info()["workers"])
        futures = [client.submit(workload, args.duration, workers=[w], pure=False) for w in workers]
        ran = client.gather(futures)
        summary = monitor.stop()
        wall = time.time() - t0
        print(
            f"workload: {ran[0]['library'] or 'none (no CuPy/PyTorch with CUDA): sampling only'}, {wall:.1f}s"
        )

        folder = Path(args.csv or tempfile.mkdtemp(prefix="gpu-check-"))
        paths = monitor.to_csv(folder)
        for p in paths:
            lines = p.read_text().splitlines()
            print(f"\n{p} ({len(lines) - 1} rows); first and last samples:")
            for line in [*lines[:4], "...", *lines[-3:]]:
                print("  " + line)

        print("\npeak memory (bytes), per worker, per GPU:", monitor.peak_memory())
        for w, gpus in sorted(monitor.peak_memory_by_worker().items()):
            for g in gpus:
                total = g["mem_total"] or 0
                print(
                    f"  {w} GPU {g['index']} {g['uuid']} {g['name']}: peak {g['peak'] / 2**30:.2f} GiB"
                    + (f" of {total / 2**30:.1f} GiB" if total else "")
                )

        print(
            f"\nsampler CPU at {1 / args.interval:.0f} Hz (thread CPU time / wall time of the run):"
        )
        worst = 0.0
        for w, c in sorted(summary["sampler_cpu"].items()):
            if not c.get("samples"):
                continue
            run_wall = summary["stopped"] - summary["started"]
            pct = 100 * c["cpu_seconds"] / run_wall
            worst = max(worst, pct)
            print(
                f"  {w}: {c['samples']} samples, {c['cpu_seconds'] * 1e3:.1f} ms CPU in {run_wall:.1f}s "
                f"= {pct:.3f}% of one core ({c['cpu_seconds'] / c['samples'] * 1e6:.0f} us per sample)"
            )
        verdict = "OK" if worst < TARGET_PCT else "OVER TARGET"
        print(f"  worst {worst:.3f}% (target < {TARGET_PCT}%): {verdict}")
        return 0 if worst < TARGET_PCT else 1


def _matmul_job(client, size: int, chunk: int) -> tuple[str, float]:
    """A dask.array matmul whose blocks move between workers (transfer-heavy, like the
    issue's), on CuPy blocks made on the GPUs when cupy imports."""
    import dask.array as da
    import numpy

    try:
        import cupy

        library = f"cupy {cupy.__version__}"
        state = da.random.RandomState(RandomState=cupy.random.RandomState)
    except ImportError:
        library = "numpy (no CuPy here: the GPUs are sampled, not used)"
        state = da.random.RandomState(RandomState=numpy.random.RandomState)
    x = state.random_sample((size, size), chunks=chunk).astype("float32")
    t0 = time.perf_counter()
    float((x @ x.T).sum().compute())
    return library, time.perf_counter() - t0


def _run_cluster(url: str, specs: dict, args) -> dict:
    """One cluster: register the recorder, monitor, run the job twice; what the Monitor said."""
    from distributed import Client, LocalCluster

    import dask_analytics_lab as dal
    from dask_analytics_lab.gpu import Monitor

    with (
        LocalCluster(n_workers=0, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        cluster.worker_spec.update(specs)
        cluster.scale(len(specs))
        client.wait_for_workers(len(specs), timeout=120)
        cluster_id = dal.register(client, store=url)["cluster_id"]
        monitor = Monitor(client, interval=args.interval)
        monitor.attach()
        monitor.start()
        size = args.size or (8192 if _has_cupy() else 2048)
        ran = [_matmul_job(client, size, max(256, size // 4)) for _ in range(2)]
        time.sleep(1.0)  # idle samples after the job: they must stay untied
        summary = monitor.stop()
        peaks = monitor.peak_memory_by_worker()
        flushed = dal.flush(client)
    return {
        "cluster_id": cluster_id,
        "summary": summary,
        "peaks": peaks,
        "library": ran[0][0],
        "seconds": [round(s, 2) for _lib, s in ran],
        "size": size,
        "flushed": flushed,
    }


def _has_cupy() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


def e2e(args) -> int:
    """The recorder and the Monitor together, read back from the store (issue 39)."""
    from distributed import Nanny

    import dask_analytics_lab as dal
    from dask_analytics_lab.collect import gpu_nvml

    t_start = time.monotonic()
    found = gpu_nvml.probe()
    uuids = [d["uuid"] for d in found.get("devices", []) if not d["mig"]]
    print(f"this host: {len(uuids)} GPU(s) {uuids}")
    if not uuids:
        print("no GPU here: nothing to check (use --fake for the tests' fake NVML)")
        return 1
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='gpu-e2e-')) / 'analytics.db'}"
    layouts = {
        "two workers on one GPU": {
            f"shared-{i}": {
                "cls": Nanny,
                "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": uuids[0]}},
            }
            for i in range(2)
        }
    }
    if len(uuids) > 1:
        layouts["one worker per GPU"] = {
            f"gpu-{i}": {
                "cls": Nanny,
                "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": u}},
            }
            for i, u in enumerate(uuids[: args.workers])
        }
    runs = {name: _run_cluster(url, specs, args) for name, specs in layouts.items()}

    ok = True
    print(f"\nstore: {url} (read after every cluster closed)")
    for name, r in runs.items():
        cid, summary = r["cluster_id"], r["summary"]
        rows = dal.list_gpu_metrics(cluster_id=cid, monitor_id=summary["monitor_id"], store=url)
        comps = [
            c
            for c in dal.list_computations(cluster_id=cid, store=url)
            if c["stop"] and c["stop"] >= summary["started"]
        ]
        print(f"\n== {name}: {r['library']}, {r['size']}x{r['size']} matmul, {r['seconds']} s")
        fl = r["flushed"]
        print(
            f"  recorder: {fl['stored']} messages stored, {fl['dropped']} dropped, {fl['rejected']} rejected"
        )
        tied = sum(1 for row in rows if row["job"])
        inside = [(row, c) for row in rows for c in comps if c["start"] <= row["time"] <= c["stop"]]
        right = sum(
            1
            for row, c in inside
            if c["computation_id"] == row["job"]
            or any(j == c["computation_id"] for j, _d in row["jobs"] or ())
        )
        waits: dict = {}
        for row, _c in inside:
            if not row["task_groups"]:
                waits[row["waiting"]] = waits.get(row["waiting"], 0) + 1
        print(
            f"  samples: {len(rows)} rows; tied to a job: {tied} ({tied / max(1, len(rows)):.0%}); "
            f"inside a computation's window: {len(inside)}, of which tied to it: {right} "
            f"({right / max(1, len(inside)):.0%}); untied to a task there, waiting on: {waits}"
        )
        ok &= right == len(inside) and bool(inside)
        print("  peak memory per GPU (store rows; each GPU once):")
        by_gpu: dict = {}
        for row in rows:
            key = (row["host"], row["gpu_uuid"])
            g = by_gpu.setdefault(
                key, {"peak": 0, "total": row["mem_total"], "workers": set(), "n": 0}
            )
            g["peak"] = max(g["peak"], row["mem_used"] or 0)
            g["workers"] |= set(row["shared_by"] or [row["worker"]])
            g["n"] += 1
        for (host, uuid), g in sorted(by_gpu.items()):
            print(
                f"    {host} {uuid}: peak {g['peak'] / 2**30:.2f} GiB of "
                f"{(g['total'] or 0) / 2**30:.1f} GiB, {g['n']} rows, workers {sorted(g['workers'])}"
            )
        print("  Monitor.peak_memory_by_worker():", r["peaks"])
        run_wall = (summary["stopped"] or 0) - summary["started"]
        for w, c in sorted(summary["sampler_cpu"].items()):
            if c.get("samples"):
                pct = 100 * c["cpu_seconds"] / run_wall
                ok &= pct < TARGET_PCT
                print(
                    f"  sampler CPU {w}: {c['samples']} samples, {pct:.3f}% of one core "
                    f"(target < {TARGET_PCT}%)"
                )
        for c in comps:
            found_ = dal.explain(c["computation_id"], store=url)
            kinds = ", ".join(f["kind"] for f in found_) or "none"
            print(f"  findings of {c['computation_id'][:8]} ({c['label']}): {kinds}")
            for f in found_:
                print(
                    f"    {f['kind']}: {f['title']}\n      {f['evidence']}\n      -> {f['advice']}"
                )
    print(f"\ne2e: {time.monotonic() - t_start:.0f} s, {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
