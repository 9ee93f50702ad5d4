"""Recording a performance report: distributed's `performance_report`, which also
gathers a machine-readable twin (summary, task groups, task stream, profile) and
publishes both (publish.py).  See the package's docstring for how to use it."""

from __future__ import annotations

import asyncio
import html
import logging
import time
import warnings
from collections import defaultdict
from typing import Any

import dask
import distributed

from .privacy import NO_CODE, privacy_switches
from .publish import SHARE_HINT, publish

logger = logging.getLogger("dask_analytics_lab")

# Entries of the task stream kept in the twin: enough for any plot, bounded in size.
MAX_TASK_STREAM = 100_000


def _groups_since() -> Any:
    """A function for the scheduler: the computations active since `start`, each with
    its task groups' own figures.  Made here so that it is pickled by value: the
    scheduler needs nothing but distributed to run it."""

    def groups_since(dask_scheduler: Any, start: float) -> list[dict]:
        def summary(tg: Any) -> dict:
            d = tg.all_durations
            return {
                "name": tg.name,
                "prefix": tg.prefix.name,
                "states": {state: n for state, n in tg.states.items() if n},
                "n_tasks": sum(tg.states.values()),
                "n_erred": tg.states.get("erred", 0),
                "compute": float(d.get("compute", 0.0)),
                "transfer": float(d.get("transfer", 0.0)),
                "disk_read": float(d.get("disk-read", 0.0)),
                "disk_write": float(d.get("disk-write", 0.0)),
                "nbytes": int(tg.nbytes_total),
                "start": tg.start or None,
                "stop": tg.stop or None,
                "dependencies": sorted(dep.name for dep in tg.dependencies),
            }

        out = []
        for comp in list(dask_scheduler.computations):
            if comp.stop is not None and 0 < comp.stop < start:
                continue
            groups = [summary(tg) for tg in comp.groups]
            if groups:
                out.append(
                    {"id": str(comp.id), "start": comp.start, "stop": comp.stop, "groups": groups}
                )
        return out

    return groups_since


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


def _task_stream_rows(stream: list[dict]) -> tuple[list[dict], dict[str, float]]:
    """Compact task stream rows and the time spent per action (compute, transfer, ...)."""
    rows: list[dict] = []
    spent: dict[str, float] = defaultdict(float)
    for d in stream:
        for ss in d.get("startstops", ()):
            spent[ss["action"]] += ss["stop"] - ss["start"]
            if len(rows) < MAX_TASK_STREAM:
                rows.append(
                    {
                        "key": str(d.get("key")),
                        "worker": d.get("worker"),
                        "thread": d.get("thread"),
                        "action": ss["action"],
                        "start": ss["start"],
                        "stop": ss["stop"],
                        "status": d.get("status"),
                        "nbytes": d.get("nbytes"),
                    }
                )
    return rows, dict(spent)


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
        await super().__aenter__()  # also starts the scheduler's task stream plugin
        # Tasks are picked by their position in the stream, not by time: the time
        # filter compares the client's clock with the workers' and can drop tasks.
        self._stream_index = await distributed.get_client().scheduler.get_task_stream_index()
        return self

    async def __aexit__(
        self, exc_type: Any, exc_value: Any, traceback: Any, code: str | None = None
    ) -> None:
        client = distributed.get_client()
        recorded = privacy_switches()
        if not recorded["code"]:
            code = NO_CODE
        elif code is None:  # the async path: one frame deeper than distributed's own
            frames = client._get_computation_code(self._stacklevel + 1, nframes=1)
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
            twin = await self._twin(client, code if recorded["code"] else None, stop, recorded)
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

    async def _twin(
        self, client: Any, code: str | None, stop: float, recorded: dict[str, bool]
    ) -> dict:
        from distributed import profile as dask_profile

        start = self.start

        async def no_profile() -> dict:
            return dask_profile.create()

        stream, profile, info = await asyncio.gather(
            client.scheduler.get_task_stream(start_index=self._stream_index),
            client.scheduler.profile(start=start) if recorded["profile"] else no_profile(),
            client.scheduler.identity(),
        )
        try:
            computations = await client.run_on_scheduler(_groups_since(), start=start)
        except Exception as e:  # e.g. the scheduler cannot import this package
            logger.info("dask-analytics: no task groups for the report: %r", e)
            computations = []
        rows, spent = _task_stream_rows(stream)
        workers = info.get("workers", {})
        summary = {
            "start": start,
            "stop": stop,
            "duration": stop - start,
            "n_tasks": len(stream),
            "time_per_action": spent,
            "n_workers": len(workers),
            "n_threads": sum(w.get("nthreads", 0) for w in workers.values()),
            "memory_limit": sum(w.get("memory_limit", 0) or 0 for w in workers.values()),
            "cluster_id": info.get("id"),
            "scheduler": info.get("address"),
            "versions": {"dask": dask.__version__, "distributed": distributed.__version__},
            "code": code,
            "recorded": dict(recorded),
        }
        return {
            "summary": summary,
            "computations": [{k: v for k, v in c.items() if k != "groups"} for c in computations],
            "task_groups": [
                dict(g, computation_id=c["id"]) for c in computations for g in c["groups"]
            ],
            "task_stream": rows,
            "task_stream_truncated": len(rows) < sum(len(d.get("startstops", ())) for d in stream),
            "profile": profile,
        }
