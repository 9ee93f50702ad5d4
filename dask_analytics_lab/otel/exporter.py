"""Each finished computation as an OpenTelemetry trace (`analytics.otel`).

The scheduler imports this module only when `analytics.otel.enabled` is true (the
readers' plugin, written_readers.py, makes the exporter), and this module imports
nothing of OpenTelemetry itself: the SDK and the OTLP exporter (gRPC brings grpcio) load
on the exporter's own thread as it starts, never on the scheduler's event loop, and a
scheduler with otel off loads none of it.  It works for every kind of
store, embedded or a team server: it reads what the recorder wrote, as it was written.

How it is fed: `written(batch)` is one of the recorder's `written_readers`, called on the
shipper's thread with each batch the store took.  It only files what it needs under a
lock (the next write waits for it) and wakes this module's thread, which does the rest:

- A `computation` message is sent again as the computation progresses and lists only
  the groups changed since its last one: groups are merged by name, the latest wins.
- Once a message says the computation ended (a stop time and a state other than
  running), its trace is due EXPORT_DELAY seconds later (`analytics.otel.delay`): its
  failures (`exception` messages, upserted by (group, hash), the latest count wins) and
  its fine metrics (spilled bytes) are emitted in the same or a later tick, so they land
  in the same or a later batch.  What came by then is in the trace; what comes after is
  not (a computation is exported once: the ids exported are kept, bounded).
- Its findings are read from the store when the trace is built (after the delay, so
  what was recorded by then counts), through `findings(computation_id)`, the read path
  the caller gives (findings.explain_from on the recorder's store): on a thread of its
  own that this one waits for at most FINDINGS_TIMEOUT seconds, so a slow or unreachable
  store costs a trace its findings (counted in `findings_failed`), never the trace.

The trace: the computation is the root span (start and stop as recorded), each task group
a child span (its own start and stop, else the computation's) with its figures as
attributes, each failure an `exception` event on its group's span (the computation's
when the group is unknown), the findings' kinds on the root (most costly first, with
their total impact) and on each group's span they name, the cluster (id, name, user,
account) as resource attributes.  One TracerProvider per exporter, with a
BatchSpanProcessor: the OTLP exporter sends on the processor's thread and gives up after
`analytics.otel.timeout`, so a receiver that is down costs the scheduler nothing and the
store's record is complete.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..messages import (
    ComputationMessage,
    Envelope,
    ExceptionMessage,
    Failure,
    MetricsMessage,
    TaskGroup,
)

logger = logging.getLogger("dask_analytics_lab")

# Computations followed at once (running or waiting for their export): a cluster that
# starts more without ending them drops the oldest, whose trace is then not sent.
MAX_PENDING = 1_000
# Ids of exported computations remembered, so that a later message of one (a late
# summary, a store retry) does not export it again.
MAX_EXPORTED = 10_000
# Failures kept per computation (each distinct one is one event).
MAX_FAILURES = 100
# Longest one computation's findings may take to read (the store's reads, or the team
# server's answer); past it the trace goes without them.
FINDINGS_TIMEOUT = 5.0
# Findings reads left running past their wait before traces stop trying to read them.
MAX_STUCK_READS = 2
# Longest close() waits for the last traces to leave (on a thread, never the loop).
CLOSE_WAIT = 2.0
INSTALL_HINT = (
    "analytics.otel needs the OpenTelemetry SDK and OTLP exporters on the scheduler: "
    "pip install 'dask-analytics-lab[otel]'"
)
DEFAULT_ENDPOINTS = {"http": "http://localhost:4318/v1/traces", "grpc": "http://localhost:4317"}


@dataclass
class _Pending:
    """What is known of one computation so far."""

    data: Any = None  # the latest messages.Computation
    groups: dict[str, TaskGroup] = field(default_factory=dict)
    failures: dict[tuple[str | None, str], Failure] = field(default_factory=dict)
    # {(context, prefix or None): bytes written to disk (spilled)}, cumulative
    spilled: dict[tuple[str, str | None], float] = field(default_factory=dict)
    due: float | None = None  # monotonic time its trace is due; None while it runs


def http_endpoint(endpoint: str) -> str:
    """An OTLP/HTTP endpoint as the exporter wants it: a base URL (no path) gets the
    traces path, as OTEL_EXPORTER_OTLP_ENDPOINT does; a URL with a path is used as is."""
    if urlsplit(endpoint).path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


class TraceExporter:
    """Sends each finished computation of one cluster as a trace (see the module's doc).

    settings: the plugin's `otel` settings (config.resolve()): endpoint, protocol,
    headers, service_name, timeout, delay.  cluster: the resource's id, name, user and
    account.  findings: a computation's findings (dicts with kind, impact, groups, title,
    most costly first) as the store has them; None: traces without findings."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        cluster: Mapping[str, Any],
        findings: Callable[[str], list[dict[str, Any]]] | None = None,
        findings_timeout: float = FINDINGS_TIMEOUT,
    ):
        self._settings = dict(settings)
        self._findings = findings
        self._findings_timeout = findings_timeout
        self._stuck: list[threading.Thread] = []  # findings reads still running past their wait
        self._cluster = dict(cluster)
        self._delay = float(settings.get("delay", 2.0))
        self._cond = threading.Condition()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._exported: OrderedDict[str, None] = OrderedDict()
        self._closing = False
        self._flush_all = False
        self._exporting = 0  # computations taken off `_pending`, their spans not yet ended
        self._provider: Any = None
        self._tracer: Any = None
        self._failed = False  # the SDK could not be loaded or set up: said once, then nothing
        self.exported = 0  # traces handed to the SDK
        self.dropped = 0  # computations dropped unexported (too many pending, no SDK)
        self.findings_failed = 0  # traces sent without findings: the read failed or timed out
        self._thread = threading.Thread(target=self._run, name="dask-analytics-otel", daemon=True)
        self._thread.start()

    # --- the shipper's thread -------------------------------------------------
    def written(self, batch: list[Envelope]) -> None:
        """A written_reader: file what this batch says of computations; O(messages)."""
        now = time.monotonic()
        woke = False
        with self._cond:
            for message in batch:
                if isinstance(message, ComputationMessage):
                    woke |= self._computation(message.data, now)
                elif isinstance(message, ExceptionMessage):
                    self._failure(message.data)
                elif isinstance(message, MetricsMessage):
                    self._metrics(message.data.computation_id, message.data.rows)
            if woke:
                self._cond.notify()

    def _entry(self, computation_id: str) -> _Pending | None:
        if computation_id in self._exported:
            return None
        entry = self._pending.get(computation_id)
        if entry is None:
            if len(self._pending) >= MAX_PENDING:
                self._pending.popitem(last=False)
                self.dropped += 1
            entry = self._pending[computation_id] = _Pending()
        return entry

    def _computation(self, data: Any, now: float) -> bool:
        entry = self._entry(data.id)
        if entry is None:
            return False
        entry.data = data
        for group in data.groups or ():
            entry.groups[group.name] = group
        if entry.due is None and data.state != "running" and data.stop is not None:
            entry.due = now + self._delay
            return True
        return False

    def _failure(self, data: Failure) -> None:
        if data.computation_id is None:
            return
        entry = self._entry(data.computation_id)
        if entry is None:
            return
        key = (data.group, data.hash)
        if key in entry.failures or len(entry.failures) < MAX_FAILURES:
            entry.failures[key] = data

    def _metrics(self, computation_id: str, rows: Any) -> None:
        entry = None
        for row in rows:
            if row.activity == "disk-write" and row.unit == "bytes":
                entry = entry or self._entry(computation_id)
                if entry is None:
                    return
                # Rows are the computation's cumulative values per (context, prefix).
                entry.spilled[(row.context, row.prefix)] = row.value

    # --- this module's thread ----------------------------------------------------
    def _due(self, now: float) -> list[tuple[str, _Pending]]:
        ready = [
            (cid, e)
            for cid, e in self._pending.items()
            if e.due is not None and (self._flush_all or e.due <= now)
        ]
        for cid, _ in ready:
            del self._pending[cid]
            self._exported[cid] = None
            if len(self._exported) > MAX_EXPORTED:
                self._exported.popitem(last=False)
        return ready

    def _run(self) -> None:
        # The SDK is set up now, on this thread, not when the first trace is due: a
        # process that ends before then (a script's last computation, sent by
        # flush() from its atexit) could no longer make it (the SDK's Resource.create
        # submits to an executor, which Python refuses once the interpreter shuts down).
        self._setup()
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    ready = self._due(now)
                    if ready or self._closing:
                        self._exporting = len(ready)
                        break
                    dues = [e.due for e in self._pending.values() if e.due is not None]
                    self._cond.wait(max(0.01, min(dues) - now) if dues else None)
                closing = self._closing
            for cid, entry in ready:
                try:
                    self._export(entry)
                except Exception:
                    logger.exception("dask-analytics: could not export computation %s", cid)
            with self._cond:
                self._exporting = 0
            if closing:
                self._shutdown()
                return

    def _setup(self) -> bool:
        """The TracerProvider and its exporter, made once (here, never on the scheduler's
        loop: the SDK and grpcio take hundreds of ms to import)."""
        if self._tracer is not None or self._failed:
            return not self._failed
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            s = self._settings
            protocol = s.get("protocol", "http")
            endpoint = s.get("endpoint") or DEFAULT_ENDPOINTS[protocol]
            headers = dict(s.get("headers") or {})
            timeout = float(s.get("timeout", 10.0))
            exporter: Any
            if protocol == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                    OTLPSpanExporter as GrpcExporter,
                )

                exporter = GrpcExporter(
                    endpoint=endpoint,
                    insecure=urlsplit(endpoint).scheme == "http" or None,
                    headers=headers or None,
                    timeout=timeout,
                )
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter as HttpExporter,
                )

                exporter = HttpExporter(
                    endpoint=http_endpoint(endpoint), headers=headers or None, timeout=timeout
                )
            c = self._cluster
            attributes = {
                "service.name": s.get("service_name") or "dask-analytics",
                "service.instance.id": str(c.get("id", "")),
                "dask.cluster.id": str(c.get("id", "")),
                "dask.cluster.name": str(c.get("name") or c.get("id", "")),
                "dask.cluster.user": str(c.get("user") or ""),
                "dask.cluster.account": str(c.get("account") or ""),
                "user.name": str(c.get("user") or ""),
            }
            try:
                resource = Resource.create(attributes)
            except RuntimeError:
                # At the interpreter's exit (the last traces, sent from its atexit):
                # Resource.create runs its detectors on an executor, which Python
                # refuses then.  The one it runs by default (OTEL_RESOURCE_ATTRIBUTES,
                # OTEL_SERVICE_NAME), inline.
                from opentelemetry.sdk.resources import OTELResourceDetector

                resource = OTELResourceDetector().detect().merge(Resource(attributes))
            # No global provider: a process may hold several clusters, and the user's own.
            provider = TracerProvider(resource=resource, shutdown_on_exit=False)
            provider.add_span_processor(
                BatchSpanProcessor(
                    exporter, schedule_delay_millis=500, export_timeout_millis=timeout * 1000
                )
            )
            self._provider = provider
            self._tracer = provider.get_tracer("dask_analytics_lab")
            return True
        except ImportError:
            self._failed = True
            logger.error("dask-analytics: %s", INSTALL_HINT)
        except Exception:
            self._failed = True
            logger.exception("dask-analytics: could not set up the OpenTelemetry exporter")
        return False

    def _export(self, entry: _Pending) -> None:
        if entry.data is None or not self._setup():
            self.dropped += 1
            return
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        c = entry.data
        found = self._findings_of(c.id)
        kinds_of_group = _kinds_by_group(found or [])
        start = _ns(c.start)
        stop = max(start, _ns(c.stop if c.stop is not None else c.start))
        totals = c.totals
        attributes = _clean(
            {
                "dask.computation.id": c.id,
                "dask.computation.state": c.state,
                "dask.computation.label": c.label,
                "dask.computation.code_line": c.code_line,
                "dask.computation.fingerprint": c.fingerprint,
                "dask.computation.groups": len(entry.groups),
                "dask.computation.tasks": totals.n_tasks if totals else None,
                "dask.computation.done": totals.n_done if totals else None,
                "dask.computation.erred": totals.n_erred if totals else None,
                "dask.computation.not_run": totals.n_not_run if totals else None,
                "dask.computation.cancelled": totals.n_cancelled if totals else None,
                "dask.computation.compute_seconds": totals.compute if totals else None,
                "dask.computation.transfer_seconds": totals.transfer if totals else None,
                "dask.computation.disk_seconds": totals.disk if totals else None,
                "dask.computation.nbytes": totals.nbytes if totals else None,
                "dask.computation.spilled_bytes": sum(entry.spilled.values())
                if entry.spilled
                else 0,
                "dask.computation.failures": len(entry.failures),
                "dask.findings": _kinds(found) if found is not None else None,
                "dask.findings.impact_seconds": sum(float(f.get("impact") or 0) for f in found)
                if found is not None
                else None,
            }
        )
        root = self._tracer.start_span(
            c.label or f"computation {c.id}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start,
        )
        if c.state == "erred":
            root.set_status(Status(StatusCode.ERROR, "a task raised"))
        parent = trace.set_span_in_context(root)
        spilled = _spilled_by_prefix(entry.spilled)
        spans = {}
        for name, g in entry.groups.items():
            g_start = _ns(g.start) if g.start is not None else start
            g_stop = _ns(g.stop) if g.stop is not None else stop
            span = self._tracer.start_span(
                name,
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=_clean(
                    {
                        "dask.task_group.name": name,
                        "dask.task_group.prefix": g.prefix,
                        "dask.task_group.tasks": g.n_tasks,
                        "dask.task_group.done": g.n_done,
                        "dask.task_group.erred": g.n_erred,
                        "dask.task_group.not_run": g.n_not_run,
                        "dask.task_group.cancelled": g.n_cancelled,
                        "dask.task_group.compute_seconds": g.compute,
                        "dask.task_group.transfer_seconds": g.transfer,
                        "dask.task_group.disk_read_seconds": g.disk_read,
                        "dask.task_group.disk_write_seconds": g.disk_write,
                        "dask.task_group.nbytes": g.nbytes,
                        "dask.task_group.spilled_bytes": spilled.get(g.prefix, 0),
                        "dask.task_group.dependencies": list(g.dependencies or ()),
                        "dask.task_group.failures": sum(
                            1 for group, _ in entry.failures if group == name
                        ),
                        "dask.findings": _kinds(
                            kinds_of_group.get(name, []) + kinds_of_group.get(g.prefix or name, [])
                        )
                        if found is not None
                        else None,
                    }
                ),
                start_time=g_start,
            )
            if g.n_erred:
                span.set_status(Status(StatusCode.ERROR, f"{g.n_erred} tasks raised"))
            spans[name] = (span, max(g_start, g_stop))
        for (group, _), failure in entry.failures.items():
            span = spans[group][0] if group in spans else root
            span.add_event(
                "exception",
                attributes=_clean(
                    {
                        "exception.type": failure.exc_type,
                        "exception.message": failure.exception_text,
                        "exception.stacktrace": failure.traceback_text,
                        "dask.exception.group": group,
                        "dask.exception.key": failure.key,
                        "dask.exception.count": failure.count,
                        "dask.exception.location": failure.location,
                        "dask.exception.pattern": failure.pattern,
                        "dask.exception.workers": list(failure.workers or ()),
                    }
                ),
                timestamp=_ns(failure.first_time) if failure.first_time is not None else stop,
            )
        for span, end in spans.values():
            span.end(end_time=end)
        root.end(end_time=stop)
        self.exported += 1

    def _findings_of(self, computation_id: str) -> list[dict[str, Any]] | None:
        """The computation's findings, or None (no reader, or it failed or took too long).

        The read runs on a daemon thread of its own, waited for here at most
        `findings_timeout`: a store's query cannot be interrupted.  A read still stuck
        past its wait is left to finish; while MAX_STUCK_READS are, traces go without
        findings rather than pile up threads on a store that does not answer."""
        if self._findings is None:
            return None
        self._stuck = [t for t in self._stuck if t.is_alive()]
        if len(self._stuck) >= MAX_STUCK_READS:
            self.findings_failed += 1
            return None
        read = self._findings
        result: dict[str, Any] = {}

        def run() -> None:
            try:
                result["found"] = list(read(computation_id))
            except Exception as e:
                result["error"] = e

        lookup = threading.Thread(target=run, name="dask-analytics-otel-findings", daemon=True)
        lookup.start()
        lookup.join(self._findings_timeout)
        if "found" in result:
            return result["found"]
        self.findings_failed += 1
        if lookup.is_alive():
            self._stuck.append(lookup)
        if "error" in result:
            error = result["error"]
            logger.warning(
                "dask-analytics: the trace of %s goes without findings (%s: %s)",
                computation_id,
                type(error).__name__,
                error,
            )
        else:
            logger.warning(
                "dask-analytics: the trace of %s goes without findings (not read in %g s)",
                computation_id,
                self._findings_timeout,
            )
        return None

    def _shutdown(self) -> None:
        provider = self._provider
        if provider is None:
            return
        try:
            provider.shutdown()  # flushes what the processor holds, each export bounded
        except Exception:
            logger.exception("dask-analytics: closing the OpenTelemetry exporter failed")

    # --- any thread -------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether the SDK and the OTLP exporter are set up (the thread does it first)."""
        return self._tracer is not None

    def flush(self, timeout: float = 10.0) -> bool:
        """Export every ended computation now and wait for the SDK to send them."""
        with self._cond:
            self._flush_all = True
            self._cond.notify()
        deadline = time.monotonic() + timeout
        try:
            while True:
                with self._cond:
                    if not self._exporting and not any(
                        e.due is not None for e in self._pending.values()
                    ):
                        break
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
        finally:
            with self._cond:
                self._flush_all = False
        provider = self._provider
        left = max(0.0, deadline - time.monotonic())
        return provider is None or bool(provider.force_flush(int(left * 1000)))

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        """Export what has ended, then stop: waits at most `timeout` seconds; the rest
        goes on on the exporter's daemon thread (within its own timeout)."""
        with self._cond:
            self._closing = True
            self._flush_all = True
            self._cond.notify()
        self._thread.join(timeout)


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry takes: no None (it drops them with a warning each)."""
    return {k: v for k, v in attributes.items() if v is not None}


def _kinds(found: list[Any]) -> list[str]:
    """Finding kinds in the order given (most costly first), each once."""
    return list(dict.fromkeys(str(f["kind"] if isinstance(f, Mapping) else f) for f in found))


def _kinds_by_group(found: list[dict[str, Any]]) -> dict[str, list[str]]:
    """{group name or prefix: the kinds of the findings that name it}: a finding names
    task groups (failures, stragglers) or prefixes (memory, spilling)."""
    by_group: dict[str, list[str]] = {}
    for f in found:
        for name in f.get("groups") or ():
            by_group.setdefault(str(name), []).append(str(f["kind"]))
    return by_group


def _spilled_by_prefix(
    spilled: Mapping[tuple[str, str | None], float],
) -> dict[str | None, float]:
    by_prefix: dict[str | None, float] = {}
    for (_, prefix), value in spilled.items():
        by_prefix[prefix] = by_prefix.get(prefix, 0.0) + value
    return by_prefix
