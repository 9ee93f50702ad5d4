"""`Monitor`: per-GPU memory and utilisation on every worker, with the API of dask-metrics.

    from dask_analytics_lab import Monitor
    monitor = Monitor(client)
    monitor.attach(["total-mem", "mem-util", "compute-util"])  # optional
    monitor.start()
    ...                                  # jobs run as usual
    monitor.stop()
    monitor.to_csv("path/to/folder")     # one CSV per worker
    monitor.peak_memory()                # bytes, per worker, per GPU

The monitor lives on the scheduler (collect/gpu_monitor.py), not in this object:
`Monitor(other_client).stop()` stops the one another client started, and to_csv /
peak_memory read the latest run from any client.  Rows are read back from the
scheduler, which keeps the latest runs (bounded: `analytics.gpu.keep-rows`); the
store keeps every row for good (`dask_analytics_lab.list_gpu_metrics(monitor_id=...)`).
"""

from __future__ import annotations

import csv
import logging
import re
import warnings
from pathlib import Path
from typing import Any

from . import config
from .collect import gpu_nvml
from .collect.gpu_monitor import GPUMonitorPlugin, validate_metrics
from .csvcells import csv_cell

logger = logging.getLogger("dask_analytics_lab.gpu")

# CSV column for each metric name, after the always-recorded columns.
_CSV_METRIC = {
    "total-mem": "mem_used",
    "mem-util": "mem_util",
    "compute-util": "compute_util",
    "power": "power_w",
    "temperature": "temperature_c",
}
_CSV_ALWAYS = ("timestamp", "job", "dag", "host", "gpu_index", "gpu_uuid", "gpu_name")


class NoGPUWarning(UserWarning):
    """Some workers have no NVIDIA GPU or driver that NVML can read."""


# Shown every time: a user who calls attach() twice should be told twice.
warnings.simplefilter("always", NoGPUWarning)


class Monitor:
    """GPU monitor of the cluster `client` is connected to.

    interval: time between samples on each worker (default `analytics.gpu.interval`,
    100ms).  keep_rows: rows the scheduler keeps for to_csv (default
    `analytics.gpu.keep-rows`, 200,000 over all workers).
    """

    def __init__(
        self,
        client: Any = None,
        *,
        interval: str | float | None = None,
        keep_rows: int | None = None,
    ):
        if client is None:
            from distributed import default_client

            client = default_client()
        if getattr(client, "asynchronous", False):
            raise TypeError(
                "Monitor needs a synchronous Client (dask-metrics' API blocks); "
                "use Client(..., asynchronous=False)"
            )
        self.client = client
        # Arguments obey the same schema as the settings they stand in for.
        self.interval: float = (
            config.check("analytics.gpu.interval", interval)
            if interval is not None
            else config.value("analytics.gpu.interval")
        )
        self.keep_rows: int = (
            config.check("analytics.gpu.keep-rows", keep_rows)
            if keep_rows is not None
            else config.value("analytics.gpu.keep-rows")
        )
        self.metrics: list[str] = list(gpu_nvml.DEFAULT_METRICS)
        self.monitor_id: str | None = None
        self.gpu_workers: dict[str, list[dict]] = {}
        self.no_gpu: dict[str, str] = {}
        self._install()

    def _install(self) -> None:
        # The scheduler side only (idempotent: register() or another Monitor may have
        # added it); workers get the sampler at start().
        try:
            self.client.register_plugin(GPUMonitorPlugin())
        except (ModuleNotFoundError, ImportError) as e:
            raise RuntimeError(
                f"dask-analytics: the scheduler could not load the GPU monitor ({e}); "
                "install dask-analytics-lab in the scheduler's environment too"
            ) from e

    def _call(self, op: str, **kwargs: Any) -> Any:
        reply = _plain(self.client.sync(getattr(self.client.scheduler, op), **kwargs))
        if isinstance(reply, dict) and "error" in reply and len(reply) == 1:
            raise (
                ValueError
                if "unknown GPU metric" in reply["error"] or "interval" in reply["error"]
                else RuntimeError
            )(reply["error"])
        return reply

    # --- the dask-metrics API ---------------------------------------------------------
    def attach(self, tracking: list[str] | None = None) -> dict[str, list[dict]]:
        """Choose the metrics and look at every worker's GPUs.

        tracking: some of "total-mem" (bytes used), "mem-util" (% of total),
        "compute-util" (%), "power" (W), "temperature" (C); default all.
        Returns {worker: [GPU, ...]} for workers with GPUs; warns (NoGPUWarning),
        naming them, about workers where no NVIDIA GPU/driver was found.
        """
        self.metrics = validate_metrics(tracking)
        reply = self._call("analytics_gpu_attach", metrics=self.metrics)
        self._note_workers(reply["workers"], when="attach")
        return dict(self.gpu_workers)

    def start(self) -> str:
        """Start sampling on every worker (and on workers that join later); returns the monitor id."""
        info = self._call(
            "analytics_gpu_start",
            metrics=self.metrics,
            interval=self.interval,
            keep_rows=self.keep_rows,
            client=getattr(self.client, "id", None),
        )
        self.monitor_id = info["monitor_id"]
        self._note_workers(info["workers"], when="start")
        return self.monitor_id

    def stop(self) -> dict | None:
        """Stop the cluster's running monitor (whoever started it); returns its summary, or None."""
        info = self._call("analytics_gpu_stop")
        if info is not None:
            self.monitor_id = info["monitor_id"]
        return info

    def info(self) -> dict | None:
        """The summary of this monitor's run (the cluster's latest run if this object started none)."""
        return self._call("analytics_gpu_info", monitor_id=self.monitor_id)

    def peak_memory(self) -> list[list[int | None]]:
        """Peak memory used in bytes, per worker (ordered by address), per GPU (by index);
        a GPU shared by workers counts once (see peak_memory_by_worker)."""
        return [
            [g["peak"] for g in gpus] for _w, gpus in sorted(self.peak_memory_by_worker().items())
        ]

    def peak_memory_by_worker(self) -> dict[str, list[dict]]:
        """{worker: [{index, uuid, host, name, peak, mem_total, shared_by}, ...]}:
        peak_memory() with names.  A GPU that workers share is listed once, under the
        worker whose rows it is in; shared_by names them all."""
        reply = self._call("analytics_gpu_peaks", monitor_id=self.monitor_id)
        if reply is None:
            raise RuntimeError(
                "no GPU monitor has run on this cluster; call start() and stop() first"
            )
        return reply["workers"]

    def to_csv(self, folder: str | Path) -> list[Path]:
        """Write one CSV per worker into `folder`; returns the paths written.

        One row per GPU per sample: timestamp (s since start), job, dag, host,
        gpu_index, gpu_uuid, gpu_name, the attached metrics (total-mem in bytes,
        mem-util and compute-util in %, power in W, temperature in C), the task
        groups running then (separated by ';'), what the workers waited on when
        none ran (inputs, memory, nothing) and the workers sharing the GPU.  A GPU
        two workers share is in one worker's CSV only, its rows naming both.
        """
        # Rows stay as msgpack gives them (converting 200,000 rows would cost seconds).
        reply = self.client.sync(
            self.client.scheduler.analytics_gpu_rows, monitor_id=self.monitor_id
        )
        if reply is None:
            raise RuntimeError(
                "no GPU monitor has run on this cluster; call start() and stop() first"
            )
        info = _plain(reply["info"])
        if info["dropped_rows"]:
            warnings.warn(
                f"the scheduler kept only the newest {info['kept_rows']} of {info['n_rows']} GPU rows of this run "
                f"(analytics.gpu.keep-rows); the store has them all: "
                f"dask_analytics_lab.list_gpu_metrics(monitor_id={info['monitor_id']!r})",
                stacklevel=2,
            )
        fields = reply["fields"]
        metrics = [m for m in info["metrics"] if m in _CSV_METRIC]
        header = [*_CSV_ALWAYS, *metrics, "task_groups", "waiting", "shared_by"]
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        workers = sorted(set(reply["rows"]) | set(info["workers"]))
        for worker in workers:
            host = info["hosts"].get(worker)
            rows = [dict(zip(fields, r)) for r in reply["rows"].get(worker, [])]
            rows.sort(
                key=lambda r: (
                    r["time"],
                    r["gpu_index"] if r["gpu_index"] is not None else -1,
                    r["gpu_uuid"],
                )
            )
            path = folder / (_safe_name(worker) + ".csv")
            with path.open("w", newline="") as f:
                out = csv.writer(f)
                out.writerow(header)
                for r in rows:
                    # Job, dag, host, GPU and task-group names are text from the cluster:
                    # csv_cell keeps a spreadsheet from running them as formulas.
                    out.writerow(
                        [
                            f"{r['timestamp']:.3f}",
                            csv_cell(r["job"] or ""),
                            "" if r["dag"] is None else csv_cell(r["dag"]),
                            csv_cell(host or ""),
                            r["gpu_index"],
                            csv_cell(r["gpu_uuid"]),
                            csv_cell(r["gpu_name"] or ""),
                            *(
                                "" if r[_CSV_METRIC[m]] is None else r[_CSV_METRIC[m]]
                                for m in metrics
                            ),
                            csv_cell(";".join(r["task_groups"] or ())),
                            csv_cell(r.get("waiting") or ""),
                            csv_cell(";".join(r.get("shared_by") or ())),
                        ]
                    )
            paths.append(path)
        return paths

    # --- helpers --------------------------------------------------------------------------
    def _note_workers(self, replies: dict, *, when: str) -> None:
        self.gpu_workers = {
            w: r["devices"] for w, r in replies.items() if isinstance(r, dict) and r.get("ok")
        }
        self.no_gpu = {
            w: _why(r) for w, r in replies.items() if not (isinstance(r, dict) and r.get("ok"))
        }
        if not replies:
            warnings.warn(
                "the cluster has no workers yet: GPUs are looked for when workers join",
                NoGPUWarning,
                stacklevel=3,
            )
        elif self.no_gpu:
            n = len(replies)
            head = (
                f"No NVIDIA GPU/driver found on any of the {n} workers"
                if len(self.no_gpu) == n
                else f"No NVIDIA GPU/driver found on {len(self.no_gpu)} of {n} workers"
            )
            lines = "\n".join(f"  {w}: {why}" for w, why in sorted(self.no_gpu.items()))
            tail = (
                "GPU monitoring goes on for the others"
                if len(self.no_gpu) < n
                else "nothing will be sampled"
            ) + "; cluster analytics are not affected."
            warnings.warn(f"{head}:\n{lines}\n{tail}", NoGPUWarning, stacklevel=3)
        if when == "start" and self.gpu_workers:
            logger.info(
                "GPU monitor %s: sampling %d GPU(s) on %d worker(s)",
                self.monitor_id,
                sum(len(d) for d in self.gpu_workers.values()),
                len(self.gpu_workers),
            )

    def __repr__(self) -> str:
        return f"<Monitor id={self.monitor_id} metrics={self.metrics} interval={self.interval}s>"


def _why(reply: Any) -> str:
    if not isinstance(reply, dict):
        return f"{gpu_nvml.NO_GPU} ({reply})"
    why = reply.get("error") or gpu_nvml.NO_GPU
    hb = reply.get("heartbeat_gpu")
    if hb:  # distributed's own heartbeat reads a GPU there: say so, it changes the fix
        why += f" (yet distributed's heartbeat reports a GPU there: {hb})"
    return why


def _plain(value: Any) -> Any:
    """msgpack hands lists back as tuples: give users lists, as they were sent."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _safe_name(worker: str) -> str:
    return re.sub(r"[^A-Za-z0-9.\-]+", "_", worker).strip("_") or "worker"
