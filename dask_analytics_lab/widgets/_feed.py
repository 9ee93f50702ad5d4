"""What a widget reads from the store each tick, and what it sends on.

Every read goes through dask_analytics_lab.api (widgets never speak SQL), as often and
as much as the rules in polling.py say (the JupyterLab panel follows the same), and each is
cheap: one cluster row, the last few samples, the newest computations (their totals
live on the row), and the chosen computation's groups only when its row says it
changed.  Tables go out through KeyedTable, so only changed rows travel.

A feed serves any widget: it fills the traits the widget has and skips the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .. import api
from ..display import clean, label_of, stream_rows
from ..polling import RULES, Kept, every_polls, history_period
from ._sync import KeyedTable
from ._ticker import TICKER

logger = logging.getLogger("dask_analytics_lab")

MAX_CLUSTERS = 100  # the cluster picker's list: the newest clusters of the store
CLUSTERS_EVERY = 10  # ticks between reads of that list (opening the picker reads it at once)
PROFILE_TRIES = 30  # ticks to wait for a finished computation's profile to land


def is_live(cluster: dict | None) -> bool:
    """Whether the store says this cluster is live (its rule, in store/queries.py, is
    the only one: a view never decides "lost" by a clock of its own)."""
    if not cluster:
        return False
    status = cluster.get("status")
    if status is not None:
        return status == "live"
    return cluster.get("stopped") is None  # a reader from before `status`


class Feed:
    """Polls the store for one widget; runs on the ticker thread (see _ticker.py)."""

    def __init__(self, widget: Any):
        self.w = widget
        self.lock = threading.RLock()
        self.due = 0.0
        self.live = True
        self.ticks = 0
        w = widget
        has = w.has_trait
        self.tables = {
            name: KeyedTable(w, name, key)
            for name, key in (
                ("groups", "name"),
                ("computations", "computation_id"),
                ("samples", "time"),
                ("gpu", "id"),
                ("workers", "id"),
                ("stream", "id"),
            )
            if has(f"{name}_base")
        }
        self._labels: dict[str, str] = {}
        self._comp_rows: dict[str, dict] = {}
        self._reset_selection(getattr(w, "computation_id", None))
        self._samples_time: float | None = None
        self._cluster: dict | None = None
        self._keep_series()
        self._shown_cluster: str | None = None  # the cluster whose history the traits hold
        self._clusters_due = True
        if w.has_trait("profile_prefix"):
            w.observe(self._prefix_changed, names="profile_prefix")

    def _keep_series(self) -> None:
        """What is kept of the cluster's series, read again and again (polling.Kept)."""
        self._samples = Kept("samples")
        self._gpu = Kept("gpu")
        self._workers = Kept("workers")
        self._events = {topic: Kept("events") for topic in RULES["events"]["topics"]}

    # --- scheduling ---------------------------------------------------------
    def period(self) -> float:
        # History does not change: look again now and then (a late stop message).
        return self.w.interval if self.live else history_period(self.w.interval)

    @property
    def running(self) -> bool:
        return TICKER.has(self)

    def start(self) -> None:
        TICKER.add(self)

    def stop(self) -> None:
        TICKER.discard(self)

    def poke(self) -> None:
        """Tick as soon as possible (the user chose something)."""
        self.due = 0.0
        TICKER.wake()

    def want_clusters(self) -> None:
        """Read the list of recorded clusters now (the picker was opened)."""
        self._clusters_due = True
        self.poke()

    def show_cluster(self, cluster_id: str | None) -> None:
        """The widget's cluster_id changed (the picker, or following the newest): every
        trait that holds the old cluster's history starts over, at once."""
        with self.lock:
            if cluster_id != self._shown_cluster:
                if self._shown_cluster is not None:
                    self._cluster_changed()
                self._shown_cluster = cluster_id
        self.poke()

    def select(self, computation_id: str | None, *, force: bool = False) -> None:
        """Another computation chosen (by a click, or by following the newest)."""
        with self.lock:
            if computation_id == self._selected and not force:
                return
            with self.w.hold_sync():
                self._reset_selection(computation_id)
                w = self.w
                for name in ("groups", "stream"):
                    if name in self.tables:
                        self.tables[name].replace([])
                for name, empty in (
                    ("computation", {}),
                    ("exceptions", []),
                    ("code", []),
                    ("metrics", []),
                    ("profile", {}),
                    ("runs", {}),
                    ("profile_prefixes", []),
                    ("profile_prefix", ""),
                ):
                    if w.has_trait(name):
                        setattr(w, name, empty)
                if w.has_trait("share"):
                    w.share = {"state": "idle"}
                if w.has_trait("computation_id") and w.computation_id != computation_id:
                    w.computation_id = computation_id
        self.poke()

    def _reset_selection(self, computation_id: str | None) -> None:
        self._selected = computation_id
        self._comp_updated: float | None = None
        self._comp_state: str | None = None
        self._comp_erred: int | None = None
        self._exc_tries = 0
        self._comp_stop: float | None = None
        self._profile_loaded = False
        self._profile_tries = 0
        self._profile_next = 0
        self._profile_key: tuple | None = None
        self._stream_next = 0
        self._stream_done = False

    def _prefix_changed(self, _change: Any = None) -> None:
        """Another task prefix chosen in the flamegraph: read its profile now."""
        with self.lock:
            self._profile_loaded = False
            self._profile_tries = 0
            self._profile_next = 0
            self._profile_key = None
        self.poke()

    # --- one tick -------------------------------------------------------------
    def tick(self) -> None:
        with self.lock:
            w = self.w
            store = w.store
            try:
                with w.hold_sync():
                    live = self._tick(store)
                    if w.error:
                        w.error = ""
                self.live = live
            except Exception as e:  # the store may be away for a moment: say so, try again
                said = f"{type(e).__name__}: {e}"
                if said != w.error:  # logged as shown: once, not at every tick it lasts
                    logger.warning("dask-analytics: the monitor shows: %s", said)
                w.error = said
            self.ticks += 1

    def _tick(self, store: str | None) -> bool:
        w = self.w
        live = False
        cluster_id = self._cluster_id(store)
        if cluster_id and w.has_trait("cluster"):
            live |= self._poll_cluster(cluster_id, store)
        if cluster_id and "computations" in self.tables:
            live |= self._poll_computations(cluster_id, store)
        if self._selected and any(
            w.has_trait(n) for n in ("computation", "groups_base", "code", "metrics", "profile")
        ):
            live |= self._poll_computation(self._selected, store)
        if w.has_trait("profile"):
            live |= self._poll_profile(cluster_id, store)
        if self._selected and "stream" in self.tables:
            live |= self._poll_stream(self._selected, store)
        if cluster_id and "gpu" in self.tables:
            self._poll_gpu(cluster_id, store)
        if cluster_id and "workers" in self.tables:
            self._poll_workers(cluster_id, store)
        if w.has_trait("clusters"):
            self._poll_clusters(store)
        return live

    def _cluster_id(self, store: str | None) -> str | None:
        w = self.w
        if not w.has_trait("cluster_id"):
            return None
        if getattr(w, "follow_cluster", False):
            # No cluster named: show the newest one the store knows, and move on to
            # the next cluster when one starts.
            newest = api.list_clusters(limit=1, store=store)
            cid = newest[0]["cluster_id"] if newest else None
            if cid and cid != w.cluster_id:
                w.cluster_id = cid
        elif not w.cluster_id and self._selected:
            w.cluster_id = api.get_computation(self._selected, store=store)["cluster_id"]
        cid = w.cluster_id
        if cid != self._shown_cluster:  # a widget that does not observe its cluster_id
            self.show_cluster(cid)
        return cid

    def _cluster_changed(self) -> None:
        """Forget what was read of the cluster shown so far: its row, samples, GPU
        samples, computations and the chosen computation (or the cluster's profile)."""
        w = self.w
        with w.hold_sync():
            self._samples_time = None
            self._comp_rows = {}
            self._cluster = None
            self._keep_series()
            for name in ("computations", "samples", "gpu", "workers"):
                if name in self.tables:
                    self.tables[name].replace([])
            if w.has_trait("cluster"):
                w.cluster = {}
            if w.has_trait("worker_events"):
                w.worker_events = []
            self.select(None, force=True)

    def _poll_clusters(self, store: str | None) -> None:
        """The picker's list: the newest MAX_CLUSTERS clusters, each with what the
        picker shows (name, user, started, the store's status), and the one shown
        even when it is older than those."""
        if not (self._clusters_due or self.ticks % CLUSTERS_EVERY == 0):
            return
        self._clusters_due = False
        keep = (
            "cluster_id",
            "name",
            "user",
            "started",
            "status",
            "ended",
            "stopped",
            "last_seen",
            "stop_reason",
        )
        rows = [
            {k: r.get(k) for k in keep} for r in api.list_clusters(limit=MAX_CLUSTERS, store=store)
        ]
        shown = self._cluster
        if (
            shown
            and shown.get("cluster_id")
            and all(r["cluster_id"] != shown["cluster_id"] for r in rows)
        ):
            rows.append({k: shown.get(k) for k in keep})
        self.w.clusters = clean(rows)

    def _poll_cluster(self, cluster_id: str, store: str | None) -> bool:
        w = self.w
        row = clean(api.get_cluster(cluster_id, store=store))
        self._cluster = row
        w.cluster = row
        table = self.tables.get("samples")
        if table is not None and row.get("sample_time") != self._samples_time:
            kept = self._samples
            read = api.list_cluster_samples(cluster_id, limit=kept.limit(), store=store)
            table.update(kept.merge(clean(read)))
            self._samples_time = row.get("sample_time")
        return is_live(row)

    def _poll_computations(self, cluster_id: str, store: str | None) -> bool:
        w = self.w
        rows = clean(
            api.list_computations(cluster_id, limit=RULES["computations"]["limit"], store=store)
        )
        fetched = 0
        for r in rows:
            cid = r["computation_id"]
            if r.get("label"):
                continue  # stored with the computation when it was recorded
            # A computation recorded before labels were stored: name it from its groups.
            if cid not in self._labels and r.get("state") != "running" and fetched < 3:
                # A finished computation never changes: read its groups once, for a name.
                try:
                    self._labels[cid] = label_of(
                        api.get_computation(cid, store=store).get("groups") or []
                    )
                except Exception:
                    self._labels[cid] = ""
                fetched += 1
            r["label"] = self._labels.get(cid) or None
        self._comp_rows = {r["computation_id"]: r for r in rows}
        self.tables["computations"].update(rows)
        if rows and getattr(w, "follow", False) and rows[0]["computation_id"] != self._selected:
            self.select(rows[0]["computation_id"])
        elif rows and not self._selected:
            self.select(rows[0]["computation_id"])
        return any(r.get("state") == "running" for r in rows)

    def _poll_computation(self, computation_id: str, store: str | None) -> bool:
        w = self.w
        listed = self._comp_rows.get(computation_id)
        # The computation's row does not move when its last metrics land (after its
        # stop): read it again for a few seconds.
        late = (
            w.has_trait("metrics")
            and self._comp_stop is not None
            and self._comp_state != "running"
            and time.time() - self._comp_stop < RULES["metrics"]["after"]
        )
        fresh = listed is None or listed.get("updated") != self._comp_updated
        detail = clean(api.get_computation(computation_id, store=store)) if fresh or late else None
        if detail is not None and w.has_trait("metrics"):
            metrics = detail.get("metrics") or []
            if metrics != w.metrics:
                w.metrics = metrics
        if fresh and detail is not None:
            detail.pop("metrics", None)
            groups = detail.pop("groups", None) or []
            code = detail.pop("code", None) or []
            self._comp_updated = detail.get("updated")
            self._comp_state = detail.get("state")
            self._comp_stop = detail.get("stop")
            if w.has_trait("computation"):
                w.computation = detail
            if "groups" in self.tables:
                self.tables["groups"].update(groups)
            if w.has_trait("code"):
                w.code = [c for c in code if c.get("text")]
            if groups and not detail.get("label"):
                self._labels[computation_id] = label_of(groups)
            if w.has_trait("profile_prefixes"):
                prefixes = sorted({g.get("prefix") or g["name"] for g in groups})
                if prefixes != w.profile_prefixes:
                    w.profile_prefixes = prefixes
            if w.has_trait("runs") and self._comp_state != "running":
                # Against the earlier runs of this code: only once it ended (a running
                # one's figures are partial), and again if a late message changes it.
                w.runs = clean(api.run_summary(computation_id, store=store))
            if w.has_trait("findings"):
                # From the whole record: only once it ended (a running one's is partial).
                found = (
                    []
                    if self._comp_state == "running"
                    else api.explain(computation_id, store=store)
                )
                w.findings = clean({"computation_id": computation_id, "findings": found})
            n_erred = detail.get("n_erred") or 0
            if n_erred != self._comp_erred:
                self._comp_erred = n_erred
                self._exc_tries = 10 if n_erred else 0
        if w.has_trait("exceptions") and self._exc_tries > 0:
            # Exceptions land with or just after the counts that announce them.
            rows = clean(
                api.list_exceptions(
                    computation_id=computation_id, limit=RULES["exceptions"]["limit"], store=store
                )
            )
            w.exceptions = rows
            self._exc_tries = 0 if rows and self._comp_state != "running" else self._exc_tries - 1
        return self._comp_state in (None, "running") or late

    def _poll_profile(self, cluster_id: str | None, store: str | None) -> bool:
        w = self.w
        if self._selected:
            prefix = getattr(w, "profile_prefix", "") or None
            if self._comp_state in (None, "running"):
                # The scheduler records a running computation's profile so far every few
                # seconds: show it as it grows.
                if self.ticks < self._profile_next:
                    return False
                self._profile_next = self.ticks + every_polls(RULES["profile"]["every"], w.interval)
                self._set_profile(
                    api.get_profile(computation_id=self._selected, prefix=prefix, store=store)
                )
                return False
            if self._profile_loaded or self._profile_tries >= PROFILE_TRIES:
                return False
            self._profile_tries += 1
            tree = api.get_profile(computation_id=self._selected, prefix=prefix, store=store)
            self._set_profile(tree)
            # The final profile lands two profile cycles after the computation's end: until
            # then what is stored may be the last live one.
            settled = (
                self._comp_stop is None
                or time.time() - self._comp_stop > RULES["profile"]["final_after"]
            )
            if tree.get("count") and settled:
                self._profile_loaded = True
                return False
            return True  # keep ticking until it lands
        if cluster_id and (self.ticks % 10 == 0 or not self._profile_loaded):
            tree = api.get_profile(cluster_id=cluster_id, store=store)
            if tree.get("count") != (w.profile or {}).get("count"):
                w.profile = tree
            self._profile_loaded = True
        return False

    def _poll_stream(self, computation_id: str, store: str | None) -> bool:
        """Every few seconds while it runs; after its stop, until its last rows (sent on
        the collector's next tick, binned ones sealed) have landed."""
        w = self.w
        if self._stream_done or self.ticks < self._stream_next:
            return False
        self._stream_next = self.ticks + every_polls(RULES["stream"]["every"], w.interval)
        settled = self._comp_state not in (None, "running") and (
            self._comp_stop is None
            or time.time() - self._comp_stop > RULES["profile"]["final_after"]
        )
        # A growing stream travels as new rows; a binned one's replaced bins, as a rebase.
        self.tables["stream"].update(
            stream_rows(
                api.list_task_stream(computation_id, limit=RULES["stream"]["limit"], store=store)
            )
        )
        self._stream_done = settled
        return not settled

    def _set_profile(self, tree: dict) -> None:
        # Sent when it changed: a live profile only grows, another prefix's is another.
        key = (getattr(self.w, "profile_prefix", ""), tree.get("count"))
        if key != self._profile_key:
            self._profile_key = key
            self.w.profile = tree

    def _ended(self) -> bool:
        # The store stores a cluster's end after its last samples and departures: one
        # read after it has everything.
        return bool(self._cluster) and not is_live(self._cluster)

    def _poll_gpu(self, cluster_id: str, store: str | None) -> None:
        kept, ended = self._gpu, self._ended()
        if not kept.due(self.ticks, self.w.interval, ended):
            return
        read = api.list_gpu_metrics(cluster_id, since=kept.since(), limit=kept.limit(), store=store)
        self.tables["gpu"].update(kept.merge(clean(read), ended=ended))

    def _poll_workers(self, cluster_id: str, store: str | None) -> None:
        # Only what came since the last read (O(new samples), not the cluster's life), thinned
        # together with what is kept: each stretch's peaks survive every re-thinning.
        kept, ended = self._workers, self._ended()
        if kept.due(self.ticks, self.w.interval, ended):
            read = api.list_worker_samples(
                cluster_id, since=kept.since(), limit=kept.limit(), store=store
            )
            self.tables["workers"].update(kept.merge(clean(read), ended=ended))
        if not self.w.has_trait("worker_events"):
            return
        read_any = False
        for topic, kept in self._events.items():
            if kept.due(self.ticks, self.w.interval, ended):
                read = api.list_events(
                    cluster_id, topic=topic, since=kept.since(), limit=kept.limit(), store=store
                )
                kept.merge(clean(read), ended=ended)
                read_any = True
        if read_any:
            events = sorted(
                (e for kept in self._events.values() for e in kept.rows), key=lambda e: e["time"]
            )
            if events != self.w.worker_events:
                self.w.worker_events = events
