"""The store: schema, migrations, ingest and queries; the only code that speaks SQL.

    from dask_analytics_lab.store import open_store
    store = open_store("sqlite:////path/analytics.db")   # or postgresql://...
    store.ingest(messages)                                # see ../messages.py
    store.list_computations(limit=100)

Modules: engine (connecting, SQLite locking), schema (tables), migrate + migrations/
(Alembic), validate (message data), ingest (writes), queries (reads), store (the
Store object tying them together).
"""

from ..store_errors import NotFound, StoreUnavailable
from .store import Store, open_store

__all__ = ["NotFound", "Store", "StoreUnavailable", "open_store"]
