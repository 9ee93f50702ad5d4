"""`dask analytics ...`: the group that Dask's `dask_cli` entry point names.

Dask's `dask` command imports every `dask_cli` entry point each time it starts, so every
`dask scheduler` and `dask worker` imports this module, whether analytics is used or not.
It holds click and a stand-in for the group; cli.py, and with it the store, SQLAlchemy
and the readers, load only when `dask analytics` itself is invoked (or its help asked).
"""

from __future__ import annotations

from typing import Any

import click

# What `dask --help` lists; cli.analytics has the same (tests/unit/test_layout.py holds them
# equal: cli.py cannot import it from here without an import cycle).
HELP = "Read what dask-analytics-lab recorded, and serve it to a team."


class _LoadedOnInvocation(click.Group):
    """Stands for cli.analytics in Dask's group: `dask --help` reads only its name and
    help; anything that parses its arguments gets the real group."""

    @staticmethod
    def _real() -> click.Group:
        from .cli import analytics

        return analytics

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        # Dask's group invokes `sub_ctx.command`: the real group, once its context is made.
        return self._real().make_context(info_name, args, parent=parent, **extra)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._real().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._real().get_command(ctx, cmd_name)


analytics = _LoadedOnInvocation(name="analytics", help=HELP)
