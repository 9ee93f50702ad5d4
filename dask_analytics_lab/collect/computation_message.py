"""A computation's `computation` message, and the `code` messages of the snippets that
made it (each sent once by hash)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..messages import code_hash, fingerprint
from . import host_cpu
from .computation_record import Tracked
from .labels import code_line, relabel

Emit = Callable[[str, dict[str, Any]], None]


class ComputationMessages:
    """Sends a computation record's message when anything in it changed."""

    def __init__(self, emit: Emit, *, code_transmit: bool):
        self._emit = emit
        self._code_transmit = code_transmit
        self._code_sent: set[str] = set()

    def send(self, record: Tracked, comp: Any, now: float) -> bool:
        """Emit `record`'s message if it changed (`comp`: its Computation, None once Dask
        let go of it); True when the computation just ended."""
        changed_groups = sorted(record.changed, key=record.changed.__getitem__)
        record.changed.clear()
        new_code = comp is not None and self._take_code(comp, record)
        was_running = record.state in ("", "running")
        state = _state(record, was_running, bool(changed_groups), now)
        if record.labelled != len(record.claims) or new_code:
            relabel(record)
        if new_code:
            record.fingerprint = fingerprint(record.code_line, record.prefixes)
        totals = _totals(record)
        state_changed = state != record.state
        if not (changed_groups or new_code or state_changed or totals != record.sent_totals):
            return False
        record.state = state
        record.sent_totals = totals
        names = record.names
        self._emit(
            "computation",
            {
                "id": record.cid,
                "start": record.start,
                "stop": record.stop,
                "state": state,
                "label": record.label,
                "code": list(record.code),
                "code_frames": list(record.frames),
                "code_line": record.code_line,
                "fingerprint": record.fingerprint,
                "totals": totals,
                # Rows are never changed once made (a new summary is a new dict): sent as they are.
                "groups": [names[name].summary for name in changed_groups],
            },
        )
        return state_changed and was_running and state != "running"

    def _take_code(self, comp: Any, record: Tracked) -> bool:
        """The code blocks Dask added to `comp` since the last look, into `record` (each
        snippet sent once); True if there were any."""
        if not self._code_transmit or len(comp.code) == record.code_seen:
            return False
        blocks = list(comp.code)
        record.code_seen = len(blocks)
        for frames in blocks:
            if record.code_line is None and frames:
                # Dask lists a call's frames outermost first: compute was called in the last.
                made_by = frames[-1]
                record.code_line = code_line(made_by.code, made_by.lineno_relative)
            for source in frames:
                digest = code_hash(source.filename, source.code)
                frame = {
                    "hash": digest,
                    "lineno_frame": source.lineno_frame,
                    "lineno_relative": source.lineno_relative,
                }
                if frame in record.frames:
                    continue
                record.frames.append(frame)
                if digest not in record.code:
                    record.code.append(digest)
                self._send_code(digest, source)
        return True

    def _send_code(self, digest: str, source: Any) -> None:
        if digest in self._code_sent:
            return
        if len(self._code_sent) >= 10_000:
            self._code_sent.clear()  # re-sending a snippet is harmless: stored once by hash
        self._code_sent.add(digest)
        self._emit(
            "code",
            {
                "hash": digest,
                "text": source.code,
                "filename": source.filename,
                "lineno_frame": source.lineno_frame,
                "lineno_relative": source.lineno_relative,
            },
        )


def _state(record: Tracked, was_running: bool, groups_changed: bool, now: float) -> str:
    """The computation's state now; its stop and the host's busyness set to match."""
    running = record.pending > 0 and not record.final
    totals = record.totals
    # Ended by a close or a restart with work left undone (one no tick has sent yet
    # too: a restart right after its submission).  One whose last tasks ended before
    # the last tick could say so is finished, not cancelled.
    cut_short = (
        record.final and was_running and totals["n_done"] + totals["n_erred"] < totals["n_tasks"]
    )
    if running:
        state = "running"
    elif totals["n_erred"]:
        state = "erred"
    elif record.cancelled or cut_short:
        state = "cancelled"
    else:
        state = "finished"
    if not running and was_running:
        record.host_cpu = host_cpu.busy_percent(record.host_since)
    if running:
        record.stop = None
    elif cut_short:
        record.stop = now  # stopped by the restart, not by its last task
        if record.cancelled:
            # Unless a cancel came first that no tick had time to send (a with-block's
            # Ctrl-C: the client lets go, then the cluster closes): it stopped then.
            record.stop = min(now, max(filter(None, record.stops), default=now))
    elif record.stop is None or groups_changed:
        record.stop = max(filter(None, record.stops), default=None) or now
    return state


def _totals(record: Tracked) -> dict[str, Any]:
    totals = record.totals
    return {
        "n_tasks": totals["n_tasks"],
        "n_done": totals["n_done"],
        "n_erred": totals["n_erred"],
        "n_not_run": totals["n_not_run"],
        "n_cancelled": totals["n_cancelled"],
        "n_groups": len(record.names),
        "compute": sum(record.compute),
        "transfer": sum(record.transfer),
        "disk": sum(record.disk),
        "nbytes": totals["nbytes"],
        "host_cpu": record.host_cpu,
        "host_cores": host_cpu.CORES,
    }
