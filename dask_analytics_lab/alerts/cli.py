"""`dask analytics alerts test [--webhook NAME|URL]` and `dask analytics alerts list`."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from ..server.cli import named_store, resolve_store, store_option

store_help = (
    "store: a SQLite path, or a sqlite:/// or postgresql:// URL (default: analytics.store); "
    "before or after the command's name"
)


@click.group(name="alerts", help="alerts: send a sample to the webhooks, list those fired")
@store_option(store_help)
def alerts() -> None:
    pass


def _settings() -> Any:
    from .settings import from_config

    try:
        return from_config()
    except ValueError as e:  # ConfigError: names the key
        raise click.ClickException(str(e)) from None


@alerts.command(
    name="test",
    help="send a sample alert to each webhook of analytics.alerts.webhooks (or to one) "
    "and print what each answered",
)
@click.option(
    "--webhook",
    "which",
    metavar="NAME|URL",
    help="only this webhook (its name), or this URL (with --format)",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "slack"]),
    default=None,
    help="the body for a --webhook URL (default json)",
)
# Taken as on every command, so that a line naming one parses; the sample goes to the
# webhooks only, nothing is read from or written to a store.
@store_option("taken as on every command; this one reads and writes no store")
def test(which: str | None, fmt: str | None) -> None:
    from .deliver import Alert, body, post
    from .settings import Webhook

    settings = _settings()
    hooks = list(settings.webhooks)
    if which is not None:
        if which.startswith(("http://", "https://")):
            hooks = [Webhook(name=which, url=which, format=fmt or "json")]
        else:
            hooks = [h for h in hooks if h.name == which]
            if not hooks:
                names = ", ".join(h.name for h in settings.webhooks) or "none configured"
                raise click.ClickException(f"no webhook named {which!r} ({names})")
    if not hooks:
        raise click.ClickException(
            "no webhooks: set analytics.alerts.webhooks (see README, Alerts), or --webhook URL"
        )
    base = settings.link_base
    sample = Alert(
        rule="test",
        on="test",
        subject="test",
        cluster_id="sample-cluster",
        computation_id="sample-computation",
        title="dask-analytics test alert",
        text="A sample from `dask analytics alerts test`: this webhook receives alerts.",
        link=f"{base}/computations/sample-computation" if base else None,
        time=time.time(),
    )
    failed = 0
    for hook in hooks:
        try:
            status, answer = post(hook.url, body(sample, hook.format), settings.timeout)
            ok = 200 <= status < 300
            said = f"HTTP {status}" + (f": {answer.strip()[:200]}" if answer.strip() else "")
        except (OSError, ValueError) as e:
            ok, said = False, f"no answer: {type(e).__name__}: {e}"
        failed += not ok
        click.echo(f"{hook.name} ({hook.format}) {hook.url}: {'ok' if ok else 'FAILED'} {said}")
    if failed:
        raise click.ClickException(f"{failed} of {len(hooks)} webhooks did not take the sample")


@alerts.command(name="list", help="alerts fired, newest first, with their delivery state")
@click.option("--state", type=click.Choice(["pending", "delivered", "failed"]))
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print JSON rows")
@store_option(store_help + ": a team server's alerts are in its database")
@click.pass_context
def list_(ctx: click.Context, state: str | None, limit: int, as_json: bool) -> None:
    from ..store import open_store
    from ..store.alerts import AlertLog

    url, _ = resolve_store(named_store(ctx))
    if url.startswith(("http://", "https://")):
        raise click.ClickException(
            "alerts are recorded in the team server's database: run this with "
            "--store postgresql://... (that database) where the server runs"
        )
    if url.startswith("sqlite"):
        from pathlib import Path

        from ..store.engine import is_memory, parse

        u = parse(url)
        if not is_memory(u) and u.database and not Path(u.database).expanduser().exists():
            # A reading command never makes a store (a typo would read as "no alerts").
            raise click.ClickException(f"no store at {u.database}; --store names another")
    with open_store(url) as store:
        rows = AlertLog(store).list(state=state, limit=limit)
    if as_json:
        click.echo(json.dumps(rows, indent=1, default=str))
        return
    if not rows:
        click.echo("no alerts fired")
        return
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["fired"]))
        line = f"{when}  {r['state']:<9} {r['webhook']:<12} {r['rule']:<22} {r['title']}"
        if r["state"] != "delivered" and r["last_error"]:
            line += f"  [{r['attempts']} attempts: {r['last_error'][:120]}]"
        click.echo(line)
