"""`dask-analytics prune --older-than 90d [--dry-run] [--store URL]`: retention, now.

Deletes the clusters that ended before the cut-off with every row of theirs
(store/prune.py says exactly what), in short batches: schedulers and a team server
may keep recording into the store meanwhile.  Only for a SQLite/PostgreSQL store: a
team server's clients cannot prune through it (its operator runs this on its database,
or sets analytics.retention for the server).

The cut-off moves with the clock: a prune run a minute after its dry run would also
take the clusters that ended in that minute.  The dry run prints the instant it
counted from; `--as-of` that instant makes the prune delete exactly what it counted.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from .server.cli import named_store, resolve_store, store_option


def _age(ctx: click.Context, param: click.Parameter, value: Any) -> float:
    from .config import parse_age

    try:
        return parse_age(value, what="--older-than")
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _instant(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip()).timestamp()  # no zone: local time
    except ValueError:
        raise click.BadParameter(
            f"expected a time such as 2026-11-26T14:08:37Z, got {value!r}"
        ) from None
    if when > time.time():
        # A cut-off counted from the future would take clusters younger than --older-than.
        raise click.BadParameter(f"{value} is in the future")
    return when


def _age_text(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


@click.command(
    name="prune",
    help="delete clusters that ended longer ago than --older-than, with all their rows",
)
@click.option(
    "--older-than",
    required=True,
    callback=_age,
    metavar="AGE",
    help="e.g. 90d, 12w, 36h (a plain number is days): clusters that stopped (or, never stopped, "
    "were last heard from) before now minus AGE go",
)
@click.option("--dry-run", is_flag=True, help="count what would go; delete nothing")
@click.option(
    "--as-of",
    callback=_instant,
    metavar="TIME",
    help="count the age from this time, not now (ISO 8601, e.g. 2026-11-26T14:08:37Z): the dry run "
    "prints its own, so that the prune after it deletes exactly what it counted",
)
@store_option(
    "store: a SQLite path, or a sqlite:/// or postgresql:// URL (default: analytics.store); "
    "before or after the command's name"
)
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=20,
    show_default=True,
    help="clusters per transaction (at most 5000 rows each)",
)
@click.pass_context
def prune(
    ctx: click.Context,
    older_than: float,
    dry_run: bool,
    as_of: float | None,
    batch: int,
) -> None:
    from . import tables
    from .store import open_store
    from .store.engine import is_memory, parse
    from .store.prune import prune as run
    from .urls import mask_url

    url, default = resolve_store(named_store(ctx))
    shown = tables.escaped(mask_url(url)) + (f" ({default})" if default else "")
    if url.startswith(("http://", "https://")):
        raise click.UsageError(
            f"{shown} is a team server: prune its database on the server "
            "(dask-analytics prune --store <its sqlite/postgresql URL>), or start it with "
            "analytics.retention set"
        )
    u = parse(url)
    if u.get_backend_name() == "sqlite" and not is_memory(u) and u.database:
        if not Path(u.database).expanduser().exists():
            # Pruning never makes a store: a typo would read as "deleted 0 clusters".
            raise click.UsageError(f"no store at {shown}; --store names another")
    # Whole seconds, so the instant the dry run prints is the one it used.
    now = float(math.floor(time.time())) if as_of is None else as_of
    cutoff = now - older_than
    with open_store(url) as store:
        result = run(store, cutoff=cutoff, now=now, dry_run=dry_run, batch=batch)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(cutoff))
    verb = "would delete" if dry_run else "deleted"
    click.echo(
        f"{verb} {result['clusters']} clusters that ended before {when} from {shown} "
        f"({result['seconds']:.1f} s):"
    )
    click.echo(
        tables.render(
            [(name, n) for name, n in result.items() if name != "seconds"], ["table", "rows"]
        )
    )
    if dry_run:
        spec = "seconds" if now == int(now) else "microseconds"
        stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec=spec).replace("+00:00", "Z")
        click.echo(
            f"to delete exactly these: dask-analytics prune --older-than {_age_text(older_than)} "
            f"--as-of {stamp} (with the same store)"
        )
