"""The versioned messages that flow from the collectors to a store.

This is the one contract between `collect/` (which makes messages inside the
scheduler and workers) and `store/` and `server/` (which ingest them).  Every
message is a JSON-able dict:

    {"v": 1, "cluster_id": str, "seq": int, "kind": str, "time": float, "data": {...}}

`(cluster_id, seq)` is unique: ingest is idempotent on it, so a retried message is
stored once.  Times are seconds since the epoch (floats).  Kinds and their `data`:

cluster         name, address, user, account, started, price_per_core_hour,
                versions {package: version}, platform {arch, os, python,
                python_executable, hostname}, settings {interval, code_transmit,
                profile_transmit, events_allow}, reported_user (set by a team server
                that took `user` from the token: what the client said)
                -> insert or update the cluster row.
cluster_sample  n_workers, n_threads, memory_used, memory_total (bytes),
                processing (tasks), worker_seconds, core_seconds, cost (cumulative),
                idle_since (float|None), last_activity (float|None),
                dropped_messages (cumulative count the shipper had to drop); sent on
                change and at least every HEARTBEAT seconds
                -> one time-series row, the cluster row's latest figures and peaks.
cluster_stop    stopped (float), reason (str), idle_shutdown (bool)
computation     id, start, stop (None while running), state (running | finished |
                erred | cancelled), label (its task-group prefixes in order, e.g.
                "read_parquet → groupby-agg"), code [hash, ...], code_frames [{hash,
                lineno_frame, lineno_relative}] (where in each snippet this
                computation was made), code_line (that line's text),
                totals {n_tasks, n_groups, n_done, n_erred, n_not_run, compute,
                transfer, disk, nbytes}, groups [{name, prefix, states {state: count},
                n_tasks, n_done, n_erred, n_not_run, compute, transfer, disk_read,
                disk_write, nbytes, start, stop, dependencies [group name, ...]}]
                (only groups changed since the last message of this computation).
                Counts are this computation's own tasks: n_done finished, n_erred
                raised, n_not_run never ran (a dependency failed, released, cancelled).
                -> upsert the computation row and each group row.
code            hash, text, filename (lineno_* of the first sender, kept for old
                readers; the per-computation lines are in code_frames)
                -> one row per distinct snippet (by hash), stored once.
exception       computation_id, group, hash (of exc_type, location, pattern),
                exc_type, location (the frame that raised it), pattern (the message
                with its literals masked), examples [a few messages], workers
                [addresses involved], exception_text (first example),
                traceback_text, key, count (cumulative, exact), first_time, last_time
                -> upsert on (computation_id, group, hash); count replaces.
event           topic, time, msg (any JSON)
profile         computation_id (None: the whole cluster), tree (Dask's profile
                tree), count
                -> upsert on (cluster_id, computation_id).
gpu_samples     worker, host, monitor_id, samples [{timestamp, time, gpu_uuid,
                gpu_index, gpu_name, mem_used, mem_total, mem_util, compute_util,
                power_w, temperature_c, job, dag, task_groups [name, ...]}]
                (mem_* bytes, *_util percent; any figure may be None)
"""
from __future__ import annotations

import math
from typing import Any

VERSION = 1

KINDS = frozenset(
    {
        "cluster",
        "cluster_sample",
        "cluster_stop",
        "computation",
        "code",
        "exception",
        "event",
        "profile",
        "gpu_samples",
    }
)

# Longest cluster id we accept; scheduler ids are ~45 characters.
MAX_ID = 200

# A live cluster sends a cluster_sample at least this often; readers call a cluster
# lost after LOST_AFTER_HEARTBEATS silent heartbeats.
HEARTBEAT = 30.0
LOST_AFTER_HEARTBEATS = 3


class MessageError(ValueError):
    """A message does not follow the contract above; the text says which part."""


def _finite(t: int | float) -> bool:
    try:
        return math.isfinite(t)
    except OverflowError:  # an int too large for a float
        return False


def make(cluster_id: str, seq: int, kind: str, time: float, data: dict) -> dict:
    return {"v": VERSION, "cluster_id": cluster_id, "seq": seq, "kind": kind, "time": time, "data": data}


def validate(msg: Any) -> dict:
    """Check one message's envelope; return it or raise MessageError saying what is wrong."""
    if not isinstance(msg, dict):
        raise MessageError(f"a message must be a JSON object, got {type(msg).__name__}")
    missing = {"v", "cluster_id", "seq", "kind", "time", "data"} - msg.keys()
    if missing:
        raise MessageError(f"message is missing {sorted(missing)}")
    if msg["v"] != VERSION:
        raise MessageError(f"message version {msg['v']!r} is not supported (this store reads v{VERSION}); upgrade the server")
    cid = msg["cluster_id"]
    if not isinstance(cid, str) or not cid or len(cid) > MAX_ID:
        raise MessageError(f"cluster_id must be a non-empty string of at most {MAX_ID} characters")
    seq = msg["seq"]
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 2**62:
        raise MessageError(f"seq must be a non-negative integer, got {seq!r}")
    if not isinstance(msg["kind"], str) or msg["kind"] not in KINDS:
        raise MessageError(f"unknown message kind {msg['kind']!r}; known kinds: {sorted(KINDS)}")
    t = msg["time"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not _finite(t):
        raise MessageError(f"time must be a finite number of seconds since the epoch, got {t!r}")
    if not isinstance(msg["data"], dict):
        raise MessageError("data must be a JSON object")
    return msg
