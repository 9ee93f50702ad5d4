"""Recording a performance report: distributed's `performance_report`, whose twin is
the store's own rows of the block's window (twin.py, as the Share buttons' reports):
after the block the recorder is flushed and the computations it stored in the window
become the twin, through the same builder; both are published (publish.py).  A cluster
analytics was not recording has no rows: its twin holds the block (times, code) and
its page says the report holds no cluster record.  See the package's docstring for how
to use it."""

from __future__ import annotations

import asyncio
import html
import logging
import time
import warnings
from typing import Any

import distributed

from .. import config
from .privacy import NO_CODE, privacy_switches
from .publish import SHARE_HINT, publish

logger = logging.getLogger("dask_analytics_lab")

# Seconds the recorder may take to store what the block ran before the twin is read.
FLUSH_TIMEOUT = 30.0
# Computations whose start is this much before the block's (the client's and the
# scheduler's clocks) still count as the block's.
CLOCK_SLACK = 0.5


def _has_recorder() -> Any:
    """A function for the scheduler: whether analytics records this cluster.  Made here
    so that it is pickled by value: the scheduler needs nothing but distributed."""

    def has_recorder(dask_scheduler: Any) -> bool:
        return "analytics_flush" in dask_scheduler.handlers

    return has_recorder


def _profileless_report() -> Any:
    """On the scheduler: distributed's own performance report with every profile empty.

    A function made here is pickled by value (cloudpickle), so the scheduler needs
    nothing but distributed to run it."""

    async def report(
        dask_scheduler: Any, start: float, last_count: int, code: str, mode: str | None
    ) -> str:
        from distributed import profile
        from distributed.scheduler import Scheduler

        class NoProfile:
            """The scheduler, except that it has no profile to give."""

            def __getattr__(self, name: str) -> Any:
                return getattr(dask_scheduler, name)

            async def get_profile(self, *args: Any, **kwargs: Any) -> dict:
                return profile.create()

        # A stand-in, not a Scheduler: the method reads everything else through __getattr__.
        return await Scheduler.performance_report(
            NoProfile(),  # type: ignore[arg-type]
            start=start,
            last_count=last_count,
            code=code,
            mode=mode,
        )

    return report


def _announcement(url: str | None, filename: str) -> str:
    """What is printed once a report is stored: a link that opens (publish.link_base's
    rule), and under a file:// link, how to get one a teammate can open."""
    if url is None:
        return f"Performance report saved to {filename}\n{SHARE_HINT}"
    if url.startswith("file://"):
        return f"Performance Report Available at: {url}\n{SHARE_HINT}"
    return f"Performance Report Available at: {url}"


class performance_report(distributed.performance_report):
    """distributed.performance_report that also stores the report and prints its link.

    After the block: `.url`, the printed link (None if storing failed, or when no
    browser here could open the report: see publish.link_base), `.report` (the stored row).
    """

    def __init__(
        self,
        filename: str = "dask-report.html",
        *,
        account: str | None = None,
        private: bool = False,
        title: str | None = None,
        store: str | None = None,
        stacklevel: int = 1,
        mode: str | None = None,
        storage_options: dict | None = None,
    ):
        # "inline": BokehJS in the page, which then renders where it may load nothing else.
        super().__init__(
            filename=filename,
            stacklevel=stacklevel,
            mode="inline" if mode is None else mode,
            storage_options=storage_options,
        )
        self.account = account
        self.private = bool(private)
        self.title = title
        self.store = store
        self.url: str | None = None
        self.report: dict | None = None

    def __enter__(self) -> performance_report:
        super().__enter__()
        return self

    async def __aenter__(self) -> performance_report:
        await super().__aenter__()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        # distributed's own, keeping where the block's code is (for the report's Code tab).
        client = distributed.get_client()
        frames = client._get_computation_code(self._stacklevel + 1, nframes=1)
        self._frame = frames[0] if frames else None
        code = frames[0].code if frames else "<Code not available>"
        client.sync(self.__aexit__, exc_type, exc_value, traceback, code=code)

    async def __aexit__(
        self, exc_type: Any, exc_value: Any, traceback: Any, code: str | None = None
    ) -> None:
        client = distributed.get_client()
        recorded = privacy_switches()
        if not recorded["code"]:
            code = NO_CODE
        elif code is None:  # the async path: one frame deeper than distributed's own
            frames = client._get_computation_code(self._stacklevel + 1, nframes=1)
            self._frame = frames[0] if frames else None
            code = frames[0].code if frames else "<Code not available>"
        stop = time.time()
        # distributed puts the code into its page's HTML as it is (a <pre> that Bokeh
        # renders as markup): escaped, it shows as the text it is and runs nothing.
        shown = html.escape(code, quote=False)
        if recorded["profile"]:
            await super().__aexit__(exc_type, exc_value, traceback, code=shown)
        else:
            await self._write_without_profile(client, shown)
        try:
            twin = await self._twin(client, code if recorded["code"] else None, stop)
            page = await asyncio.to_thread(self._read_html)
            self.report = await asyncio.to_thread(
                publish,
                page,
                twin,
                filename=self.filename,
                account=self.account,
                private=self.private,
                title=self.title,
                store=self.store,
            )
            self.url = self.report["url"]
            print(_announcement(self.url, self.filename))
        except Exception as e:
            warnings.warn(
                f"dask-analytics: the performance report is saved in {self.filename} but could not be "
                f"stored in the analytics store: {e}",
                stacklevel=2,
            )

    async def _write_without_profile(self, client: Any, code: str) -> None:
        import fsspec

        data = await client.run_on_scheduler(
            _profileless_report(),
            start=self.start,
            last_count=self.last_count,
            code=code,
            mode=self.mode,
        )
        with fsspec.open(self.filename, mode="w", compression="infer", **self.storage_options) as f:
            f.write(data)

    def _read_html(self) -> str:
        import fsspec

        with fsspec.open(self.filename, mode="r", compression="infer", **self.storage_options) as f:
            return f.read()

    async def _twin(self, client: Any, code: str | None, stop: float) -> dict:
        """The store's rows of the block's window, once the recorder stored them."""
        info = None
        try:
            # Asked first: a scheduler logs a traceback for a handler it does not have.
            if await client.run_on_scheduler(_has_recorder()):
                info = await client.scheduler.analytics_flush(timeout=FLUSH_TIMEOUT)
        except Exception as e:
            logger.info("dask-analytics: the recorder could not be flushed for the report: %r", e)
        frame = getattr(self, "_frame", None)
        block = {
            "start": self.start,
            "stop": stop,
            "code": code,
            "frame": {
                "filename": frame.filename,
                "lineno_frame": frame.lineno_frame,
                "lineno_relative": frame.lineno_relative,
            }
            if frame is not None
            else None,
        }
        return await asyncio.to_thread(self._twin_from_store, info, block)

    def _twin_from_store(self, info: dict | None, block: dict) -> dict:
        from ..readers import open_reader
        from .twin import build_twin

        if info is None or not info.get("cluster_id"):
            return build_twin(None, [], block=block)
        reader = open_reader(self._recorder_store(info["store"]))
        cluster_id = info["cluster_id"]
        rows = reader.list_computations(cluster_id=cluster_id, limit=1000)
        start, stop = block["start"] - CLOCK_SLACK, block["stop"]
        ids = [
            r["computation_id"]
            for r in sorted(rows, key=lambda r: r.get("start") or 0)
            if r.get("start") is not None and start <= r["start"] <= stop
        ]
        return build_twin(reader, ids, block=block, cluster_id=cluster_id)

    def _recorder_store(self, masked: str) -> str:
        """The store the recorder writes to, as this process names it: its URL comes back
        from the scheduler with any password masked."""
        from ..urls import mask_url

        for url in (self.store, config.get("analytics.store")):
            if url and mask_url(config.validate_store(str(url))) == masked:
                return config.validate_store(str(url))
        return masked
