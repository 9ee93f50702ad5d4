"""`dask analytics ...` (and its alias `dask-analytics ...`): read the store from a
terminal, export it, and run the team server.

The group is registered under Dask's `dask_cli` entry point, so Dask's own `dask`
command lists it.  Whatever it prints of the store goes through tables.escaped:
recorded strings come from the clusters, and their control characters (terminal
escapes) are shown escaped.  JSON export escapes them by itself; CSV goes to files, its text cells
quoted so that no spreadsheet runs them as formulas (csvcells.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from . import api, tables
from .alerts.cli import alerts as alerts_cli
from .config import ConfigError
from .csvcells import write_rows
from .filters import CLUSTER_STATES, COMPUTATION_STATES, COST_BY, FINDING_KINDS
from .prune_cli import prune
from .server.cli import named_store, resolve_store, server, store_option, token


class CommandError(click.ClickException):
    """What went wrong reading the store, said plainly (exit status 2)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"dask-analytics: {tables.escaped(self.message, lines=True)}", err=True)


TOKEN_HELP = (
    "set analytics.token (or DASK_ANALYTICS__TOKEN) to a token of this server: its operator makes "
    "one with `dask analytics token create --store <the server's database> --account A --user U`"
)


class _Group(click.Group):
    # The errors a reader raises for bad input, an unreachable store, a refused token or a
    # missing driver: one line saying what to do, not a traceback.
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ConfigError, LookupError, ConnectionError, ValueError, ImportError) as e:
            raise CommandError(str(e)) from None
        except PermissionError as e:  # a server's 401/403
            raise CommandError(f"{e}; {TOKEN_HELP}") from None


reader_store = store_option(
    "store: a SQLite path, or a sqlite:///, postgresql:// or http(s):// server URL "
    "(default: analytics.store); before or after the command's name"
)


def _store(ctx: click.Context) -> str:
    """The store a reading command reads: never one it would create, so a path with no file
    (a typo, another machine's path) is an error, not an empty new store."""
    url, _ = resolve_store(named_store(ctx))
    if url.startswith("sqlite"):
        from .store.engine import is_memory, parse

        u = parse(url)
        database = u.database
        if not is_memory(u) and database and not Path(database).expanduser().exists():
            raise CommandError(
                f"no store at {u.database} (nothing was recorded there); `dask analytics where` "
                "prints the store in use, --store names another"
            )
    return url


cluster_option = click.option("--cluster", help="only this cluster id")


def limit_option(default: int) -> Any:
    return click.option("--limit", type=int, default=default, show_default=True)


@click.group(
    name="analytics",
    cls=_Group,
    help="Read what dask-analytics-lab recorded, and serve it to a team.",
)
@reader_store
def analytics() -> None:
    pass


@analytics.command(help="print the store in use")
@reader_store
@click.pass_context
def where(ctx: click.Context) -> None:
    click.echo(tables.escaped(api.where(named_store(ctx))))


def filter_options(states: tuple[str, ...]) -> Any:
    """--user --account --state --since --until --text --finding --before: the list
    filters (api.list_clusters)."""
    options = [
        click.option("--user", help="only this user's"),
        click.option(
            "--account", help="only this account's (a team server's token reads its own only)"
        ),
        click.option("--state", type=click.Choice(states)),
        click.option(
            "--since",
            metavar="WHEN",
            help="started at or after: ISO date/time (UTC), epoch seconds, or an age such as 7d",
        ),
        click.option("--until", metavar="WHEN", help="started before, as --since"),
        click.option(
            "--text",
            help="in the name (clusters); in the label, code line or a task prefix "
            "(computations); any case",
        ),
        click.option(
            "--finding",
            type=click.Choice(FINDING_KINDS),
            help="with a finding of this kind, as `explain` gives them (clusters: in any of "
            "their computations)",
        ),
        click.option(
            "--before",
            metavar="CURSOR",
            help="the next, older page: the cursor the previous page printed",
        ),
    ]

    def wrap(fn: Any) -> Any:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return wrap


def _more(rows: list[dict], limit: int) -> None:
    # A full page may have more behind it: say how to get it (on stderr, so the table pipes clean).
    if rows and len(rows) == limit:
        click.echo(f"older: --before {rows[-1]['cursor']}", err=True)


@analytics.command(help="recorded clusters, newest first: live, stopped or lost")
@filter_options(CLUSTER_STATES)
@limit_option(50)
@reader_store
@click.pass_context
def clusters(ctx: click.Context, limit: int, **filters: Any) -> None:
    rows = api.list_clusters(limit=limit, store=_store(ctx), **filters)
    click.echo(tables.clusters(rows))
    _more(rows, limit)


@analytics.command(help="computations, newest first")
@cluster_option
@filter_options(COMPUTATION_STATES)
@limit_option(50)
@reader_store
@click.pass_context
def computations(ctx: click.Context, cluster: str | None, limit: int, **filters: Any) -> None:
    rows = api.list_computations(cluster, limit=limit, store=_store(ctx), **filters)
    click.echo(tables.computations(rows))
    _more(rows, limit)


@analytics.command(
    help="what the clusters cost, per user, UTC day or UTC month (a cluster counts in the day it "
    "started)"
)
@click.option("--by", type=click.Choice(COST_BY), default="user", show_default=True)
@click.option(
    "--since",
    metavar="WHEN",
    help="clusters started at or after: ISO date/time (UTC), epoch seconds, or an age such as 30d",
)
@click.option("--until", metavar="WHEN", help="clusters started before, as --since")
@click.option("--account", help="only this account's")
@reader_store
@click.pass_context
def costs(
    ctx: click.Context, by: str, since: str | None, until: str | None, account: str | None
) -> None:
    click.echo(
        tables.costs(
            api.cost_report(by, since=since, until=until, account=account, store=_store(ctx)), by
        )
    )


@analytics.command(help="failed tasks: one row per failure (type, where, message pattern)")
@cluster_option
@click.option("--computation", help="only this computation id")
@click.option("--traceback", is_flag=True, help="print each traceback")
@limit_option(50)
@reader_store
@click.pass_context
def exceptions(
    ctx: click.Context, cluster: str | None, computation: str | None, traceback: bool, limit: int
) -> None:
    rows = api.list_exceptions(cluster, computation_id=computation, limit=limit, store=_store(ctx))
    click.echo(tables.exceptions(rows))
    if traceback:
        for r in rows:
            what = " ".join(x for x in (r.get("exc_type"), r.get("location")) if x)
            head = f"--- {what or r['task_group']} x{r['count']} (task group {r['task_group']})"
            body = f"{r['traceback_text'] or ''}{tables.example(r)}"
            click.echo(f"\n{tables.escaped(head)}\n{tables.escaped(body, lines=True)}")


@analytics.command(help="recorded events")
@cluster_option
@click.option("--topic")
@limit_option(100)
@reader_store
@click.pass_context
def events(ctx: click.Context, cluster: str | None, topic: str | None, limit: int) -> None:
    click.echo(tables.events(api.list_events(cluster, topic=topic, limit=limit, store=_store(ctx))))


@analytics.command(
    help="a computation against an earlier run of the same code (default: the latest earlier finished one)"
)
@click.argument("computation_id")
@click.option("--baseline", help="compare with this computation id instead")
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON")
@reader_store
@click.pass_context
def compare(ctx: click.Context, computation_id: str, baseline: str | None, as_json: bool) -> None:
    result = api.compare(computation_id, baseline, store=_store(ctx))
    click.echo(json.dumps(result, indent=1) if as_json else tables.comparison(result))


@analytics.command(
    help="why a computation was slow, and what to change: its findings, most costly first"
)
@click.argument("computation_id", required=False)
@click.option(
    "--cluster",
    "cluster_id",
    metavar="ID",
    help="instead: a cluster's findings, summed over its computations",
)
@click.option("--json", "as_json", is_flag=True, help="print the findings as JSON")
@reader_store
@click.pass_context
def explain(
    ctx: click.Context, computation_id: str | None, cluster_id: str | None, as_json: bool
) -> None:
    if (computation_id is None) == (cluster_id is None):
        raise click.UsageError("give a COMPUTATION_ID or --cluster ID (one of them)")
    if cluster_id is not None:
        summed = api.cluster_findings(cluster_id, store=_store(ctx))
        click.echo(json.dumps(summed, indent=1) if as_json else tables.cluster_findings(summed))
        return
    assert computation_id is not None
    found = api.explain(computation_id, store=_store(ctx))
    click.echo(json.dumps(found, indent=1) if as_json else tables.findings(found))


@analytics.command(
    help="every run of a computation's code, newest first, with its wall time and cost"
)
@click.argument("computation_id")
@limit_option(50)
@reader_store
@click.pass_context
def runs(ctx: click.Context, computation_id: str, limit: int) -> None:
    click.echo(tables.runs(api.list_runs(computation_id, limit=limit, store=_store(ctx))))


@analytics.command(help="write everything as JSON or CSV")
@click.option(
    "--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True
)
@click.option(
    "--output", "-o", help="JSON: a file (default stdout); CSV: a folder, one file per table"
)
@reader_store
@click.pass_context
def export(ctx: click.Context, fmt: str, output: str | None) -> None:
    data = api.export(store=_store(ctx))
    if fmt == "json":
        text = json.dumps(data, indent=1, default=str)
        if output:
            Path(output).write_text(text)
        else:
            click.echo(text)
        return
    folder = Path(output or "dask-analytics-export")
    folder.mkdir(parents=True, exist_ok=True)
    for table, rows in data.items():
        write_rows(folder / f"{table}.csv", sorted({c for r in rows for c in r}), rows)
    click.echo(f"wrote {len(data)} tables to {tables.escaped(folder)}/")


analytics.add_command(prune)
analytics.add_command(server)
analytics.add_command(token)
analytics.add_command(alerts_cli)


def main(argv: Sequence[str] | None = None) -> int:
    """`dask-analytics ...`: the same group as `dask analytics ...`; returns the exit status."""
    try:
        analytics.main(
            args=list(argv) if argv is not None else None,
            prog_name="dask-analytics",
            standalone_mode=False,
        )
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except SystemExit as e:  # a command's refusal, with its message
        if isinstance(e.code, str):
            click.echo(e.code, err=True)
            return 1
        return e.code or 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
