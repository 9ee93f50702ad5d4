"""The Store's read methods inside one read transaction: several reads that must agree
(one computation's record, read by findings/) see one snapshot and share one
connection, instead of a connection and a transaction each (on PostgreSQL, ~4 round
trips per read saved)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from . import compare as _compare
from . import queries


class Snapshot:
    """Answers as the Store does (same functions, same arguments) from an open read
    connection; made by Store.snapshot()."""

    def __init__(self, conn: sa.Connection):
        self._conn = conn

    def get_computation(self, computation_id: str, *, account: str | None = None) -> dict[str, Any]:
        return queries.get_computation(self._conn, computation_id, account=account)

    def get_cluster(self, cluster_id: str, *, account: str | None = None) -> dict[str, Any]:
        return queries.get_cluster(self._conn, cluster_id, account=account)

    def list_computations(self, **kw: Any) -> list[dict[str, Any]]:
        return queries.list_computations(self._conn, **kw)

    def list_task_stream(self, computation_id: str, **kw: Any) -> list[dict[str, Any]]:
        return queries.list_task_stream(self._conn, computation_id, **kw)

    def list_worker_samples(self, cluster_id: str, **kw: Any) -> list[dict[str, Any]]:
        return queries.list_worker_samples(self._conn, cluster_id, **kw)

    def list_exceptions(self, **kw: Any) -> list[dict[str, Any]]:
        return queries.list_exceptions(self._conn, **kw)

    def list_events(self, **kw: Any) -> list[dict[str, Any]]:
        return queries.list_events(self._conn, **kw)

    def compare(self, computation_id: str, **kw: Any) -> dict[str, Any]:
        return _compare.compare(self._conn, computation_id, **kw)

    def list_gpu_metrics(self, **kw: Any) -> list[dict[str, Any]]:
        return queries.list_gpu_metrics(self._conn, **kw)
