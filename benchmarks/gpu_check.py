"""Check GPU monitoring on a real GPU machine: the real NVML path, end to end.

    python benchmarks/gpu_check.py                 # a GPU machine
    python benchmarks/gpu_check.py --fake          # here: the fake libnvidia-ml from tests/

Starts a LocalCluster (one worker per visible GPU, at most --workers), runs a real
CuPy or PyTorch workload on every GPU if one of them is installed (else the GPUs
are only sampled), with a Monitor sampling at --interval (default 100 ms = 10 Hz).
Prints: what attach() found, some samples, peak memory per worker per GPU, and the
sampler's CPU cost, measured as the sampler thread's own CPU time (thread_time)
over the run's wall time: target under 0.5% of one core at 10 Hz.  Also times one
NVML read of all devices in this process, as a breakdown.

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
    args = ap.parse_args()
    if args.fake:
        _fake_env()

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


if __name__ == "__main__":
    sys.exit(main())
