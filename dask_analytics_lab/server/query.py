"""The read-only JSON API: one small handler per route, all scoped to the caller's account.

Every answer wraps its rows under a name ({"clusters": [...]}, {"cluster": {...}});
errors are {"error": message, "status": code}.  Query parameters are checked (unknown
ones, bad limits, ids and filter values give 400, before any query runs); `account=` narrows a trusted local caller to one
account and must equal a token's own account.
"""

from __future__ import annotations

import json
import urllib.parse
import zlib
from collections.abc import Callable
from typing import Any

from tornado.iostream import StreamClosedError

from ..display import dumps
from ..store import schema as _schema
from ..store.budget import AnswerTooLarge, answer_budget
from ..store.filters import (
    CLUSTER_STATES,
    COMPUTATION_STATES,
    decode_cursor,
    parse_by,
    parse_state,
    parse_text,
    parse_time,
)
from .base import BaseHandler, check_text, encode_answer
from .context import Principal
from .errors import ApiError
from .shares import caller_key


def limit_param(default: int, most: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if not 1 <= n <= most:
            raise ApiError(
                400, f"limit must be a whole number from 1 to {most}, got {value[:40]!r}"
            )
        return n

    parse.default = default  # type: ignore[attr-defined]
    return parse


def _offset(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = -1
    if not 0 <= n <= 10_000_000:
        raise ApiError(400, f"offset must be a whole number from 0 to 10000000, got {value[:40]!r}")
    return n


_offset.default = 0  # type: ignore[attr-defined]
# A list's page after the first (see QueryHandler.next_page).
OFFSET = {"offset": _offset}


# Rows per page of a streamed export, and its tables in export order.
EXPORT_PAGE = 1000
EXPORT_TABLES = [t.name for t in _schema.DATA_TABLES]


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
_WINDOW = {
    "since": _checked(lambda v: parse_time(v, "since")),
    "until": _checked(lambda v: parse_time(v, "until")),
}


def _filters(states: tuple[str, ...]) -> dict[str, Callable[[str], Any]]:
    """The list filters: user, state, since, until, text and before (account= is the scope)."""
    return {
        "user": _checked(lambda v: parse_text(v, "user")),
        "state": _checked(lambda v: parse_state(v, states)),
        **_WINDOW,
        "text": _checked(lambda v: parse_text(v, "text")),
        "before": _checked(_cursor),
    }


class QueryHandler(BaseHandler):
    """Subclasses name their parameters and implement `query`."""

    params: dict[str, Callable[[str], Any]] = {}
    key: str = ""

    def parse_params(self) -> dict[str, Any]:
        args = self.request.query_arguments
        allowed = set(self.params) | {"account"}
        unknown = set(args) - allowed
        if unknown:
            raise ApiError(
                400,
                f"unknown query parameter(s) {sorted(unknown)}; this endpoint takes {sorted(allowed)}",
            )
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
            raise ApiError(
                403,
                f"your token belongs to account {principal.account!r}; it cannot read account {asked!r}",
            )
        return asked

    async def get(self, *path: str) -> None:
        principal = await self.principal()
        params = self.parse_params()
        account = self.scope(principal)
        ids = [check_text("id", p) for p in path]
        async with self.ctx.read_shares.hold(caller_key(principal)):
            body, encoding = await self.call(self.answer, account, ids, params, self.accepts_gzip())
        self.set_header("Content-Type", "application/json; charset=utf-8")
        await self.send_body(body, encoding)

    def answer(
        self, account: str | None, ids: list[str], params: dict, gzip_ok: bool
    ) -> tuple[bytes, str | None]:
        """The encoded answer (blocking: on a read thread).  Its rows are read within
        max_answer_bytes (store/budget.py): a list cut short says how to get the rest."""
        limit = self.ctx.max_answer_bytes
        # Rows are counted by an estimate (escapes not counted): leave them a margin.
        with answer_budget(limit * 3 // 4) as budget:
            result = self.query(account, *ids, **params)
        value = {self.key: result}
        if budget.truncated is not None:
            value["next"] = self.next_page(result, params, budget.truncated)
        return encode_answer(value, gzip_ok, limit=limit)

    def next_page(self, rows: list[dict], params: dict, n: int) -> dict:
        """What to ask for the rest of a list cut at `n` rows by max_answer_bytes."""
        args = {k: v[0].decode("utf-8", "replace") for k, v in self.request.query_arguments.items()}
        if "before" in self.params:
            args["before"] = rows[-1]["cursor"]
        else:
            args["offset"] = str(params.get("offset", 0) + n)
        url = self.request.path + "?" + urllib.parse.urlencode(args)
        return {
            "url": url,
            "params": args,
            "rows": n,
            "why": f"this answer holds the first {n} rows: the rest would pass the server's maximum answer "
            f"size of {self.ctx.max_answer_bytes:,} bytes (max_answer_bytes); GET next.url for the "
            "next page",
        }

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
        rows = self.ctx.store.list_computations(
            cluster_id=cluster_id, account=account, limit=limit, **filters
        )
        return open_code_lines(self.ctx.cipher, rows)


class ClusterSamples(QueryHandler):
    key = "samples"
    params = {"limit": limit_param(10_000, 100_000), **OFFSET}

    def query(self, account, cluster_id, limit, offset=0):
        return self.ctx.store.list_cluster_samples(
            cluster_id, account=account, limit=limit, offset=offset
        )


class ClusterProfile(QueryHandler):
    key = "profile"

    def query(self, account, cluster_id):
        return self.ctx.store.get_profile(cluster_id=cluster_id, account=account)


class Computations(QueryHandler):
    key = "computations"
    params = {
        "limit": limit_param(100, 10_000),
        "cluster_id": _text("cluster_id"),
        **_filters(COMPUTATION_STATES),
    }

    def query(self, account, limit, cluster_id=None, **filters):
        rows = self.ctx.store.list_computations(
            cluster_id=cluster_id, account=account, limit=limit, **filters
        )
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
        return self.ctx.store.get_profile(
            computation_id=computation_id, prefix=prefix, account=account
        )


class ComputationTasks(QueryHandler):
    key = "tasks"
    params = {"limit": limit_param(100_000, 1_000_000), **OFFSET}

    def query(self, account, computation_id, limit, offset=0):
        return self.ctx.store.list_task_stream(
            computation_id, account=account, limit=limit, offset=offset
        )


class ClusterWorkers(QueryHandler):
    key = "workers"
    params = {
        "limit": limit_param(100_000, 1_000_000),
        "worker": _text("worker"),
        **_WINDOW,
        **OFFSET,
    }

    def query(self, account, cluster_id, limit, worker=None, since=None, until=None, offset=0):
        return self.ctx.store.list_worker_samples(
            cluster_id,
            worker=worker,
            account=account,
            limit=limit,
            since=since,
            until=until,
            offset=offset,
        )


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


class ComputationFindings(QueryHandler):
    """Findings (findings/), computed here from the store with this server's
    analytics.findings.* thresholds."""

    key = "findings"

    def answer(
        self, account: str | None, ids: list[str], params: dict, gzip_ok: bool
    ) -> tuple[bytes, str | None]:
        # No answer budget around the reads: findings/record.py bounds them itself, and
        # findings from a page of a task stream would be wrong, not short.
        return encode_answer(
            {self.key: self.query(account, *ids, **params)},
            gzip_ok,
            limit=self.ctx.max_answer_bytes,
        )

    def query(self, account, computation_id):
        from ..findings import explain

        return explain(self.ctx.store, computation_id, account=account)


class Exceptions(QueryHandler):
    key = "exceptions"
    params = {
        "limit": limit_param(100, 10_000),
        "cluster_id": _text("cluster_id"),
        "computation_id": _text("computation_id"),
        **OFFSET,
    }

    def query(self, account, limit, cluster_id=None, computation_id=None, offset=0):
        return self.ctx.store.list_exceptions(
            cluster_id=cluster_id,
            computation_id=computation_id,
            account=account,
            limit=limit,
            offset=offset,
        )


class Events(QueryHandler):
    key = "events"
    params = {
        "limit": limit_param(1000, 100_000),
        "cluster_id": _text("cluster_id"),
        "topic": _text("topic"),
        **_WINDOW,
        **OFFSET,
    }

    def query(self, account, limit, cluster_id=None, topic=None, since=None, until=None, offset=0):
        return self.ctx.store.list_events(
            cluster_id=cluster_id,
            topic=topic,
            account=account,
            limit=limit,
            since=since,
            until=until,
            offset=offset,
        )


class Gpu(QueryHandler):
    key = "gpu"
    params = {
        "limit": limit_param(100_000, 1_000_000),
        "cluster_id": _text("cluster_id"),
        "monitor_id": _text("monitor_id"),
        "worker": _text("worker"),
        **_WINDOW,
        **OFFSET,
    }

    def query(
        self,
        account,
        limit,
        cluster_id=None,
        monitor_id=None,
        worker=None,
        since=None,
        until=None,
        offset=0,
    ):
        return self.ctx.store.list_gpu_metrics(
            cluster_id=cluster_id,
            monitor_id=monitor_id,
            worker=worker,
            account=account,
            limit=limit,
            since=since,
            until=until,
            offset=offset,
        )


class Export(QueryHandler):
    """Every row of the account, streamed: {"export": {table: [rows]}} written a page of
    EXPORT_PAGE rows at a time (read, opened and encoded on a read thread, each page its
    own short read), so memory holds one page whatever the account's size.  Pages are
    separate reads: rows written while an export runs may or may not be in it."""

    key = "export"

    async def get(self, *path: str) -> None:  # its route has no path arguments
        principal = await self.principal()
        self.parse_params()
        account = self.scope(principal)
        # gzip'd on the read thread too, one stream for the whole answer.
        z = zlib.compressobj(5, zlib.DEFLATED, 31) if self.accepts_gzip() else None
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Vary", "Accept-Encoding")
        if z is not None:
            self.set_header("Content-Encoding", "gzip")
        try:
            await self._send(b'{"export": {', z)
            for i, table in enumerate(EXPORT_TABLES):
                await self._send(f"{', ' if i else ''}{json.dumps(table)}: [".encode(), z)
                after, first = None, True
                while True:
                    async with self.ctx.read_shares.hold(caller_key(principal)):
                        chunk, after = await self.call(self._page, table, account, after, first, z)
                    await self.write_flushed(chunk)
                    first = False
                    if after is None:
                        break
                await self._send(b"]", z)
            await self._send(b"}}", z, last=True)
            self.finish()
        except StreamClosedError:
            pass  # the client went away

    async def _send(self, data: bytes, z: Any, last: bool = False) -> None:
        if z is not None:  # a few bytes of framing: cheap on the loop
            data = z.compress(data) + (z.flush() if last else b"")
        await self.write_flushed(data)

    async def write_flushed(self, data: bytes) -> None:
        if data:
            self.write(data)
            await self.flush()

    def _page(
        self, table: str, account: str | None, after: Any, first: bool, z: Any
    ) -> tuple[bytes, Any]:
        try:
            with answer_budget(self.ctx.max_answer_bytes):
                rows, last = self.ctx.store.export_page(
                    table, account=account, after=after, limit=EXPORT_PAGE
                )
        except AnswerTooLarge:
            # The next row alone passes the budget: it goes as a page of its own (a row
            # is bounded by what ingest accepts), so the export still holds every row.
            rows, last = self.ctx.store.export_page(table, account=account, after=after, limit=1)
        if table == "code_snippets":
            self.ctx.cipher.open_rows(rows)
        elif table == "computations":
            open_code_lines(self.ctx.cipher, rows)
        text = ", ".join(dumps(r) for r in rows)
        data = ((", " if rows and not first else "") + text).encode()
        return (z.compress(data) if z is not None else data), last


class WhoAmI(QueryHandler):
    key = "whoami"

    async def get(self, *path: str) -> None:  # its route has no path arguments
        principal = await self.principal()
        self.parse_params()
        self.write_json(
            {
                self.key: {
                    "account": principal.account,
                    "user": principal.user,
                    "via": principal.via,
                    "token_required": self.ctx.token_required,
                }
            }
        )


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
        (f"/computations/{seg}/findings", ComputationFindings),
        ("/exceptions", Exceptions),
        ("/events", Events),
        ("/gpu", Gpu),
        ("/costs", Costs),
        ("/export", Export),
    ]
