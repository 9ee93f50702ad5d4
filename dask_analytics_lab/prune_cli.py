"""`dask-analytics prune --older-than 90d [--dry-run] [--store URL]`: retention, now.

Deletes the clusters that ended before the cut-off with every row of theirs
(store/prune.py says exactly what), in short batches: schedulers and a team server
may keep recording into the store meanwhile.  Only for a SQLite/PostgreSQL store: a
team server's clients cannot prune through it (its operator runs this on its database,
or sets analytics.retention for the server).
"""
from __future__ import annotations

import time
from typing import Any

import click

STORE = "dask_analytics.store"  # the group's --store (cli.py)


def _age(ctx: click.Context, param: click.Parameter, value: Any) -> float:
    from .config import parse_age

    try:
        return parse_age(value, what="--older-than")
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command(name="prune", help="delete clusters that ended longer ago than --older-than, with all their rows")
@click.option("--older-than", required=True, callback=_age, metavar="AGE",
              help="e.g. 90d, 12w, 36h (a plain number is days): clusters that stopped (or, never stopped, "
                   "were last heard from) before now minus AGE go")
@click.option("--dry-run", is_flag=True, help="count what would go; delete nothing")
@click.option("--store", "store_opt", help="store: SQLite path or sqlite:/// or postgresql:// URL "
                                            "(default: the group's --store, else analytics.store)")
@click.option("--batch", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="clusters per transaction (at most 5000 rows each)")
@click.pass_context
def prune(ctx: click.Context, older_than: float, dry_run: bool, store_opt: str | None, batch: int) -> None:
    from . import config, tables
    from .store import open_store
    from .store.prune import prune as run

    given = store_opt if store_opt is not None else ctx.meta.get(STORE)
    url = config.validate_store(given if given is not None else config.get("analytics.store"))
    if url.startswith(("http://", "https://")):
        raise click.UsageError(f"{tables.printable(url)} is a team server: prune its database on the server "
                               "(dask-analytics prune --store <its sqlite/postgresql URL>), or start it with "
                               "analytics.retention set")
    cutoff = time.time() - older_than
    with open_store(url) as store:
        result = run(store, cutoff=cutoff, dry_run=dry_run, batch=batch)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(cutoff))
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{verb} {result['clusters']} clusters that ended before {when} from {tables.printable(store.url)} "
               f"({result['seconds']:.1f} s):")
    click.echo(tables.render([(name, n) for name, n in result.items() if name != "seconds"], ["table", "rows"]))
