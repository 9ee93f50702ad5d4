"""Running the standalone server: one tornado Application on one port, TLS optional."""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
from typing import Any

import tornado.httpserver
import tornado.web

from .context import make_context
from .routes import routes_for

logger = logging.getLogger("dask_analytics_lab.server")


def make_app(settings: dict, prefix: str = "") -> tornado.web.Application:
    ctx = make_context(prefix, settings)
    app = tornado.web.Application(routes_for(ctx), compress_response=True)
    # On the app for whoever serves it (make_server, serve, the tests): tornado's
    # Application has no typed slot for it.
    app.dal_context = ctx  # type: ignore[attr-defined]
    return app


# The first prune a minute after start (not in the way of a restart's catch-up ingest), then hourly.
RETENTION_DELAY = 60.0

# Connections that send no request (or headers) for this long are closed.
IDLE_CONNECTION_SECONDS = 60


def make_server(
    app: tornado.web.Application, tls: ssl.SSLContext | None = None
) -> tornado.httpserver.HTTPServer:
    """The HTTP server with the limits body.py relies on: a request carries at most
    SMALL_BODY unless its handler, having checked the token, allows its own limit; idle
    connections and slow bodies are closed."""
    from .body import SMALL_BODY

    ctx = app.dal_context  # type: ignore[attr-defined]
    return tornado.httpserver.HTTPServer(
        app,
        ssl_options=tls,
        xheaders=False,
        max_body_size=SMALL_BODY,
        idle_connection_timeout=IDLE_CONNECTION_SECONDS,
        body_timeout=ctx.body_timeout,
    )


def ssl_context(certfile: str | None, keyfile: str | None) -> ssl.SSLContext | None:
    if not certfile:
        if keyfile:
            raise ValueError("--keyfile needs --certfile")
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    return ctx


def start_retention(ctx: Any, delay: float = RETENTION_DELAY) -> Any:
    """With `retention` set, prune hourly on a thread of its own (store/retention.py); None otherwise."""
    if not ctx.retention:
        return None
    from ..store.retention import HOUR, Retention

    # Under the server's own writer lock: its ingest queues behind one short batch at most.
    job = Retention(
        ctx.store,
        ctx.retention,
        every=HOUR,
        delay=delay,
        lock=lambda: ctx.write_lock,
        on_result=ctx.metrics.retention_done,
    ).start()
    logger.info(
        "retention: clusters that ended over %.1f days ago are deleted hourly",
        ctx.retention / 86400,
    )
    return job


async def serve(
    settings: dict,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    certfile: str | None = None,
    keyfile: str | None = None,
    ready: Any = None,
) -> None:
    """Serve until SIGINT/SIGTERM.  `ready(url)` is called once listening."""
    tls = ssl_context(certfile, keyfile)
    app = make_app(settings)
    ctx = app.dal_context  # type: ignore[attr-defined]
    server = make_server(app, tls)
    server.listen(port, host)
    url = f"{'https' if tls else 'http'}://{host}:{port}"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    retention = start_retention(ctx)
    if ctx.alerts is not None and ctx.alerts.link_base is None:
        ctx.alerts.link_base = url  # no --public-url: the address it listens on
    logger.info("dask-analytics server listening at %s", url)
    if ready is not None:
        ready(url)
    try:
        await stop.wait()
    finally:
        server.stop()
        await server.close_all_connections()
        if retention is not None:
            await asyncio.to_thread(retention.stop)
        ctx.close()
