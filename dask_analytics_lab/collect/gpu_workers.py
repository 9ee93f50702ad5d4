"""The GPU monitor's word with the workers: its sampler installed on every worker (and on
each that joins while a run lasts) and taken off again, each worker's GPUs probed out
of band, and a message asked of every worker at once, a failure as that worker's
answer.  Where our sampler is missing, a heartbeat that carries GPU figures says NVML
works there (distributed's own SystemMonitor)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from distributed.protocol.pickle import dumps
from distributed.protocol.serialize import Serialized, deserialize

from .gpu_sampler import PLUGIN_NAME as WORKER_PLUGIN_NAME
from .gpu_sampler import GPUSamplerPlugin, probe_gpus

logger = logging.getLogger("dask_analytics_lab.gpu")


async def install_sampler(scheduler: Any, settings: dict[str, Any], timeout: float) -> None:
    """Put the sampler, with this run's settings, on every worker now and on every
    worker that joins while it is registered (the scheduler sends registered worker
    plugins to each worker as it joins)."""
    try:
        # idempotent=False: replaces a sampler left by an earlier run (its settings).
        await asyncio.wait_for(
            scheduler.register_worker_plugin(
                None, dumps(GPUSamplerPlugin(settings)), name=WORKER_PLUGIN_NAME, idempotent=False
            ),
            timeout,
        )
    except Exception:
        # The start broadcast then names each worker that lacks it.
        logger.exception("dask-analytics: could not install the GPU sampler on every worker")


async def remove_sampler(scheduler: Any, timeout: float) -> None:
    """The sampler out of the registry (no worker joining from now on samples) and off
    every worker."""
    scheduler.worker_plugins.pop(WORKER_PLUGIN_NAME, None)
    workers = list(scheduler.workers)
    if not workers:
        return
    try:
        await asyncio.wait_for(
            scheduler.broadcast(
                msg={"op": "plugin-remove", "name": WORKER_PLUGIN_NAME},
                workers=workers,
                on_error="ignore",
            ),
            timeout,
        )
    except Exception as e:
        logger.info("dask-analytics: could not take the GPU sampler off every worker: %r", e)


async def _ask_every_worker(scheduler: Any, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Each worker's reply to `msg`, asked at once; an exception as the reply of a
    worker that failed, or of every worker when no answer came within `timeout`."""
    workers = list(scheduler.workers)
    if not workers:
        return {}
    try:
        replies: dict[str, Any] = await asyncio.wait_for(
            scheduler.broadcast(msg=msg, workers=workers, on_error="return"), timeout
        )
        return replies
    except TimeoutError:
        return {w: TimeoutError(f"no answer within {timeout}s") for w in workers}


async def probe(scheduler: Any, timeout: float) -> dict[str, Any]:
    """Each worker's GPUs, looked at by running `probe_gpus` out of band (as
    client.run does): attach installs nothing on the workers."""
    out: dict[str, Any] = {}
    msg = {"op": "run", "function": dumps(probe_gpus)}
    for w, reply in (await _ask_every_worker(scheduler, msg, timeout)).items():
        if isinstance(reply, dict) and reply.get("status") == "OK":
            result = reply.get("result")
            if isinstance(result, Serialized):  # the scheduler's comms do not deserialize
                result = deserialize(result.header, result.frames)
            reply = result
        elif isinstance(reply, dict) and reply.get("status") == "error":
            reply = {
                "ok": False,
                "error": f"the GPU probe failed there: {reply.get('text') or reply.get('exception')}",
            }
        elif isinstance(reply, Exception):
            reply = {"ok": False, "error": f"{type(reply).__name__}: {reply}"}
        if not isinstance(reply, dict):
            reply = {"ok": False, "error": f"unexpected answer to the GPU probe: {reply!r}"}
        out[w] = _with_heartbeat(scheduler, w, reply)
    return out


async def broadcast(scheduler: Any, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Ask every worker; a worker that fails or lacks the sampler gets an error entry."""
    out: dict[str, Any] = {}
    for w, reply in (await _ask_every_worker(scheduler, msg, timeout)).items():
        if reply is None and msg["op"] != "analytics_gpu_stop":
            # A worker without the handler answers None (and logs "No handler").
            reply = {
                "ok": False,
                "error": "the dask-analytics-lab GPU sampler is not installed on this worker",
            }
        elif isinstance(reply, Exception):
            reply = {"ok": False, "error": f"{type(reply).__name__}: {reply}"}
        out[w] = _with_heartbeat(scheduler, w, reply)
    return out


def _with_heartbeat(scheduler: Any, worker: str, reply: Any) -> Any:
    if isinstance(reply, dict) and reply.get("ok") is False:
        # Reuse what distributed already knows: a heartbeat with GPU figures means a
        # GPU is there and only our sampler is missing or failing.
        hb = heartbeat_gpu(scheduler, worker)
        if hb:
            reply["heartbeat_gpu"] = hb
    return reply


def heartbeat_gpu(scheduler: Any, worker: str) -> dict[str, Any] | None:
    """The one GPU distributed itself reports in the worker's heartbeats, if any.

    distributed's SystemMonitor puts the first visible GPU's figures into every
    heartbeat (WorkerState.metrics: gpu_utilization, gpu_memory_used,
    gpu-memory-total; 2026.8 no longer fills metrics["gpu"]).  One GPU, no UUID,
    heartbeat rate: not enough to sample from, but proof that NVML works there.
    """
    ws = scheduler.workers.get(worker)
    if ws is None:
        return None
    m = ws.metrics
    legacy = m.get("gpu")  # older distributed: {"utilization", "memory-used"}
    if isinstance(legacy, dict) and legacy:
        return dict(legacy)
    if m.get("gpu_memory_used") is None and m.get("gpu_utilization") is None:
        return None
    return {
        "utilization": m.get("gpu_utilization"),
        "memory-used": m.get("gpu_memory_used"),
        "memory-total": m.get("gpu-memory-total"),
    }
