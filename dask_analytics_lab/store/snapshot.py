"""The Store's read methods inside one read transaction: several reads that must agree
(one computation's record, read by findings/) see one snapshot and share one
connection, instead of a connection and a transaction each (on PostgreSQL, ~4 round
trips per read saved)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ..reader import Reader
from ..reads import Read


class Snapshot(Reader):
    """Answers as the Store does (the same declared reads) from an open read connection;
    made by Store.snapshot()."""

    def __init__(self, conn: sa.Connection):
        self._conn = conn

    def _answer(self, read: Read, args: dict[str, Any]) -> Any:
        if read.over == "reader":
            return read.function()(self, **args)
        return read.function()(self._conn, **args)
