"""Many rows into one table in one statement: a batch's task stream, samples, events, and
its upserts (metrics, task groups, the claim of its (cluster, seq) pairs).

SQLAlchemy runs a list of rows as the driver's executemany, and psycopg sends each row
as a statement of its own (bound, sent and answered one by one, pipelined): with a few
hundred task stream rows a computation tick, that took a team server replica more CPU
than the rest of a batch's ingest, and PostgreSQL one statement per row.  On PostgreSQL
the rows go instead as one JSON document, written by msgspec's encoder and read by
json_to_recordset in one INSERT ... SELECT, in their order (WITH ORDINALITY: ids follow
the rows as with executemany).  One array per column, as this module sent before, cost
the replica more again (psycopg builds an array's text element by element in Python),
and the json module's encoder ten times msgspec's (its floats).  msgspec writes NaN and
the infinities as null: the rows come from messages the contract checked
(messages.check_batch refuses those numbers), so none is there to write.  A JSON
column's value is nested in the document as it is and read as json (a JSON null there
is SQL NULL: what SQLAlchemy binds for a column with none_as_null, the only kind sent
this way).  A single row goes as a document too, and the statement runs on the driver's
connection in the SQLAlchemy transaction, not through exec_driver_sql: a statement's
execution context cost a replica as much CPU as psycopg's own execute, and a batch
makes several (benchmarks/team_ingest_cpu.py measures a replica's CPU and PostgreSQL's
a message).

SQLite runs in-process (no round trips to save) and keeps executemany, but at the driver:
SQLAlchemy's executemany builds each row's parameters in Python, in the scheduler's
process (benchmarks/store_write_rows.py: a task stream row took the writer 11.8 us of
CPU that way, 7.4 us as tuples).  The statement is compiled once per set of columns, and the rows go to sqlite3
as tuples, one list per column put through the column type's bind processor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import msgspec
import sqlalchemy as sa

# The type each column type is read as from the document, and cast to (schema.py's
# column types); JSON values travel as their text.  A whole number may come as a float
# (the contract's Count: 5.0), which int8 does not read: numeric does, exactly.
_TYPES: list[tuple[type, str, str]] = [
    (sa.Boolean, "bool", ""),
    (sa.BigInteger, "numeric", "::int8"),
    (sa.SmallInteger, "numeric", "::int2"),
    (sa.Double, "float8", ""),
    (sa.Text, "text", ""),
    (sa.JSON, "json", ""),
]

_ENCODER = msgspec.json.Encoder()


def insert_rows(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """INSERT rows that no constraint can refuse as duplicates (all have rows[0]'s keys)."""
    upsert_rows(conn, _insert(table), rows)


def upsert_rows(conn: sa.Connection, stmt: Any, rows: list[dict[str, Any]]) -> Any:
    """Run an INSERT (its ON CONFLICT and RETURNING clauses too) for all rows (each with
    rows[0]'s keys) at once; what it returns, to iterate as tuples.  On PostgreSQL all
    rows go in one statement, so an ON CONFLICT DO UPDATE must not meet one key twice
    (store/ingest.py's _latest)."""
    dialect = conn.dialect
    if not rows or dialect.name not in ("postgresql", "sqlite"):
        return conn.execute(stmt, rows)
    names = tuple(rows[0])
    key = (stmt, names, dialect.name)
    if key not in _BUILT:  # with the first engine's dialect: make_engine sets all up alike
        make = _recordset_insert if dialect.name == "postgresql" else _driver_insert
        _BUILT[key] = make(stmt, names, dialect)
    built = _BUILT[key]
    if built is None:  # a column type or clause this module cannot send this way
        return conn.execute(stmt, rows)
    if dialect.name == "sqlite":
        sql, columns = built
        # One list per column, each through its bind processor, zipped into rows in C.
        values = [list(map(f, map(get, rows))) if f else list(map(get, rows)) for get, f in columns]
        return conn.exec_driver_sql(sql, list(zip(*values)))
    try:
        doc = _ENCODER.encode(rows).decode()
    except (TypeError, OverflowError, msgspec.EncodeError):  # a value JSON has no form for
        return conn.execute(stmt, rows)
    if "\\u0000" in doc:
        # A NUL in a JSON column's value (text columns hold none: the contract refuses
        # them): the json type keeps it, json_to_recordset cannot read it.
        return conn.execute(stmt, rows)
    return _driver_execute(conn, built, {"rows": doc})


def _driver_execute(conn: sa.Connection, sql: str, params: dict[str, Any]) -> Any:
    """The statement on the connection's driver connection, in its transaction: what
    exec_driver_sql does, less its execution context (which cost a replica as much
    client CPU as psycopg's own execute).  A driver error is raised as SQLAlchemy's
    would be (DataError, IntegrityError, OperationalError: what ingest tells apart)."""
    dbapi = conn.dialect.loaded_dbapi
    try:
        return conn.connection.driver_connection.execute(sql, params)  # type: ignore[union-attr]
    except dbapi.Error as e:
        raise sa.exc.DBAPIError.instance(
            sql, params, e, dbapi.Error, hide_parameters=True, dialect=conn.dialect
        ) from e


@functools.cache
def _insert(table: sa.Table) -> Any:
    return sa.insert(table)


_BUILT: dict[tuple[Any, tuple[str, ...], str], Any] = {}


def _driver_insert(
    stmt: Any, names: tuple[str, ...], dialect: sa.Dialect
) -> tuple[str, list[tuple[Callable[[Any], Any], Callable[[Any], Any] | None]]] | None:
    """SQLite: the statement for rows with these keys as the driver runs it (positional
    parameters), and per parameter, in its order, the row's value and the bind processor
    (None where the statement binds values of its own or returns rows: executemany then)."""
    compiled = stmt.compile(dialect=dialect, column_keys=list(names), for_executemany=True)
    order = compiled.positiontup
    if order is None or sorted(order) != sorted(names) or compiled.returning:
        return None
    table = stmt.table
    columns: list[tuple[Callable[[Any], Any], Callable[[Any], Any] | None]] = []
    for name in order:
        process = table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
        columns.append((itemgetter(name), process))
    sql: str = compiled.string
    return sql, columns


def _recordset_insert(stmt: Any, names: tuple[str, ...], dialect: sa.Dialect) -> str | None:
    """The statement for rows with these keys (None where the rows cannot go as a
    document: executemany then)."""
    table = stmt.table
    q = dialect.identifier_preparer
    fields: list[str] = []
    selected: list[str] = []
    for i, name in enumerate(names):
        col = table.c[name]
        read = next((t[1:] for t in _TYPES if isinstance(col.type, t[0])), None)
        # A JSON column's value is nested in the document as it is; a JSON null there
        # is SQL NULL, which is what SQLAlchemy binds only where none_as_null is set.
        if read is None or (isinstance(col.type, sa.JSON) and not col.type.none_as_null):
            return None
        fields.append(f"{q.quote(name)} {read[0]}")
        selected.append(f"c{i}{read[1]}")
    # What follows VALUES (ON CONFLICT ..., RETURNING ...), as SQLAlchemy writes it for
    # these columns; one that binds values of its own cannot be reused for all rows.
    compiled = stmt.compile(dialect=dialect, column_keys=list(names), for_executemany=True)
    if set(compiled.params) != set(names):
        return None
    text = str(compiled)
    # VALUES holds only bind parameters: the first of these words starts the tail.
    starts = [i for i in (text.find(" ON CONFLICT "), text.find(" RETURNING ")) if i >= 0]
    tail = text[min(starts) :] if starts else ""
    cols = ", ".join(q.quote(n) for n in names)
    aliases = ", ".join(f"c{i}" for i in range(len(names)))
    sql = (
        f"INSERT INTO {q.format_table(table)} ({cols}) "
        f"SELECT {', '.join(selected)} "
        f"FROM ROWS FROM (json_to_recordset(%(rows)s::json) AS ({', '.join(fields)})) "
        f"WITH ORDINALITY AS u({aliases}, n) ORDER BY n{tail}"
    )
    return sql
