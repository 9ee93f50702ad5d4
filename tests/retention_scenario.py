"""Clusters on both sides of a 90-day retention cut-off, shared by the prune tests and the
PostgreSQL partition tests (both check that a prune keeps exactly what it should)."""

from __future__ import annotations

import time

from dask_analytics_lab.store import kept
from dask_analytics_lab.store.alerts import AlertLog
from dask_analytics_lab.store.team import TeamStore

from .factories import Cluster, every_table

DAY = 86400.0
NOW = time.time()


def scenario(store) -> dict[str, str]:
    """Clusters on both sides of a 90-day cut-off; returns {role: cluster id}."""
    old = Cluster("old", t0=NOW - 100 * DAY)  # stopped 100 days ago
    lost = Cluster("lost", t0=NOW - 95 * DAY)  # never stopped, silent for 95 days
    recent = Cluster("recent", t0=NOW - 10 * DAY)  # shares snippet h-shared with `old`
    long_job = Cluster("long-job", t0=NOW - 100 * DAY)  # started before the cut-off, stopped after
    live = Cluster(
        "live", account="team-b", t0=NOW - 200 * DAY
    )  # started 200 days ago, still recording
    msgs = every_table(old, "c-old", ["h-shared", "h-old"])
    msgs += every_table(lost, "c-lost", ["h-lost"], stop=False)
    msgs += every_table(recent, "c-recent", ["h-shared"])
    msgs += every_table(long_job, "c-long", ["h-long"], stop=False) + [
        long_job.stop(stopped=NOW - DAY)
    ]
    msgs += every_table(live, "c-live", ["h-old"], stop=False) + [live.sample(at=NOW - 5)]
    store.ingest(msgs)
    # Another account's messages for the old cluster, dropped by a team server and
    # remembered (store/team_schema.dropped_messages): they go with the cluster.
    TeamStore(store).remember_dropped("team-x", [(old.id, 7)], now=NOW - 100 * DAY)
    # An alert fired for each cluster's computation (store/alerts.py): it goes with it.
    for c, comp in ((old, "c-old"), (lost, "c-lost"), (recent, "c-recent"), (live, "c-live")):
        AlertLog(store).claim(
            rule="failed",
            subject=comp,
            webhook="team",
            cluster_id=c.id,
            computation_id=comp,
            fired=c.t,
            title=f"Computation failed: {comp}",
            link=None,
            body={},
        )
    # Findings kept with each computation (findings/kept.py): they go with it.
    with store.transaction() as conn:
        for c, comp in ((old, "c-old"), (lost, "c-lost"), (recent, "c-recent"), (live, "c-live")):
            kept.keep(
                conn,
                cluster_id=c.id,
                computation_id=comp,
                settings="thresholds",
                final=True,
                found=[{"kind": "failures", "impact": 2.0, "title": f"{comp} failed"}],
                now=c.t,
            )
    return {
        "old": old.id,
        "lost": lost.id,
        "recent": recent.id,
        "long": long_job.id,
        "live": live.id,
    }


def kept_part(export: dict, keep: set[str]) -> dict:
    return {
        name: [r for r in rows if r.get("cluster_id", None) in keep]
        for name, rows in export.items()
        if name != "code_snippets"
    }
