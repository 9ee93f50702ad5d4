"""Real OTLP trace receivers on 127.0.0.1, for the OpenTelemetry export tests: an HTTP
one (protobuf `ExportTraceServiceRequest` POSTed to /v1/traces, as the OTLP/HTTP
exporter sends it) and a gRPC one (the `TraceService` an OpenTelemetry Collector
serves).  Each keeps every span it received, decoded into plain dicts."""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def spans_of(request: Any) -> list[dict[str, Any]]:
    """Every span of an ExportTraceServiceRequest, with its resource's attributes."""
    found = []
    for rs in request.resource_spans:
        resource = _attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                found.append(
                    {
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "name": s.name,
                        "start": s.start_time_unix_nano / 1e9,
                        "end": s.end_time_unix_nano / 1e9,
                        "status": s.status.code,
                        "attributes": _attributes(s.attributes),
                        "events": [
                            {
                                "name": e.name,
                                "time": e.time_unix_nano / 1e9,
                                "attributes": _attributes(e.attributes),
                            }
                            for e in s.events
                        ],
                        "resource": resource,
                        "scope": ss.scope.name,
                    }
                )
    return found


class _Received:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self.headers: dict[str, str] = {}  # of the last export, names in lower case

    def add(self, request: Any, headers: dict[str, str]) -> None:
        with self.lock:
            self.requests += 1
            self.headers = headers
            self.spans.extend(spans_of(request))

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.spans)


class HttpReceiver(_Received):
    """OTLP/HTTP on 127.0.0.1:<free port>; `endpoint` is its /v1/traces URL."""

    def __init__(self) -> None:
        super().__init__()
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.add(request, {k.lower(): v for k, v in self.headers.items()})
                out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


class GrpcReceiver(_Received):
    """OTLP/gRPC (the TraceService) on 127.0.0.1:<free port>, plain text."""

    def __init__(self) -> None:
        super().__init__()
        received = self

        class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (the proto's name)
                received.add(request, {k.lower(): v for k, v in context.invocation_metadata()})
                return trace_service_pb2.ExportTraceServiceResponse()

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"

    def __enter__(self) -> GrpcReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.stop(grace=None)


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
