"""`monitor()`: the inline widget, live while work runs, history after."""
from __future__ import annotations

from typing import Any

import traitlets as t

from .. import api
from ._base import LiveView, bundle, table_traits
from .views import ShareMixin


class MonitorWidget(ShareMixin, LiveView):
    """One cluster: its computations (newest first), the chosen one's task groups,
    profile and code, the cluster summary, GPU metrics, and a Share-report button."""

    _esm = bundle("monitor")
    title = t.Unicode("Dask analytics").tag(sync=True)
    where = t.Unicode("").tag(sync=True)
    cluster_id = t.Unicode(None, allow_none=True).tag(sync=True)
    follow_cluster = t.Bool(False).tag(sync=True)
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    follow = t.Bool(True).tag(sync=True)
    tab = t.Unicode("groups").tag(sync=True)
    cluster = t.Dict().tag(sync=True)
    computation = t.Dict().tag(sync=True)
    exceptions = t.List().tag(sync=True)
    runs = t.Dict().tag(sync=True)
    code = t.List().tag(sync=True)
    profile = t.Dict().tag(sync=True)
    profile_title = t.Unicode("").tag(sync=True)
    profile_prefixes = t.List().tag(sync=True)
    profile_prefix = t.Unicode("").tag(sync=True)
    share = t.Dict({"state": "idle"}).tag(sync=True)
    locals().update(table_traits("computations"))
    locals().update(table_traits("groups"))
    locals().update(table_traits("samples"))
    locals().update(table_traits("gpu"))

    def __init__(self, cluster_id: str | None = None, *, computation_id: str | None = None,
                 store: str | None = None, interval: float = 1.0, start: bool = True, **kwargs: Any):
        super().__init__(
            cluster_id=cluster_id, follow_cluster=cluster_id is None and computation_id is None,
            computation_id=computation_id, follow=computation_id is None,
            store=store, interval=interval, where=api.where(store), start=start, **kwargs)
        self._init_share()
        self.observe(self._on_select, names="computation_id")
        self.observe(self._on_follow, names="follow")

    def _on_select(self, change: dict) -> None:
        self._feed.select(change["new"])

    def _on_follow(self, change: dict) -> None:
        if change["new"]:
            self._feed.poke()  # jump to the newest now, not at the next tick


def _current_cluster(client: Any = None) -> str | None:
    """The cluster id of `client` (or of this process's current Client), registering
    analytics on it first if nobody did."""
    if client is None:
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            return None
    try:
        return api.status(client)["cluster_id"]
    except Exception:
        # Not registered yet (the scheduler has no analytics handler): record it now.
        return api.register(client)["cluster_id"]


def monitor(client: Any = None, *, cluster_id: str | None = None, computation_id: str | None = None,
            store: str | None = None, interval: float = 1.0) -> MonitorWidget:
    """The analytics of a cluster as an inline widget, live while work runs.

    With no arguments: the current Client's cluster (analytics is registered on it if
    it was not), else the newest cluster in the store, following newer ones as they
    start.  `cluster_id=` / `computation_id=` open a past one; `store=` reads another
    store than `analytics.store`.
    """
    if cluster_id is None and computation_id is None:
        cluster_id = _current_cluster(client)
    return MonitorWidget(cluster_id, computation_id=computation_id, store=store, interval=interval)
