"""The read-only JSON API: one small handler per route, all scoped to the caller's account.

Every answer wraps its rows under a name ({"clusters": [...]}, {"cluster": {...}});
errors are {"error": message, "status": code}.  Query parameters are checked (unknown
ones, bad limits, ids and filter values give 400, before any query runs); `account=` narrows a trusted local caller to one
account and must equal a token's own account.
"""
from __future__ import annotations

from typing import Any, Callable

from ..store.filters import (CLUSTER_STATES, COMPUTATION_STATES, decode_cursor, parse_by, parse_state, parse_text,
                             parse_time)
from .base import BaseHandler, check_text
from .context import Principal
from .errors import ApiError


def limit_param(default: int, most: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if not 1 <= n <= most:
            raise ApiError(400, f"limit must be a whole number from 1 to {most}, got {value[:40]!r}")
        return n
    parse.default = default  # type: ignore[attr-defined]
    return parse


def _text(name: str) -> Callable[[str], str]:
    return lambda value: check_text(name, value)


def _checked(parse: Callable[[str], Any], default: Any = None) -> Callable[[str], Any]:
    """A store filter's own check (store/filters.py), its ValueError answered as 400."""
    def run(value: str) -> Any:
        try:
            return parse(value)
        except ValueError as e:
            raise ApiError(400, str(e)) from None
    if default is not None:
        run.default = default  # type: ignore[attr-defined]
    return run


def _cursor(value: str) -> str:
    decode_cursor(value)
    return value


# A time window (since=, until=) on a series: samples, GPU samples, events.
_WINDOW = {"since": _checked(lambda v: parse_time(v, "since")), "until": _checked(lambda v: parse_time(v, "until"))}


def _filters(states: tuple[str, ...]) -> dict[str, Callable[[str], Any]]:
    """The list filters: user, state, since, until, text and before (account= is the scope)."""
    return {"user": _checked(lambda v: parse_text(v, "user")), "state": _checked(lambda v: parse_state(v, states)),
            **_WINDOW, "text": _checked(lambda v: parse_text(v, "text")), "before": _checked(_cursor)}


class QueryHandler(BaseHandler):
    """Subclasses name their parameters and implement `query`."""

    params: dict[str, Callable[[str], Any]] = {}
    key: str = ""

    def parse_params(self) -> dict[str, Any]:
        args = self.request.query_arguments
        allowed = set(self.params) | {"account"}
        unknown = set(args) - allowed
        if unknown:
            raise ApiError(400, f"unknown query parameter(s) {sorted(unknown)}; this endpoint takes {sorted(allowed)}")
        out: dict[str, Any] = {}
        for name, parse in self.params.items():
            if name in args:
                out[name] = parse(self._one(name))
            elif hasattr(parse, "default"):
                out[name] = parse.default
        return out

    def _one(self, name: str) -> str:
        values = self.request.query_arguments[name]
        if len(values) != 1:
            raise ApiError(400, f"give {name} once")
        try:
            return values[0].decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, f"{name} is not UTF-8") from None

    def scope(self, principal: Principal) -> str | None:
        """The account the caller may read: their own, or any one a local caller names."""
        if "account" not in self.request.query_arguments:
            return principal.account
        asked = check_text("account", self._one("account"))
        if principal.account is not None and asked != principal.account:
            raise ApiError(403, f"your token belongs to account {principal.account!r}; it cannot read account {asked!r}")
        return asked

    async def get(self, *path: str) -> None:
        principal = await self.principal()
        params = self.parse_params()
        account = self.scope(principal)
        ids = [check_text("id", p) for p in path]
        result = await self.call(self.query, account, *ids, **params)
        self.write_json({self.key: result})

    def query(self, account: str | None, *ids: str, **params: Any) -> Any:
        raise NotImplementedError


class Clusters(QueryHandler):
    key = "clusters"
    params = {"limit": limit_param(100, 10_000), **_filters(CLUSTER_STATES)}

    def query(self, account, limit, **filters):
        return self.ctx.store.list_clusters(account=account, limit=limit, **filters)


class Cluster(QueryHandler):
    key = "cluster"

    def query(self, account, cluster_id):
        return self.ctx.store.get_cluster(cluster_id, account=account)


class ClusterComputations(QueryHandler):
    key = "computations"
    params = {"limit": limit_param(100, 10_000), **_filters(COMPUTATION_STATES)}

    def query(self, account, cluster_id, limit, **filters):
        self.ctx.store.get_cluster(cluster_id, account=account)  # 404 rather than [] for a stranger
        rows = self.ctx.store.list_computations(cluster_id=cluster_id, account=account, limit=limit, **filters)
        return open_code_lines(self.ctx.cipher, rows)


class ClusterSamples(QueryHandler):
    key = "samples"
    params = {"limit": limit_param(10_000, 100_000)}

    def query(self, account, cluster_id, limit):
        return self.ctx.store.list_cluster_samples(cluster_id, account=account, limit=limit)


class ClusterProfile(QueryHandler):
    key = "profile"

    def query(self, account, cluster_id):
        return self.ctx.store.get_profile(cluster_id=cluster_id, account=account)


class Computations(QueryHandler):
    key = "computations"
    params = {"limit": limit_param(100, 10_000), "cluster_id": _text("cluster_id"), **_filters(COMPUTATION_STATES)}

    def query(self, account, limit, cluster_id=None, **filters):
        rows = self.ctx.store.list_computations(cluster_id=cluster_id, account=account, limit=limit, **filters)
        return open_code_lines(self.ctx.cipher, rows)


class Costs(QueryHandler):
    key = "costs"
    params = {"by": _checked(parse_by, default="user"), **_WINDOW}

    def query(self, account, by, since=None, until=None):
        return self.ctx.store.cost_report(by=by, since=since, until=until, account=account)


def open_code_lines(cipher: Any, rows: Any) -> Any:
    """Computation rows with their code line readable again; one no key here opens reads
    None, with `code_error` saying why."""
    for row in rows or ():
        if isinstance(row, dict) and row.get("code_line") is not None:
            row["code_line"], error = cipher.open(row["code_line"])
            if error:
                row["code_error"] = error
    return rows


class Computation(QueryHandler):
    key = "computation"

    def query(self, account, computation_id):
        comp = self.ctx.store.get_computation(computation_id, account=account)
        self.ctx.cipher.open_rows(comp.get("code"))
        open_code_lines(self.ctx.cipher, [comp])
        return comp


class ComputationGroups(QueryHandler):
    key = "groups"

    def query(self, account, computation_id):
        return self.ctx.store.list_task_groups(computation_id, account=account)


class ComputationProfile(QueryHandler):
    key = "profile"
    params = {"prefix": _text("prefix")}

    def query(self, account, computation_id, prefix=None):
        return self.ctx.store.get_profile(computation_id=computation_id, prefix=prefix, account=account)


class ComputationTasks(QueryHandler):
    key = "tasks"
    params = {"limit": limit_param(100_000, 1_000_000)}

    def query(self, account, computation_id, limit):
        return self.ctx.store.list_task_stream(computation_id, account=account, limit=limit)


class ClusterWorkers(QueryHandler):
    key = "workers"
    params = {"limit": limit_param(100_000, 1_000_000), "worker": _text("worker"), **_WINDOW}

    def query(self, account, cluster_id, limit, worker=None, since=None, until=None):
        return self.ctx.store.list_worker_samples(cluster_id, worker=worker, account=account, limit=limit,
                                                  since=since, until=until)


class ComputationRuns(QueryHandler):
    key = "runs"
    params = {"limit": limit_param(100, 10_000)}

    def query(self, account, computation_id, limit):
        return self.ctx.store.list_runs(computation_id, account=account, limit=limit)


class ComputationCompare(QueryHandler):
    key = "compare"
    params = {"baseline": _text("baseline")}

    def query(self, account, computation_id, baseline=None):
        return self.ctx.store.compare(computation_id, baseline=baseline, account=account)


class ComputationRunSummary(QueryHandler):
    key = "summary"

    def query(self, account, computation_id):
        return self.ctx.store.run_summary(computation_id, account=account)


class Exceptions(QueryHandler):
    key = "exceptions"
    params = {"limit": limit_param(100, 10_000), "cluster_id": _text("cluster_id"),
              "computation_id": _text("computation_id")}

    def query(self, account, limit, cluster_id=None, computation_id=None):
        return self.ctx.store.list_exceptions(cluster_id=cluster_id, computation_id=computation_id,
                                              account=account, limit=limit)


class Events(QueryHandler):
    key = "events"
    params = {"limit": limit_param(1000, 100_000), "cluster_id": _text("cluster_id"), "topic": _text("topic"),
              **_WINDOW}

    def query(self, account, limit, cluster_id=None, topic=None, since=None, until=None):
        return self.ctx.store.list_events(cluster_id=cluster_id, topic=topic, account=account, limit=limit,
                                          since=since, until=until)


class Gpu(QueryHandler):
    key = "gpu"
    params = {"limit": limit_param(100_000, 1_000_000), "cluster_id": _text("cluster_id"),
              "monitor_id": _text("monitor_id"), "worker": _text("worker"), **_WINDOW}

    def query(self, account, limit, cluster_id=None, monitor_id=None, worker=None, since=None, until=None):
        return self.ctx.store.list_gpu_metrics(cluster_id=cluster_id, monitor_id=monitor_id, worker=worker,
                                               account=account, limit=limit, since=since, until=until)


class Export(QueryHandler):
    key = "export"

    def query(self, account):
        tables = self.ctx.store.export(account=account)
        self.ctx.cipher.open_rows(tables.get("code_snippets"))
        open_code_lines(self.ctx.cipher, tables.get("computations"))
        return tables


class WhoAmI(QueryHandler):
    key = "whoami"

    async def get(self) -> None:
        principal = await self.principal()
        self.parse_params()
        self.write_json({self.key: {"account": principal.account, "user": principal.user, "via": principal.via,
                                    "token_required": self.ctx.token_required}})


def query_routes() -> list[tuple[str, type]]:
    """(path under {prefix}/api, handler); ids are one path segment."""
    seg = "([^/]+)"
    return [
        ("/whoami", WhoAmI),
        ("/clusters", Clusters),
        (f"/clusters/{seg}", Cluster),
        (f"/clusters/{seg}/computations", ClusterComputations),
        (f"/clusters/{seg}/samples", ClusterSamples),
        (f"/clusters/{seg}/profile", ClusterProfile),
        (f"/clusters/{seg}/workers", ClusterWorkers),
        ("/computations", Computations),
        (f"/computations/{seg}", Computation),
        (f"/computations/{seg}/groups", ComputationGroups),
        (f"/computations/{seg}/profile", ComputationProfile),
        (f"/computations/{seg}/tasks", ComputationTasks),
        (f"/computations/{seg}/runs", ComputationRuns),
        (f"/computations/{seg}/compare", ComputationCompare),
        (f"/computations/{seg}/summary", ComputationRunSummary),
        ("/exceptions", Exceptions),
        ("/events", Events),
        ("/gpu", Gpu),
        ("/costs", Costs),
        ("/export", Export),
    ]
