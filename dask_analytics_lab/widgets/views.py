"""One small class per view; each renders with its own ES module from js/widgets/."""
from __future__ import annotations

import threading
from typing import Any

import traitlets as t

from ._base import LiveView, bundle, table_traits


class TaskGroups(LiveView):
    """Task groups of one computation, live while it runs."""

    _esm = bundle("taskgroups")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    computation = t.Dict().tag(sync=True)
    exceptions = t.List().tag(sync=True)
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
    metrics = t.List().tag(sync=True)
    locals().update(table_traits("groups"))  # their dependency order orders the bars

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
    profile_prefixes = t.List().tag(sync=True)
    profile_prefix = t.Unicode("").tag(sync=True)

    def __init__(self, computation_id: str | None = None, *, cluster_id: str | None = None, **kwargs: Any):
        if (computation_id is None) == (cluster_id is None):
            raise ValueError("Flamegraph needs exactly one of computation_id or cluster_id=")
        title = f"computation {computation_id}" if computation_id else f"cluster {cluster_id}"
        super().__init__(computation_id=computation_id, cluster_id=cluster_id, profile_title=title, **kwargs)


class CodeSnippets(LiveView):
    """The code that made a computation."""

    _esm = bundle("code")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    code = t.List().tag(sync=True)

    def __init__(self, computation_id: str, **kwargs: Any):
        super().__init__(computation_id=computation_id, **kwargs)


class ClusterSummary(LiveView):
    """Workers, threads and memory over time, cost, idle time, versions."""

    _esm = bundle("cluster")
    cluster_id = t.Unicode(None, allow_none=True).tag(sync=True)
    cluster = t.Dict().tag(sync=True)
    locals().update(table_traits("samples"))

    def __init__(self, cluster_id: str, **kwargs: Any):
        super().__init__(cluster_id=cluster_id, **kwargs)


class GpuMetrics(LiveView):
    """GPU utilisation and memory per worker and GPU, with the task groups running."""

    _esm = bundle("gpu")
    cluster_id = t.Unicode(None, allow_none=True).tag(sync=True)
    locals().update(table_traits("gpu"))

    def __init__(self, cluster_id: str, **kwargs: Any):
        super().__init__(cluster_id=cluster_id, **kwargs)


class ShareMixin:
    """The "Share report" button's kernel half: {type: "share"} -> a stored report's link."""

    def _init_share(self) -> None:
        self.on_msg(self._on_share_msg)

    def _on_share_msg(self, _widget: Any, content: dict, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "share":
            self.share_report()

    def share_report(self, *, wait: bool = False) -> None:
        """Make a report of the chosen computation, store it, and put its link in `share`."""
        computation_id = self.computation_id
        if not computation_id:
            self.share = {"state": "error", "message": "Choose a computation first."}
            return
        self.share = {"state": "working", "message": ""}

        def work() -> None:
            from ..reports.share import share_computation

            try:
                row = share_computation(computation_id, store=self.store)
                self.share = {"state": "done", "url": row["url"], "id": row.get("id"), "local": row.get("local", False),
                              "message": ""}
            except Exception as e:
                self.share = {"state": "error", "message": f"Could not make the report: {e}"}

        # Off the kernel's main thread: reading a big profile must not freeze the notebook.
        thread = threading.Thread(target=work, name="dask-analytics-share", daemon=True)
        thread.start()
        if wait:
            thread.join()


class ShareButton(ShareMixin, LiveView):
    """A "Share report" button for one computation."""

    _esm = bundle("share")
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    share = t.Dict({"state": "idle"}).tag(sync=True)

    def __init__(self, computation_id: str, **kwargs: Any):
        # Nothing to poll: the button acts when clicked.
        super().__init__(computation_id=computation_id, start=False, **kwargs)
        self._init_share()
