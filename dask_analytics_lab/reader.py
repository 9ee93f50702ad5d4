# Written by scripts/gen_reads.py from reads.py: do not edit, run it instead.

"""Reader: every read of the record (reads.py), typed; the Store, its Snapshot and
the HttpReader inherit these and answer each in `_answer`.
"""

from __future__ import annotations

from typing import Any

from .reads import ReaderBase


class Reader(ReaderBase):
    """What readers.open_reader returns, whatever the store: the same methods, the
    same arguments, the same rows."""

    def list_clusters(
        self,
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
        answer: list[dict[str, Any]] = self._read(
            "list_clusters",
            {
                "user": user,
                "state": state,
                "since": since,
                "until": until,
                "text": text,
                "finding": finding,
                "before": before,
                "limit": limit,
                "account": account,
            },
        )
        return answer

    def get_cluster(self, cluster_id: str, *, account: str | None = None) -> dict[str, Any]:
        """One cluster (NotFound for an id this reader may not see)."""
        answer: dict[str, Any] = self._read(
            "get_cluster", {"cluster_id": cluster_id, "account": account}
        )
        return answer

    def list_cluster_samples(
        self,
        cluster_id: str,
        *,
        limit: int | None = 10000,
        offset: int = 0,
        account: str | None = None,
    ) -> list[dict[str, Any]]:
        """Workers, threads and memory over time for one cluster, oldest first."""
        answer: list[dict[str, Any]] = self._read(
            "list_cluster_samples",
            {"cluster_id": cluster_id, "limit": limit, "offset": offset, "account": account},
        )
        return answer

    def list_computations(
        self,
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
        answer: list[dict[str, Any]] = self._read(
            "list_computations",
            {
                "cluster_id": cluster_id,
                "user": user,
                "state": state,
                "since": since,
                "until": until,
                "text": text,
                "finding": finding,
                "before": before,
                "limit": limit,
                "account": account,
            },
        )
        return answer

    def cost_report(
        self, by: str = "user", *, since: Any = None, until: Any = None, account: str | None = None
    ) -> list[dict[str, Any]]:
        """What the clusters cost, per user or per UTC day or month: by user the dearest
        first, by day/month the newest first.

        A cluster counts whole in the day (month) it started, with its cost so far
        (core-hours x analytics.cost.per-core-hour; cost is None where no cluster had a
        price); since / until pick clusters by start, as for list_clusters.
        """
        answer: list[dict[str, Any]] = self._read(
            "cost_report", {"by": by, "since": since, "until": until, "account": account}
        )
        return answer

    def get_computation(self, computation_id: str, *, account: str | None = None) -> dict[str, Any]:
        """One computation with its task groups, code snippets and fine metrics."""
        answer: dict[str, Any] = self._read(
            "get_computation", {"computation_id": computation_id, "account": account}
        )
        return answer

    def list_task_groups(
        self, computation_id: str, *, account: str | None = None
    ) -> list[dict[str, Any]]:
        """A computation's task groups."""
        answer: list[dict[str, Any]] = self._read(
            "list_task_groups", {"computation_id": computation_id, "account": account}
        )
        return answer

    def list_exceptions(
        self,
        cluster_id: str | None = None,
        *,
        computation_id: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
        account: str | None = None,
    ) -> list[dict[str, Any]]:
        """Failed tasks grouped by (computation, task group, exception), with counts and a traceback."""
        answer: list[dict[str, Any]] = self._read(
            "list_exceptions",
            {
                "cluster_id": cluster_id,
                "computation_id": computation_id,
                "limit": limit,
                "offset": offset,
                "account": account,
            },
        )
        return answer

    def list_events(
        self,
        cluster_id: str | None = None,
        *,
        topic: str | None = None,
        limit: int | None = 1000,
        since: Any = None,
        until: Any = None,
        offset: int = 0,
        account: str | None = None,
    ) -> list[dict[str, Any]]:
        """Recorded events (topics in analytics.events.allow), newest first; since /
        until bound their time, each seconds since the epoch, a datetime, an ISO date or time
        ('2026-11-01', '2026-11-01T12:00:00Z'; no offset means UTC) or an age ('7d':
        that long ago).
        """
        answer: list[dict[str, Any]] = self._read(
            "list_events",
            {
                "cluster_id": cluster_id,
                "topic": topic,
                "limit": limit,
                "since": since,
                "until": until,
                "offset": offset,
                "account": account,
            },
        )
        return answer

    def list_topics(self, cluster_id: str, *, account: str | None = None) -> list[dict[str, Any]]:
        """The event topics a cluster recorded (those in analytics.events.allow), with how
        many events and the newest's time, the most frequent first.
        """
        answer: list[dict[str, Any]] = self._read(
            "list_topics", {"cluster_id": cluster_id, "account": account}
        )
        return answer

    def get_profile(
        self,
        computation_id: str | None = None,
        *,
        cluster_id: str | None = None,
        prefix: str | None = None,
        account: str | None = None,
    ) -> dict[str, Any]:
        """Dask's profile tree for one computation (of one of its task prefixes, with
        prefix=), or merged over a whole cluster.
        """
        answer: dict[str, Any] = self._read(
            "get_profile",
            {
                "computation_id": computation_id,
                "cluster_id": cluster_id,
                "prefix": prefix,
                "account": account,
            },
        )
        return answer

    def list_worker_samples(
        self,
        cluster_id: str,
        *,
        worker: str | None = None,
        limit: int | None = 100000,
        since: Any = None,
        until: Any = None,
        offset: int = 0,
        account: str | None = None,
    ) -> list[dict[str, Any]]:
        """Each worker over the cluster's life (the newest `limit` samples of [since,
        until], oldest first): memory managed by Dask, unmanaged and spilled, CPU, tasks
        processing.
        """
        answer: list[dict[str, Any]] = self._read(
            "list_worker_samples",
            {
                "cluster_id": cluster_id,
                "worker": worker,
                "limit": limit,
                "since": since,
                "until": until,
                "offset": offset,
                "account": account,
            },
        )
        return answer

    def list_task_stream(
        self,
        computation_id: str,
        *,
        limit: int | None = 100000,
        offset: int = 0,
        fields: list[str] | tuple[str, ...] | str | None = None,
        account: str | None = None,
    ) -> list[dict[str, Any]]:
        """A computation's task stream by start: one row per task (worker, thread,
        prefix, group, state, start, stop), or, for a computation with too many tasks to
        keep each, one row per worker, prefix and time bin (binned: n_tasks and busy
        seconds).  fields: only these of each row (start and stop always), e.g.
        ["worker", "start", "stop"] or "worker,start,stop".
        """
        answer: list[dict[str, Any]] = self._read(
            "list_task_stream",
            {
                "computation_id": computation_id,
                "limit": limit,
                "offset": offset,
                "fields": fields,
                "account": account,
            },
        )
        return answer

    def list_gpu_metrics(
        self,
        cluster_id: str | None = None,
        *,
        monitor_id: str | None = None,
        worker: str | None = None,
        limit: int | None = 100000,
        since: Any = None,
        until: Any = None,
        offset: int = 0,
        account: str | None = None,
    ) -> list[dict[str, Any]]:
        """GPU samples, one row per GPU per sample (the newest `limit` of [since, until],
        oldest first), with the task groups running then.
        """
        answer: list[dict[str, Any]] = self._read(
            "list_gpu_metrics",
            {
                "cluster_id": cluster_id,
                "monitor_id": monitor_id,
                "worker": worker,
                "limit": limit,
                "since": since,
                "until": until,
                "offset": offset,
                "account": account,
            },
        )
        return answer

    def list_runs(
        self, computation_id: str, *, limit: int | None = 100, account: str | None = None
    ) -> list[dict[str, Any]]:
        """Every run of this computation's code, newest first, with its wall time,
        figures and cost (compute time at its cluster's price per core-hour; None without
        a price).
        """
        answer: list[dict[str, Any]] = self._read(
            "list_runs", {"computation_id": computation_id, "limit": limit, "account": account}
        )
        return answer

    def compare(
        self, computation_id: str, baseline: str | None = None, *, account: str | None = None
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
        answer: dict[str, Any] = self._read(
            "compare", {"computation_id": computation_id, "baseline": baseline, "account": account}
        )
        return answer

    def run_summary(self, computation_id: str, *, account: str | None = None) -> dict[str, Any]:
        """What the views show of `compare`: the wall ratio, each prefix's ratio, the
        findings and the last 20 runs' wall times (oldest first).
        """
        answer: dict[str, Any] = self._read(
            "run_summary", {"computation_id": computation_id, "account": account}
        )
        return answer

    def explain(self, computation_id: str, *, account: str | None = None) -> list[dict[str, Any]]:
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
        answer: list[dict[str, Any]] = self._read(
            "explain", {"computation_id": computation_id, "account": account}
        )
        return answer

    def cluster_findings(
        self, cluster_id: str, *, account: str | None = None
    ) -> list[dict[str, Any]]:
        """A cluster's findings summed over its computations, the costliest kind first:
        each {"kind", "why", "n_computations", "impact", "computations", "advice"}.

        impact: the seconds its computations' advice would have saved, summed;
        computations: those with it ({"computation_id", "label", "impact", "title"}), the
        most costly first (at most 10); advice: the most costly one's.  The same findings
        explain gives each computation (kept in the store once explained).
        """
        answer: list[dict[str, Any]] = self._read(
            "cluster_findings", {"cluster_id": cluster_id, "account": account}
        )
        return answer

    def export(self, *, account: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Everything recorded, table by table: {table: [rows]}."""
        answer: dict[str, list[dict[str, Any]]] = self._read("export", {"account": account})
        return answer
