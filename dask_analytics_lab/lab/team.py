"""The JupyterLab side of a team server: when `analytics.store` is a `dask-analytics
server`, the extension answers the Lab's reads by asking that server through the
notebook's own reader (readers.open_reader: HttpReader with `analytics.token` and
`analytics.ca-file`), so the sidebar and panels show what `monitor()` shows.

What is forwarded is LAB_READS and nothing else: the reads the Lab makes (js/lab/*.ts),
by their declarations (reads.py), at their paths, each answered by the reader's method
of that name.  Any other path under the prefix is 404 here and never reaches the team
server; a parameter the read does not declare (`account=`) or a second one (`limit=`
twice) is 400 before the reader is called; an id is
one path segment, quoted again by the reader, so it cannot name another route.
Everything is behind Jupyter's rules (serverext.JupyterRules) like the local routes:
nothing here runs for a request Jupyter refused.

The panel's Share and Download HTML (serverext.ShareHandler, ReportFileHandler) are the
only writes: they read and upload through reports/share.py, with the same token, and a
shared report's link is the team server's.

The team server's refusals come back in words that say what to do (TeamProblem): its
401/403 name analytics.token, an unreachable server names the URL, a 404 stays a 404.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from tornado.web import HTTPError, RequestHandler

from .. import config, reads
from ..store_errors import NotFound, StoreUnavailable
from ..urls import mask_url

# Every read of js/lab/sidebar.ts and js/lab/model.ts, by its declared name (reads.py):
# each is forwarded at its declared paths, its query string parsed by its declared
# parameters as the team server parses it; the team server then checks them again.
LAB_READS = (
    "list_clusters",
    "get_cluster",
    "list_cluster_samples",
    "list_worker_samples",
    "list_computations",
    "get_computation",
    "run_summary",
    "explain",
    "get_profile",
    "list_task_stream",
    "list_exceptions",
    "list_gpu_metrics",
    "list_events",
)


class TeamProblem(HTTPError):
    """What the team server (or the way to it) said, for the Lab: `problem` is "token",
    "unreachable", "not-found", "refused" or "other"; the message says what to do."""

    def __init__(self, status: int, problem: str, message: str):
        super().__init__(status, "%s", message)
        self.problem = problem
        self.message = message


def _token_words() -> str:
    return (
        "create one there with `dask-analytics token create --store DB --account <account> "
        "--user <you>` (DB: the store the team server was started with), "
        "set analytics.token (or DASK_ANALYTICS__TOKEN) to it where this Jupyter server "
        "reads its Dask config, and restart Jupyter"
    )


def explain(error: Exception, url: str) -> TeamProblem:
    """`error`, raised by the reader of the team server at `url`, in words for the Lab."""
    # The reader's own words start with the URL, which ours name already.
    said = re.sub(
        rf"^(analytics server {re.escape(url.rstrip('/'))}( refused the request \(\d+\))?"
        rf"|cannot reach the analytics server at {re.escape(url.rstrip('/'))}): ",
        "",
        str(error),
    )
    if isinstance(error, PermissionError):
        if not config.get("analytics.token"):
            return TeamProblem(
                502,
                "token",
                f"The team server at {url} needs a token and this Jupyter server has none "
                f"(analytics.token is not set): {_token_words()}",
            )
        return TeamProblem(
            502,
            "token",
            f"The team server at {url} refused the token ({said}): {_token_words()}",
        )
    if isinstance(error, NotFound):
        return TeamProblem(404, "not-found", f"The team server at {url} has no such record: {said}")
    if isinstance(error, StoreUnavailable):
        return TeamProblem(
            502,
            "unreachable",
            f"The team server at {url} is not reachable from this Jupyter server ({said}): "
            "check that `dask-analytics server` runs there and that analytics.store names it; "
            "the Lab keeps trying",
        )
    if isinstance(error, config.ConfigError | OSError):
        return TeamProblem(
            502, "other", f"This Jupyter server cannot read the team server at {url}: {error}"
        )
    if isinstance(error, ValueError):  # a value the reader or the server refused (a filter)
        return TeamProblem(400, "refused", f"The team server at {url} refused the request: {said}")
    return TeamProblem(502, "other", f"Reading the team server at {url} failed: {error}")


def _read(read: reads.Read, store_url: str, args: dict[str, Any]) -> bytes:
    from ..readers import open_reader

    answer = getattr(open_reader(store_url), read.name)(**args)
    return json.dumps({read.key: answer}).encode()


class TeamBase(RequestHandler):
    """Errors as the analytics API gives them; the team server's own with what kind of
    problem it was and which server (only past Jupyter's rules: a refusal by them says
    nothing of the configuration)."""

    store_url: str

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        body: dict[str, Any] = {"status": status_code}
        if isinstance(exc, TeamProblem):
            body.update(
                error=exc.message, problem=exc.problem, team_server=mask_url(self.store_url)
            )
        elif isinstance(exc, HTTPError) and exc.log_message:
            body["error"] = exc.log_message % exc.args if exc.args else exc.log_message
        else:
            body["error"] = self._reason
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(body))


def _one_value(handler: RequestHandler, name: str) -> str:
    values = handler.request.query_arguments[name]
    if len(values) != 1:
        raise HTTPError(400, "give %s once", name)
    try:
        return values[0].decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPError(400, "%s is not UTF-8", name) from None


class TeamRead(TeamBase):
    """GET one of LAB_READS at one of its paths, answered by the team server through
    the reader."""

    def initialize(self, read: reads.Read, path: reads.Path, store_url: str) -> None:
        self.read, self.path = read, path
        self.store_url = store_url
        # The account is the token's: a caller here names none.
        self.params = {
            p.name: p for p in read.params if p.name != "account" and p.name not in path.names
        }

    async def get(self, *ids: str) -> None:
        unknown = set(self.request.query_arguments) - set(self.params)
        if unknown:
            raise HTTPError(
                400,
                "unknown query parameter(s) %s; the Lab's read %s takes %s "
                "(this Jupyter server forwards only what the Lab sends)",
                sorted(unknown),
                self.read.name,
                sorted(self.params),
            )
        # The reader quotes an id into one segment, but "." and ".." would still move
        # along the path on a proxy that normalises it in front of the team server.
        if any(i in ("", ".", "..") for i in ids):
            raise HTTPError(400, "not an id: %r", ids)
        try:
            args = {
                name: reads.from_query(self.params[name], _one_value(self, name))
                for name in self.request.query_arguments
            }
            args.update(zip(self.path.names, ids, strict=True))
        except ValueError as e:
            raise TeamProblem(400, "refused", str(e)) from None
        try:
            body = await asyncio.to_thread(_read, self.read, self.store_url, args)
        except Exception as e:
            raise explain(e, mask_url(self.store_url)) from None
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(body)


class NotForwarded(TeamBase):
    """Every other path under the prefix: answered here, never sent on."""

    def initialize(self, store_url: str) -> None:
        self.store_url = store_url

    def _refuse(self, *args: Any) -> None:
        raise HTTPError(
            404,
            "not a read of the Lab: with a team server (analytics.store) this Jupyter server "
            "forwards only the Lab's own reads; open the team server's own pages for the rest",
        )

    get = post = put = patch = delete = _refuse


def team_specs(prefix: str, store_url: str) -> list[tuple[str, type, dict[str, Any]]]:
    """(path pattern, handler, kwargs) of LAB_READS under `prefix`, then the catch-all;
    serverext puts each behind Jupyter's rules."""
    specs: list[tuple[str, type, dict[str, Any]]] = []
    for name in LAB_READS:
        read = reads.BY_NAME[name]
        for path in read.paths:
            kwargs = {"read": read, "path": path, "store_url": store_url}
            specs.append((f"{prefix}/api{path.pattern}", TeamRead, kwargs))
    computations = reads.BY_NAME["list_computations"]
    specs.append(
        (
            f"{prefix}/lab/computations",
            TeamRead,
            {"read": computations, "path": computations.paths[0], "store_url": store_url},
        )
    )
    specs.append((f"{prefix}/.*", NotForwarded, {"store_url": store_url}))
    return specs
