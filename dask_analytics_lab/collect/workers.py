"""Each worker over the cluster's life: its memory, CPU and tasks every few seconds, and
when it joined and left (and why).

Runs on the scheduler's event loop: a sample is O(workers), a lifecycle hook O(1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

JOINED_TOPIC = "worker-joined"
LEFT_TOPIC = "worker-left"
# A departure waits this long before it is recorded: the nanny's "worker-restart-memory"
# event and the scheduler's removal of the worker race each other.
LEFT_GRACE = 2.0
# Why a worker left, as `reason` in a worker-left event's msg.
REASONS = {
    "memory": "killed by its nanny: its memory went over the terminate threshold of its limit",
    "died": "its connection broke while it was not closing: the process died, was killed or was lost",
    "closed": "closed: it was told to stop (the cluster scaled down or closed)",
    "retired": "retired: the scheduler moved its data elsewhere first",
}
_CLOSING = frozenset({"closing", "closing_gracefully", "closed"})
_MAX_TRACKED = 10_000  # addresses remembered between the hooks of one departure
# A nanny's memory kill whose worker's removal never came (it arrived late, for a worker
# already recorded as gone) is forgotten after this many seconds.
MEMORY_KILL_TTL = 60.0


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _count(value: Any) -> int | None:
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return None


class WorkerSampler:
    """One sample of every worker per `interval` seconds."""

    def __init__(self, interval: float):
        self.interval = interval
        self._last = float("-inf")
        self.sent = 0

    def sample(self, workers: Any, now: float, *, force: bool = False) -> dict[str, Any] | None:
        """The `worker_samples` message data; None when none is due or no worker is there."""
        if not force and now - self._last < self.interval:
            return None
        if not workers:
            return None
        self._last = now
        rows: list[dict[str, Any]] = []
        for address, ws in workers.items():
            memory = ws.memory
            rows.append(
                {
                    "worker": str(address),
                    "time": now,
                    "name": _text(ws.name),
                    "host": _text(ws.host),
                    "nthreads": _count(ws.nthreads),
                    "memory_limit": _count(ws.memory_limit),
                    "managed": _count(memory.managed),
                    "unmanaged": _count(memory.unmanaged),
                    "spilled": _count(memory.spilled),
                    "cpu": _cpu(ws.metrics),
                    "processing": len(ws.processing),
                }
            )
        self.sent += 1
        return {"samples": rows}


def _cpu(metrics: Any) -> float | None:
    value = metrics.get("cpu") if isinstance(metrics, dict) else None
    return (
        float(value)
        if isinstance(value, (int, float)) and value == value and abs(value) < 1e6
        else None
    )


class WorkerLifecycle:
    """worker-joined and worker-left events, the latter with why it left.

    The scheduler tells the plugin a worker left but not why (its `expected` flag is
    False for a scale-down as for a crash, here), so the reason is pieced together from
    what came before: the worker's own "closing" status change (it was told to stop),
    the nanny's memory kill, or neither (it died).
    """

    def __init__(self, event: Callable[[str, dict[str, Any], float], None]):
        self._event = event
        self._known: dict[str, dict[str, Any]] = {}  # address -> what it said when it joined
        self._closing: set[str] = set()
        self._memory: dict[str, dict[str, Any]] = {}  # address -> the nanny's memory-kill event
        self._removal: dict[
            str, dict[str, Any]
        ] = {}  # address -> the scheduler's remove-worker event
        self._leaving: dict[
            str, dict[str, Any]
        ] = {}  # departures waiting LEFT_GRACE for a late reason

    def present(self, workers: Any, now: float) -> None:
        """Workers already there when recording started (register() on a running cluster)."""
        for address, ws in list(workers.items()):
            if str(address) not in self._known:  # add_worker may have seen it already
                self.joined(address, ws, now, already=True)

    def joined(self, address: str, ws: Any, now: float, *, already: bool = False) -> None:
        # A worker that reuses an address (a fixed --worker-port) starts with a clean slate.
        address = str(address)
        self._memory.pop(address, None)
        self._removal.pop(address, None)
        self._closing.discard(address)
        info = {
            "worker": str(address),
            "name": _text(ws.name),
            "host": _text(ws.host),
            "nthreads": _count(ws.nthreads),
            "memory_limit": _count(ws.memory_limit),
        }
        if len(self._known) < _MAX_TRACKED:
            self._known[str(address)] = info
        self._event(
            JOINED_TOPIC,
            {**info, "time": now, **({"already_running": True} if already else {})},
            now,
        )

    def status_changed(self, address: str, msg: dict[str, Any]) -> None:
        """The worker's own status changes (Dask logs them on the worker's topic)."""
        if msg.get("status") in _CLOSING:
            if len(self._closing) < _MAX_TRACKED:
                self._closing.add(address)
        else:
            self._closing.discard(address)

    def is_closing(self, address: str) -> bool:
        """The worker said it was closing (it was told to stop)."""
        return address in self._closing

    def memory_killed(self, msg: dict[str, Any], now: float) -> None:
        """The nanny's "worker-restart-memory" event: it terminates the worker now."""
        address = msg.get("worker")
        if not isinstance(address, str):
            return
        if address in self._leaving:
            self._leaving[address]["reason"] = "memory"
            self._leaving[address]["rss"] = _count(msg.get("rss"))
        elif len(self._memory) < _MAX_TRACKED:
            self._memory[address] = {**msg, "_seen": now}

    def removing(self, msg: dict[str, Any]) -> None:
        """The scheduler's "remove-worker" event (topic "all"): comes just before left()."""
        address = msg.get("worker")
        if isinstance(address, str) and len(self._removal) < _MAX_TRACKED:
            self._removal[address] = msg

    def left(
        self, address: str, stimulus_id: str | None, now: float, *, closed: bool = False
    ) -> None:
        info = self._known.pop(address, None) or {"worker": address}
        removal = self._removal.pop(address, {})
        memory = self._memory.pop(address, None)
        closing = closed or address in self._closing
        self._closing.discard(address)
        if memory is not None:
            reason = "memory"
        elif removal.get("expected"):
            reason = "retired"
        elif closing:
            reason = "closed"
        else:
            reason = "died"
        self._leaving[address] = {
            **info,
            "time": now,
            "reason": reason,
            "stimulus_id": stimulus_id or removal.get("stimulus_id"),
            "expected": bool(removal.get("expected")),
            "processing": len(removal.get("processing-tasks") or ()),
            "lost": len(removal.get("lost-computed-tasks") or ())
            + len(removal.get("lost-scattered-tasks") or ()),
            **({"rss": _count(memory.get("rss"))} if memory is not None else {}),
        }

    def scheduler_closing(self, now: float) -> None:
        """The scheduler closes before it lets its workers go: they leave with it (closed)."""
        for address in list(self._known):
            if address not in self._leaving:
                self.left(address, "scheduler-close", now, closed=True)

    def flush(self, now: float, *, force: bool = False) -> None:
        """Record the departures whose grace has passed (all of them with force)."""
        if self._memory:
            for address in [
                a for a, m in self._memory.items() if now - m["_seen"] > MEMORY_KILL_TTL
            ]:
                del self._memory[address]
        if not self._leaving:
            return
        for address, msg in list(self._leaving.items()):
            if force or now - msg["time"] >= LEFT_GRACE:
                del self._leaving[address]
                msg["died"] = msg["reason"] in ("memory", "died")
                msg["why"] = REASONS[msg["reason"]]
                self._event(LEFT_TOPIC, msg, msg["time"])
