"""Many new rows into one table in one statement: a batch's task stream, samples, events.

SQLAlchemy runs a list of rows as the driver's executemany, and psycopg sends each row
as a statement of its own (bound, sent and answered one by one, pipelined): with a few
hundred task stream rows a computation tick, that took a team server replica more CPU
than the rest of a batch's ingest, and PostgreSQL one statement per row.  On PostgreSQL
the rows go instead as one array per column, unnested by one INSERT ... SELECT, in
their order (WITH ORDINALITY: ids follow the rows as with executemany).  The values are
those SQLAlchemy would bind (each column type's bind processor: JSON serialised the
same way); SQLite keeps executemany (it runs in-process: no round trips to save).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

# PostgreSQL's array type for the column types of the row tables (schema.py).
_ARRAYS: list[tuple[type, str]] = [
    (sa.Boolean, "bool[]"),
    (sa.BigInteger, "int8[]"),
    (sa.Double, "float8[]"),
    (sa.Text, "text[]"),
    (sa.JSON, "json[]"),
]


def insert_rows(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """INSERT rows that no constraint can refuse as duplicates (all have rows[0]'s keys)."""
    if conn.dialect.name != "postgresql" or len(rows) < 2:
        conn.execute(_insert(table), rows)
        return
    names = tuple(rows[0])
    built = _BUILT.get((table, names))
    if built is None:  # with the first engine's dialect: make_engine sets all up alike
        built = _BUILT[table, names] = _unnest_insert(table, names, conn.dialect)
    sql, convert = built
    conn.exec_driver_sql(
        sql, {f"c{i}": f([r[name] for r in rows]) for i, (name, f) in enumerate(convert)}
    )


@functools.cache
def _insert(table: sa.Table) -> Any:
    return sa.insert(table)


_BUILT: dict[tuple[sa.Table, tuple[str, ...]], Any] = {}


def _unnest_insert(
    table: sa.Table, names: tuple[str, ...], dialect: sa.Dialect
) -> tuple[str, list[tuple[str, Callable[[list[Any]], list[Any]]]]]:
    """The statement for rows with these keys, and how to make each column's array."""
    q = dialect.identifier_preparer
    arrays, convert = [], []
    for i, name in enumerate(names):
        col = table.c[name]
        pg_array = next(a for t, a in _ARRAYS if isinstance(col.type, t))
        arrays.append(f"%(c{i})s::{pg_array}")
        convert.append((name, _column(col.type, dialect)))
    cols = ", ".join(q.quote(n) for n in names)
    aliases = ", ".join(f"c{i}" for i in range(len(names)))
    sql = (
        f"INSERT INTO {q.format_table(table)} ({cols}) "
        f"SELECT {aliases} FROM unnest({', '.join(arrays)}) WITH ORDINALITY "
        f"AS u({aliases}, n) ORDER BY n"
    )
    return sql, convert


def _column(
    type_: sa.types.TypeEngine[Any], dialect: sa.Dialect
) -> Callable[[list[Any]], list[Any]]:
    process = type_.dialect_impl(dialect).bind_processor(dialect)
    if isinstance(type_, sa.Double):
        # An int where a float belongs (exact in JSON, e.g. a time of 1700000000): psycopg
        # dumps a list of one Python type only, and PostgreSQL would have cast it anyway.
        return lambda values: [v if v is None or type(v) is float else float(v) for v in values]
    if process is None:
        return lambda values: values
    return lambda values: [process(v) for v in values]
