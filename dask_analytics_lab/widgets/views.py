"""One small class per view; each renders with its own ES module from js/widgets/."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import traitlets as t

from ._base import LiveView, bundle, table_traits


class TaskGroups(LiveView):
    """Task groups of one computation, live while it runs."""

    _esm = bundle("taskgroups")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    computation = t.Dict().tag(sync=True)
    exceptions: t.List[dict[str, Any]] = t.List().tag(sync=True)
    runs = t.Dict().tag(sync=True)  # against the earlier runs of the same code
    locals().update(table_traits("groups"))

    def __init__(self, computation_id: str, **kwargs: Any):
        super().__init__(computation_id=computation_id, **kwargs)


class TimeBreakdown(LiveView):
    """Where a computation's time went: one bar per task group by activity (CPU,
    waiting, serialization, disk, network, spill), from Dask's fine performance metrics."""

    _esm = bundle("time")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    computation = t.Dict().tag(sync=True)
    metrics: t.List[dict[str, Any]] = t.List().tag(sync=True)
    locals().update(table_traits("groups"))  # their dependency order orders the bars

    def __init__(self, computation_id: str, **kwargs: Any):
        super().__init__(computation_id=computation_id, **kwargs)


class TaskStream(LiveView):
    """When each task of a computation ran, on which worker and thread (binned per
    worker and prefix past the collector's limit), live while it runs."""

    _esm = bundle("stream")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    computation = t.Dict().tag(sync=True)
    locals().update(table_traits("stream"))  # list_task_stream()'s rows, by id

    def __init__(self, computation_id: str, **kwargs: Any):
        super().__init__(computation_id=computation_id, **kwargs)


class Flamegraph(LiveView):
    """Dask's profile of a computation, or of a whole cluster."""

    _esm = bundle("flamegraph")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    cluster_id = t.Unicode(None, allow_none=True).tag(sync=True)
    profile = t.Dict().tag(sync=True)
    profile_title = t.Unicode("").tag(sync=True)
    # The task prefixes the computation's profile can be narrowed to, and the one chosen
    # ("": all of them).
    profile_prefixes: t.List[str] = t.List().tag(sync=True)
    profile_prefix = t.Unicode("").tag(sync=True)

    def __init__(
        self, computation_id: str | None = None, *, cluster_id: str | None = None, **kwargs: Any
    ):
        if (computation_id is None) == (cluster_id is None):
            raise ValueError("Flamegraph needs exactly one of computation_id or cluster_id=")
        title = f"computation {computation_id}" if computation_id else f"cluster {cluster_id}"
        super().__init__(
            computation_id=computation_id, cluster_id=cluster_id, profile_title=title, **kwargs
        )


class CodeSnippets(LiveView):
    """The code that made a computation."""

    _esm = bundle("code")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    code: t.List[dict[str, Any]] = t.List().tag(sync=True)

    def __init__(self, computation_id: str, **kwargs: Any):
        super().__init__(computation_id=computation_id, **kwargs)


class ClusterSummary(LiveView):
    """Workers, threads and memory over time, cost, idle time, versions, and each
    worker over time (its memory, CPU and tasks; when it joined, left or died)."""

    _esm = bundle("cluster")
    cluster_id = t.Unicode(None, allow_none=True).tag(sync=True)
    cluster = t.Dict().tag(sync=True)
    locals().update(table_traits("samples"))
    locals().update(table_traits("workers"))
    worker_events: t.List[dict[str, Any]] = t.List().tag(sync=True)

    def __init__(self, cluster_id: str, **kwargs: Any):
        super().__init__(cluster_id=cluster_id, **kwargs)


class GpuMetrics(LiveView):
    """GPU utilisation and memory per worker and GPU, with the task groups running."""

    _esm = bundle("gpu")
    cluster_id = t.Unicode(None, allow_none=True).tag(sync=True)
    locals().update(table_traits("gpu"))

    def __init__(self, cluster_id: str, **kwargs: Any):
        super().__init__(cluster_id=cluster_id, **kwargs)


if TYPE_CHECKING:

    class _Shares(LiveView):
        """What ShareMixin is mixed into: a view of one computation with a `share` trait."""

        computation_id = t.Unicode(None, allow_none=True)
        share = t.Dict()
else:
    _Shares = object


class ShareMixin(_Shares):
    """The "Share report" button's kernel half (js/widgets/share.ts):

    - {type: "share", private} -> a stored report; its link (or what to do) in `share`;
    - {type: "download"} -> the report as one HTML file, sent back as
      {type: "download", filename} with the page in a buffer, or {type: "download", error}.
    """

    def _init_share(self) -> None:
        self.on_msg(self._on_share_msg)

    def _on_share_msg(self, _widget: Any, content: dict, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "share":
            self.share_report(private=bool(content.get("private")))
        elif content.get("type") == "download":
            self.download_report()

    def _off_thread(self, work: Callable[[], None], wait: bool) -> None:
        # Off the kernel's main thread: reading a big profile must not freeze the notebook.
        thread = threading.Thread(target=work, name="dask-analytics-share", daemon=True)
        thread.start()
        if wait:
            thread.join()

    def share_report(self, *, private: bool = False, wait: bool = False) -> None:
        """Make a report of the chosen computation, store it, and put its link in `share`."""
        computation_id = self.computation_id
        if not computation_id:
            self.share = {"state": "error", "message": "Choose a computation first."}
            return
        self.share = {"state": "working", "private": private, "message": ""}

        def work() -> None:
            from ..reports.share import share_computation

            try:
                row = share_computation(computation_id, store=self.store, private=private)
                self.share = {
                    "state": "done",
                    "url": row["url"],
                    "id": row.get("id"),
                    "local": row["local"],
                    "private": row["private"],
                    "server": row["server"],
                    "message": row["hint"] or "",
                }
            except Exception as e:  # a ShareError says what to do; anything else, what broke
                self.share = {"state": "error", "private": private, "message": str(e)}

        self._off_thread(work, wait)

    def download_report(self, *, wait: bool = False) -> None:
        """Send the chosen computation's report, one self-contained HTML file, to the views."""
        computation_id = self.computation_id

        def work() -> None:
            from ..reports.share import report_file

            if not computation_id:
                self.send({"type": "download", "error": "Choose a computation first."})
                return
            try:
                filename, page = report_file(computation_id, store=self.store)
            except Exception as e:
                self.send({"type": "download", "error": str(e)})
                return
            # A buffer, not JSON: the page is megabytes of script and data.
            self.send({"type": "download", "filename": filename}, [page.encode("utf-8")])

        self._off_thread(work, wait)


class ShareButton(ShareMixin, LiveView):
    """A "Share report" button for one computation."""

    _esm = bundle("share")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    share = t.Dict({"state": "idle"}).tag(sync=True)

    def __init__(self, computation_id: str, **kwargs: Any):
        # Nothing to poll: the button acts when clicked.
        super().__init__(computation_id=computation_id, start=False, **kwargs)
        self._init_share()
