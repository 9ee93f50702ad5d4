# Written by scripts/gen_reads.py from reads.py: do not edit, run it instead.

"""The public read functions (api.py exports them): each opens the reader of
`store` (default `analytics.store`: readers.open_reader) and calls its method.
"""

from __future__ import annotations

from typing import Any

from .readers import open_reader

__all__ = [
    "list_clusters",
    "get_cluster",
    "list_cluster_samples",
    "list_computations",
    "cost_report",
    "get_computation",
    "list_task_groups",
    "list_exceptions",
    "list_events",
    "list_topics",
    "get_profile",
    "list_worker_samples",
    "list_task_stream",
    "list_gpu_metrics",
    "list_runs",
    "compare",
    "run_summary",
    "explain",
    "cluster_findings",
    "export",
]


def list_clusters(
    *,
    user: str | None = None,
    state: str | None = None,
    since: Any = None,
    until: Any = None,
    text: str | None = None,
    finding: str | None = None,
    before: str | None = None,
    limit: int | None = 100,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """Recorded clusters, newest first (by start, then id).

    user / account: exactly (a team server's token reads its own account only);
    state: "live", "stopped" or "lost"; since / until: started in [since, until),
    each seconds since the epoch, a datetime, an ISO date or time
    ('2026-11-01', '2026-11-01T12:00:00Z'; no offset means UTC) or an age ('7d':
    that long ago); text: in the cluster's name, any case; finding: with a computation
    that has a finding of this kind (as for list_computations).

    Each row has a `cursor`: `before=rows[-1]["cursor"]` gives the next, older page
    (an empty list after the last).  A bad value raises ValueError saying what to pass.
    """
    return open_reader(store).list_clusters(
        user=user,
        state=state,
        since=since,
        until=until,
        text=text,
        finding=finding,
        before=before,
        limit=limit,
        account=account,
    )


def get_cluster(
    cluster_id: str, *, account: str | None = None, store: str | None = None
) -> dict[str, Any]:
    """One cluster (NotFound for an id this reader may not see)."""
    return open_reader(store).get_cluster(cluster_id=cluster_id, account=account)


def list_cluster_samples(
    cluster_id: str,
    *,
    limit: int | None = 10000,
    offset: int = 0,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """Workers, threads and memory over time for one cluster, oldest first."""
    return open_reader(store).list_cluster_samples(
        cluster_id=cluster_id, limit=limit, offset=offset, account=account
    )


def list_computations(
    cluster_id: str | None = None,
    *,
    user: str | None = None,
    state: str | None = None,
    since: Any = None,
    until: Any = None,
    text: str | None = None,
    finding: str | None = None,
    before: str | None = None,
    limit: int | None = 100,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """Computations with their totals, newest first (by start, then id); all
    clusters when cluster_id is None.

    user / account: of its cluster; state: "running", "finished", "erred",
    "cancelled" or "lost" (was running when its cluster ended); since / until: start
    in [since, until), each seconds since the epoch, a datetime, an ISO date or time
    ('2026-11-01', '2026-11-01T12:00:00Z'; no offset means UTC) or an age ('7d':
    that long ago); text: in its label ("read_parquet → groupby-agg"),
    its code line ("df.groupby('k').v.mean().compute()") or a task prefix of it, any
    case; finding: with a finding of this kind (one of findings.KINDS, as explain
    gives it; the computations in scope not explained under these thresholds are
    explained first, once).  Pages: `before=rows[-1]["cursor"]`, as for
    list_clusters.
    """
    return open_reader(store).list_computations(
        cluster_id=cluster_id,
        user=user,
        state=state,
        since=since,
        until=until,
        text=text,
        finding=finding,
        before=before,
        limit=limit,
        account=account,
    )


def cost_report(
    by: str = "user",
    *,
    since: Any = None,
    until: Any = None,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """What the clusters cost, per user or per UTC day or month: by user the dearest
    first, by day/month the newest first.

    A cluster counts whole in the day (month) it started, with its cost so far
    (core-hours x analytics.cost.per-core-hour; cost is None where no cluster had a
    price); since / until pick clusters by start, as for list_clusters.
    """
    return open_reader(store).cost_report(by=by, since=since, until=until, account=account)


def get_computation(
    computation_id: str, *, account: str | None = None, store: str | None = None
) -> dict[str, Any]:
    """One computation with its task groups, code snippets and fine metrics."""
    return open_reader(store).get_computation(computation_id=computation_id, account=account)


def list_task_groups(
    computation_id: str, *, account: str | None = None, store: str | None = None
) -> list[dict[str, Any]]:
    """A computation's task groups."""
    return open_reader(store).list_task_groups(computation_id=computation_id, account=account)


def list_exceptions(
    cluster_id: str | None = None,
    *,
    computation_id: str | None = None,
    limit: int | None = 100,
    offset: int = 0,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """Failed tasks grouped by (computation, task group, exception), with counts and a traceback."""
    return open_reader(store).list_exceptions(
        cluster_id=cluster_id,
        computation_id=computation_id,
        limit=limit,
        offset=offset,
        account=account,
    )


def list_events(
    cluster_id: str | None = None,
    *,
    topic: str | None = None,
    limit: int | None = 1000,
    since: Any = None,
    until: Any = None,
    offset: int = 0,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """Recorded events (topics in analytics.events.allow), newest first; since /
    until bound their time, each seconds since the epoch, a datetime, an ISO date or time
    ('2026-11-01', '2026-11-01T12:00:00Z'; no offset means UTC) or an age ('7d':
    that long ago).
    """
    return open_reader(store).list_events(
        cluster_id=cluster_id,
        topic=topic,
        limit=limit,
        since=since,
        until=until,
        offset=offset,
        account=account,
    )


def list_topics(
    cluster_id: str, *, account: str | None = None, store: str | None = None
) -> list[dict[str, Any]]:
    """The event topics a cluster recorded (those in analytics.events.allow), with how
    many events and the newest's time, the most frequent first.
    """
    return open_reader(store).list_topics(cluster_id=cluster_id, account=account)


def get_profile(
    computation_id: str | None = None,
    *,
    cluster_id: str | None = None,
    prefix: str | None = None,
    account: str | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """Dask's profile tree for one computation (of one of its task prefixes, with
    prefix=), or merged over a whole cluster.
    """
    return open_reader(store).get_profile(
        computation_id=computation_id, cluster_id=cluster_id, prefix=prefix, account=account
    )


def list_worker_samples(
    cluster_id: str,
    *,
    worker: str | None = None,
    limit: int | None = 100000,
    since: Any = None,
    until: Any = None,
    offset: int = 0,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """Each worker over the cluster's life (the newest `limit` samples of [since,
    until], oldest first): memory managed by Dask, unmanaged and spilled, CPU, tasks
    processing.
    """
    return open_reader(store).list_worker_samples(
        cluster_id=cluster_id,
        worker=worker,
        limit=limit,
        since=since,
        until=until,
        offset=offset,
        account=account,
    )


def list_task_stream(
    computation_id: str,
    *,
    limit: int | None = 100000,
    offset: int = 0,
    fields: list[str] | tuple[str, ...] | str | None = None,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """A computation's task stream by start: one row per task (worker, thread,
    prefix, group, state, start, stop), or, for a computation with too many tasks to
    keep each, one row per worker, prefix and time bin (binned: n_tasks and busy
    seconds).  fields: only these of each row (start and stop always), e.g.
    ["worker", "start", "stop"] or "worker,start,stop".
    """
    return open_reader(store).list_task_stream(
        computation_id=computation_id, limit=limit, offset=offset, fields=fields, account=account
    )


def list_gpu_metrics(
    cluster_id: str | None = None,
    *,
    monitor_id: str | None = None,
    worker: str | None = None,
    limit: int | None = 100000,
    since: Any = None,
    until: Any = None,
    offset: int = 0,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """GPU samples, one row per GPU per sample (the newest `limit` of [since, until],
    oldest first), with the task groups running then.
    """
    return open_reader(store).list_gpu_metrics(
        cluster_id=cluster_id,
        monitor_id=monitor_id,
        worker=worker,
        limit=limit,
        since=since,
        until=until,
        offset=offset,
        account=account,
    )


def list_runs(
    computation_id: str,
    *,
    limit: int | None = 100,
    account: str | None = None,
    store: str | None = None,
) -> list[dict[str, Any]]:
    """Every run of this computation's code, newest first, with its wall time,
    figures and cost (compute time at its cluster's price per core-hour; None without
    a price).
    """
    return open_reader(store).list_runs(computation_id=computation_id, limit=limit, account=account)


def compare(
    computation_id: str,
    baseline: str | None = None,
    *,
    account: str | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """This computation against an earlier run of the same code: by default the
    latest earlier finished one with the same fingerprint (the line that made it,
    whatever the size of its input; without code, its task prefixes less the stages
    of tree reductions), from any cluster this reader may see.

    Returns {"computation_id", "baseline_id", "wall": {"before", "after", "ratio"},
    "groups": [{"prefix", "before", "after", "ratio"}], "inputs_differ", "findings":
    [str]}; before and after hold wall, compute, transfer, disk, nbytes, n_tasks; a
    group's ratio is of its compute time.  inputs_differ is None when both runs had
    the same inputs, else the input groups' tasks and bytes, {"before": {"n_tasks",
    "nbytes"}, "after": {...}, "groups": [{"prefix", "before", "after"}], "sentence"}
    (input groups: those that depend on no other group of the run).  baseline_id is
    None when there is no earlier run.
    """
    return open_reader(store).compare(
        computation_id=computation_id, baseline=baseline, account=account
    )


def run_summary(
    computation_id: str, *, account: str | None = None, store: str | None = None
) -> dict[str, Any]:
    """What the views show of `compare`: the wall ratio, each prefix's ratio, the
    findings and the last 20 runs' wall times (oldest first).
    """
    return open_reader(store).run_summary(computation_id=computation_id, account=account)


def explain(
    computation_id: str, *, account: str | None = None, store: str | None = None
) -> list[dict[str, Any]]:
    """Why this computation was slow, and what to change: findings, most costly
    first, each {"kind", "title", "why", "evidence", "advice", "impact", "groups",
    "workers"}.

    impact: the seconds of wall time the advice would save (an estimate; `evidence`
    says how it is counted, and quotes the recorded figures it rests on); together
    no more than the wall time less the ideal time.  why: why that kind matters.  kind: one of
    findings.KINDS.  Findings under the thresholds of `analytics.findings.*` are
    left out: a healthy computation gets [].  A team server computes them, with its
    own thresholds; a short id (a prefix of one) gives the same findings as the full id.
    """
    return open_reader(store).explain(computation_id=computation_id, account=account)


def cluster_findings(
    cluster_id: str, *, account: str | None = None, store: str | None = None
) -> list[dict[str, Any]]:
    """A cluster's findings summed over its computations, the costliest kind first:
    each {"kind", "why", "n_computations", "impact", "computations", "advice"}.

    impact: the seconds its computations' advice would have saved, summed;
    computations: those with it ({"computation_id", "label", "impact", "title"}), the
    most costly first (at most 10); advice: the most costly one's.  The same findings
    explain gives each computation (kept in the store once explained).
    """
    return open_reader(store).cluster_findings(cluster_id=cluster_id, account=account)


def export(
    *, account: str | None = None, store: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Everything recorded, table by table: {table: [rows]}."""
    return open_reader(store).export(account=account)
