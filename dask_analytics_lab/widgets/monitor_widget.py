"""`monitor()`: the inline widget, live while work runs, history after."""

from __future__ import annotations

from typing import Any

import traitlets as t

from .. import api
from ..polling import LIVE
from ._base import LiveView, bundle, table_traits
from .views import ShareMixin


class MonitorWidget(ShareMixin, LiveView):
    """One cluster: its computations (newest first), the chosen one's task groups,
    time breakdown, task stream, profile and code, the cluster summary with each worker
    over time, GPU metrics, and a Share-report button.

    A picker over the store's recorded clusters (`clusters`, newest first) switches
    every tab to another cluster's history (the browser sets `cluster_id` and turns
    `follow_cluster` off); `home` is the cluster it opened on, to go back to.
    """

    _esm = bundle("monitor")
    title = t.Unicode("Dask analytics").tag(sync=True)
    where = t.Unicode("").tag(sync=True)
    cluster_id = t.Unicode(None, allow_none=True).tag(sync=True)
    follow_cluster = t.Bool(False).tag(sync=True)
    # The picker: the newest recorded clusters ({cluster_id, name, user, started,
    # status, ended, ...}), and the cluster it opened on: {"cluster_id", "follow", "label",
    # "tag"} (the "Back to <label>" button, the <tag> beside it in the list).
    clusters: t.List[dict[str, Any]] = t.List().tag(sync=True)
    home = t.Dict().tag(sync=True)
    computation_id = t.Unicode(None, allow_none=True).tag(sync=True)
    follow = t.Bool(True).tag(sync=True)
    tab = t.Unicode("groups").tag(sync=True)
    cluster = t.Dict().tag(sync=True)
    computation = t.Dict().tag(sync=True)
    exceptions: t.List[dict[str, Any]] = t.List().tag(sync=True)
    runs = t.Dict().tag(sync=True)
    # Why it was slow: {"computation_id", "findings": explain()'s}, once it ended (the
    # Findings tab, and the top one above the task groups).
    findings = t.Dict().tag(sync=True)
    code: t.List[dict[str, Any]] = t.List().tag(sync=True)
    # Where the chosen computation's time went: get_computation()["metrics"].
    metrics: t.List[dict[str, Any]] = t.List().tag(sync=True)
    profile = t.Dict().tag(sync=True)
    profile_title = t.Unicode("").tag(sync=True)
    profile_prefixes: t.List[str] = t.List().tag(sync=True)
    profile_prefix = t.Unicode("").tag(sync=True)
    share = t.Dict({"state": "idle"}).tag(sync=True)
    locals().update(table_traits("computations"))
    locals().update(table_traits("groups"))
    # When each of the chosen computation's tasks ran: list_task_stream()'s rows, by id.
    locals().update(table_traits("stream"))
    locals().update(table_traits("samples"))
    locals().update(table_traits("gpu"))
    # Each worker over time (list_worker_samples, thinned per worker) and its joins and
    # departures (the worker-joined / worker-left events): the Cluster tab's Workers.
    locals().update(table_traits("workers"))
    worker_events: t.List[dict[str, Any]] = t.List().tag(sync=True)

    def __init__(
        self,
        cluster_id: str | None = None,
        *,
        computation_id: str | None = None,
        store: str | None = None,
        interval: float = LIVE,
        start: bool = True,
        home_label: str | None = None,
        **kwargs: Any,
    ):
        follow_cluster = cluster_id is None and computation_id is None
        if follow_cluster:
            label, tag = "the newest cluster", "newest"
        elif home_label:
            label, tag = home_label, home_label
        else:
            label, tag = "the cluster it opened on", "opened here"
        home = {"cluster_id": cluster_id, "follow": follow_cluster, "label": label, "tag": tag}
        super().__init__(
            cluster_id=cluster_id,
            follow_cluster=follow_cluster,
            computation_id=computation_id,
            follow=computation_id is None,
            home=home,
            store=store,
            interval=interval,
            where=api.where(store),
            start=start,
            **kwargs,
        )
        self._init_share()
        self.on_msg(self._on_clusters_msg)
        self.observe(self._on_select, names="computation_id")
        self.observe(self._on_follow, names="follow")
        self.observe(self._on_cluster, names="cluster_id")
        self.observe(self._on_follow_cluster, names="follow_cluster")

    def show_cluster(self, cluster_id: str | None = None) -> None:
        """Show another recorded cluster's history in every tab (what the picker does);
        no argument: back to the cluster it opened on."""
        with self.hold_trait_notifications():
            if cluster_id is None:
                self.follow_cluster = bool(self.home.get("follow"))
                if self.home.get("cluster_id"):
                    self.cluster_id = self.home["cluster_id"]
            else:
                self.follow_cluster = False
                self.cluster_id = cluster_id

    def _on_clusters_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "clusters":
            self._feed.want_clusters()

    def _on_cluster(self, change: dict) -> None:
        new = change["new"]
        if new and not self.home.get("cluster_id") and not self.home.get("follow"):
            # Opened on a computation: its cluster is where "back" goes.
            self.home = {**self.home, "cluster_id": new}
        self._feed.show_cluster(new)

    def _on_follow_cluster(self, change: dict) -> None:
        if change["new"]:
            self._feed.poke()  # the newest cluster now, not at the next tick

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
    if _recording(client):
        return api.status(client)["cluster_id"]  # its trouble is the user's to see
    return api.register(client)["cluster_id"]


def _recording(client: Any) -> bool:
    """Whether the scheduler has the recorder: asked directly, so that a recorder that is
    slow to answer is not registered a second time."""
    try:
        return bool(client.run_on_scheduler(api.is_recording))
    except Exception:
        # It runs no function sent to it (distributed.scheduler.pickle off): the
        # recorder's own handler answers only where there is one.
        try:
            api.status(client)
        except Exception:
            return False
        return True


def monitor(
    client: Any = None,
    *,
    cluster_id: str | None = None,
    computation_id: str | None = None,
    store: str | None = None,
    interval: float = LIVE,
) -> MonitorWidget:
    """The analytics of a cluster as an inline widget, live while work runs.

    With no arguments: the current Client's cluster (analytics is registered on it if
    it was not), else the newest cluster in the store, following newer ones as they
    start.  `cluster_id=` / `computation_id=` open a past one; `store=` reads another
    store than `analytics.store`.  In the widget, the cluster's name opens a picker over
    the store's recorded clusters: any of them, and back.
    """
    home_label = None
    if cluster_id is None and computation_id is None:
        cluster_id = _current_cluster(client)
        if cluster_id is not None:
            home_label = "this notebook"
    return MonitorWidget(
        cluster_id,
        computation_id=computation_id,
        store=store,
        interval=interval,
        home_label=home_label,
    )
