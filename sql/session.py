"""The DB-API-like Python surface: ``connect()``, :class:`Connection`, :class:`Cursor`.

Job: parse a script, bind parameters (``%s`` / ``$n``, as values: they become typed literals
in the bound tree, never text), run each statement through :mod:`sql.statements`, and expose
results as tuples of Python values, DB-API ``description`` 7-tuples, ``rowcount`` and Arrow.
Session variables (``SET``/``SHOW``) live on the connection; ``implicit_flush=True`` is
``SET RW_IMPLICIT_FLUSH = true``.

Invariants: engine failures surface as ``SqlError`` subclasses (an overflow or a pk conflict
is ``ExecutionError``; deep nesting is ``SqlError``, never RecursionError: statements run
under :func:`sql.parse.stack_headroom`). One statement per ``execute``/``executemany``, as a
Postgres prepared statement: text holding several is refused (``SqlSyntaxError`` at the
second) before anything runs; scripts are split by the caller (``hummock run``,
:func:`cli.script.split_statements`). A closed connection refuses further use.

A connection is a session of its :class:`~sql.database.Database`: every statement runs under
``Database.statement`` (so a failure that loses it can name it), and each ``execute`` first
calls ``Database.check`` -- a failed stream graph is recovered there, and a session that has not
yet been told about acknowledged writes a failure lost gets :class:`~sql.errors.LostWritesError`
once (docs/sql.md, "Errors"). ``data_errors()`` returns the data errors each MV turned into NULLs.

PEP 249 (docs/sql.md, "Python API"): ``paramstyle`` is ``format`` (``%s``; ``$n`` also
works); when parameters are given, ``%%`` is a literal ``%`` (as psycopg), a tuple parameter
becomes a parenthesised list (``x IN %s`` with ``(1, 2)``), numpy scalars are their Python
values. ``commit()`` is FLUSH (statements commit at barriers: there is nothing to roll back, so
``rollback()`` is ``NotSupportedError``). A closed connection or cursor raises
``ClosedError`` (an ``InterfaceError``); cursors are context managers; ``df()`` is the rest of
the result as a pandas DataFrame (pandas optional). Errors are the DB-API classes of
sql/errors.py (every ``SqlError`` is one); the same classes are attributes of
:class:`Connection`, as PEP 249's optional extension names them.

Callers: users (``sql.connect``), the pgwire server (sql/pgwire: one Connection per client
session, sharing one Database).
"""

from __future__ import annotations

import functools
import re

import pyarrow as pa

from hummock.errors import HummockError
from stream.errors import ExpressionError, StreamError

from sql import types as T
from sql.batch.execute import from_arrow_values
from sql.bulk import DEFAULT_CHUNK_SIZE
from sql.database import Database
from sql import errors as E
from sql.errors import ClosedError, ExecutionError, ParameterError, SqlError, SqlSyntaxError, execution_error
from sql.parse import parse_script, stack_headroom, statement_starts
from sql.statements import SESSION_VARIABLES, execute_statement, insert_many


_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")   # as sql/parse.py's


def connect(url: str = ":memory:", barrier_interval_ms: int = 1000, implicit_flush: bool = False,
            **store_options) -> Connection:
    """Open (or create) the database at ``url`` (``:memory:``, a path, ``file://``, ``memory://``,
    ``s3://...``); reopening restores every table and MV."""
    with stack_headroom():   # reopening plans every MV's definition again
        return Connection(Database(url, barrier_interval_ms, **store_options), implicit_flush)


class Connection:
    # PEP 249's optional extension: the exception classes as connection attributes
    Warning, Error, InterfaceError, DatabaseError = E.Warning, E.Error, E.InterfaceError, E.DatabaseError
    DataError, OperationalError, IntegrityError = E.DataError, E.OperationalError, E.IntegrityError
    InternalError, ProgrammingError, NotSupportedError = E.InternalError, E.ProgrammingError, E.NotSupportedError

    def __init__(self, db: Database, implicit_flush: bool = False, owns_db: bool = True):
        self.db = db
        self.variables = dict(SESSION_VARIABLES)
        self.variables["rw_implicit_flush"] = "true" if implicit_flush else "false"
        self.closed = False
        self.owns_db = owns_db   # False: a session of a Database others share (close leaves it open)
        self.session = db.open_session()

    def cursor(self) -> Cursor:
        self._check()
        return Cursor(self)

    def execute(self, sql: str, params=None) -> Cursor:
        return self.cursor().execute(sql, params)

    def executemany(self, sql: str, seq_of_params) -> Cursor:
        return self.cursor().executemany(sql, seq_of_params)

    def flush(self) -> None:
        self.execute("FLUSH")

    def commit(self) -> None:
        """PEP 249 ``commit``: FLUSH -- everything written so far is checkpointed (durable and
        visible to every reader). Statements need no commit to be kept (module docstring)."""
        self._check()
        self.flush()

    def rollback(self) -> None:
        """PEP 249 ``rollback``: there are no transactions to roll back (NotSupportedError)."""
        self._check()
        raise E.NotSupportedError("rollback(): Hummock has no transactions -- each statement is kept once it "
                                  "returns and committed at the next barrier (or FLUSH / commit())")

    def insert_arrow(self, table: str, data, chunk_size: int = DEFAULT_CHUNK_SIZE) -> int:
        """Bulk INSERT of a pyarrow RecordBatch/Table into ``table`` (columns by name); returns
        the row count. The fast path for feeders (sql/bulk.py)."""
        self._check()
        from sql.bulk import insert_arrow
        self.db.check(self.session)
        with self.db.statement(self.session, f"insert_arrow({table!r}, {getattr(data, 'num_rows', '?')} rows)"):
            return insert_arrow(self.db, table, data, self.variables, chunk_size)

    def subscribe(self, subscription: str, since=None, full: bool = False, timeout: float | None = None,
                  poll_interval: float = 0.05):
        """Iterate the changes of ``subscription`` (``CREATE SUBSCRIPTION``): those after ``since``
        (an epoch, or unix ms below 2^48; default: from now), or with ``full=True`` the
        relation's rows first; then live ones as epochs commit, until ``timeout`` seconds pass
        without one (None: forever, 0: stop when caught up). Yields
        ``relational.change_log.Change(epoch, op, row)``; sql/subscription.py ``Subscriber``."""
        self._check()
        from sql.subscription import Subscriber
        self.db.check(self.session)
        return Subscriber(self.db, subscription.lower() if not subscription.startswith('"') else
                          subscription.strip('"'), since, full, timeout, poll_interval)

    def feed(self, table: str, frame, *, checkpoint_location: str, query_name: str | None = None,
             trigger: dict | None = None):
        """Feed ``table`` from a Spark streaming DataFrame, one micro-batch per epoch, exactly once
        (``runtime="spark"`` connections; sql/spark_pipeline/feed.py). ``trigger``: the keyword
        of ``DataStreamWriter.trigger``, e.g. ``{"availableNow": True}``. Returns the query."""
        self._check()
        from sql.spark_pipeline.feed import start_feed
        return start_feed(self.db, table, frame, checkpoint_location=checkpoint_location, query_name=query_name,
                          trigger=trigger)

    def insert_dataframe(self, table: str, frame) -> int:
        """Insert a static Spark DataFrame into ``table`` and its MVs in one micro-batch, read by
        Spark's tasks (``runtime="spark"`` connections; sql/spark_pipeline/feed.py); returns the
        committed epoch."""
        self._check()
        from sql.spark_pipeline.feed import insert_frame
        self.db.check(self.session)
        return insert_frame(self.db, table, frame)

    def data_errors(self) -> dict:
        """``{relation: {error kind: rows}}``: values that data errors (a division by zero, an
        overflow, a cast that does not fit) set to NULL inside each MV since the database was
        opened; the rows are also logged (logger ``stream.expr``, rate-limited)."""
        self._check()
        return self.db.data_errors()

    def _check(self) -> None:
        if self.closed:
            raise ClosedError("the connection is closed")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            from sql.subscription import close_all
            close_all(self.variables)
            if self.owns_db:
                self.db.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Cursor:
    arraysize = 1

    def __init__(self, conn: Connection):
        self.connection = conn
        self.description = None
        self.rowcount = -1
        self.closed = False
        self._table = None
        self._at = 0

    def execute(self, sql: str, params=None) -> Cursor:
        """Run the one statement of ``sql`` with ``params`` (module docstring)."""
        self._check()
        if params is not None:
            sql, params = format_params(sql, params)
        with stack_headroom():
            return self._execute(sql, params)

    def execute_prepared(self, sql: str, params=()) -> Cursor:
        """Run ``sql`` as a Postgres server receives it: ``$n`` placeholders bound to ``params``
        as given (no ``%%``/tuple processing). The pgwire server's entry (sql/pgwire)."""
        self._check()
        with stack_headroom():
            return self._execute(sql, params)

    @property
    def result_types(self) -> list | None:
        """The ``DataType`` of each result column (None without a result set)."""
        return list(self._types) if self.description is not None else None

    def _check(self) -> None:
        if self.closed:
            raise ClosedError("the cursor is closed")
        self.connection._check()

    def _execute(self, sql: str, params=()) -> Cursor:
        self.connection._check()
        params = list(params or ())
        _one_statement(sql, "execute")
        statements = parse_script(sql)
        used = max((s.n_params for s in statements), default=0)
        if used != len(params):   # psycopg/Postgres: every placeholder bound, no value left over
            raise ParameterError(f"the statement uses {used} parameter(s), {len(params)} given")
        self._check_graph(statements)
        result = None
        for stmt in statements:
            result = self._run(stmt, params)
        self.description, self.rowcount, self._table, self._at = None, -1, None, 0
        if result is not None:
            if result.columns is not None:
                self.description = [(n, T.description_name(t), None, None, None, None, None)
                                    for n, t in result.columns]
                self._table = result.table
                self._types = [t for _, t in result.columns]
            self.rowcount = result.rowcount
        return self

    def _check_graph(self, statements) -> None:
        """``Database.check`` for this session (module docstring)."""
        conn = self.connection
        self._guard(statements[0] if statements else None, lambda: conn.db.check(conn.session))

    def _run(self, stmt, params):
        conn = self.connection
        with conn.db.statement(conn.session, stmt.text):
            return self._guard(stmt, lambda: execute_statement(conn.db, stmt, params, conn.variables))

    def _guard(self, stmt, fn):
        try:
            return fn()
        except SqlError:
            raise
        except RecursionError:
            raise SqlError("the statement nests too deeply", *((stmt.line, stmt.column) if stmt else ())) from None
        except ExpressionError as exc:   # a data error in a batch query or DML
            raise execution_error(exc) from exc
        except (StreamError, ArithmeticError) as exc:
            raise ExecutionError(f"{type(exc).__name__}: {exc}") from exc
        except HummockError as exc:
            raise ExecutionError(f"{type(exc).__name__}: {exc}") from exc

    def executemany(self, sql: str, seq_of_params) -> Cursor:
        """Run the one statement of ``sql`` once per parameter set (module docstring). As in
        ``execute``, ``%%`` is a literal ``%`` and numpy scalars are their Python values
        (looked for in the first parameter set, so the common all-Python case costs nothing);
        a tuple parameter (``IN %s``) is for ``execute`` only."""
        self._check()
        seq = seq_of_params if isinstance(seq_of_params, list) else list(seq_of_params)
        first = seq[0] if seq else None
        if first is not None and not isinstance(first, (str, bytes, dict)):
            try:
                first = list(first)
            except TypeError:
                first = None
        if first:
            if any(isinstance(v, tuple) for v in first):
                raise ParameterError("executemany() takes no tuple parameters (IN %s): run execute() per set")
            np = _numpy()
            if np is not None and any(isinstance(v, np.generic) for v in first):
                seq = [[_python_value(v) for v in p] for p in seq]
            if isinstance(sql, str) and "%%" in sql:
                sql = format_params(sql, first)[0]
        with stack_headroom():
            return self._executemany(sql, seq)

    def _executemany(self, sql: str, seq_of_params) -> Cursor:
        self.connection._check()
        _one_statement(sql, "executemany")
        statements = parse_script(sql)
        if len(statements) == 1:
            seq = list(seq_of_params)
            try:
                widths = set(map(len, seq))   # in C: no per-row Python for the common case
            except TypeError:                 # a None (no parameters) or a non-sequence set
                seq = [list(p or ()) for p in seq]
                widths = set(map(len, seq))
            stmt = statements[0]
            if widths and widths != {stmt.n_params}:
                raise ParameterError(f"the statement uses {stmt.n_params} parameter(s), a parameter set has "
                               f"{min(widths - {stmt.n_params})}")
            self._check_graph(statements)
            conn = self.connection
            with conn.db.statement(conn.session, f"{stmt.text} (executemany, {len(seq)} parameter sets)"):
                result = self._guard(stmt, lambda: insert_many(conn.db, stmt, seq, conn.variables))
            if result is not None:
                self.description, self.rowcount, self._table, self._at = None, result.rowcount, None, 0
                return self
            seq_of_params = seq
        total = 0
        for params in seq_of_params:
            self._check()
            self._execute(sql, params)   # (the text and values were prepared by executemany)
            total += max(self.rowcount, 0)
        self.rowcount = total
        return self

    def _rows(self, n=None) -> list:
        self._check()
        if self._table is None:
            raise SqlError("no result set: the last statement returned no rows")
        end = self._table.num_rows if n is None else min(self._table.num_rows, self._at + n)
        part = self._table.slice(self._at, end - self._at)
        self._at = end
        cols = [from_arrow_values(c, t) for c, t in zip(part.columns, self._types)]
        return [tuple(r) for r in zip(*cols)] if cols else [() for _ in range(part.num_rows)]

    def fetchone(self):
        rows = self._rows(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int | None = None) -> list:
        return self._rows(self.arraysize if size is None else size)

    def fetchall(self) -> list:
        return self._rows()

    def fetch_arrow(self) -> pa.Table:
        self._check()
        if self._table is None:
            raise SqlError("no result set: the last statement returned no rows")
        part = self._table.slice(self._at)
        self._at = self._table.num_rows
        return part.rename_columns([d[0] for d in self.description])

    def __iter__(self):
        while True:
            row = self.fetchone()
            if row is None:
                return
            yield row

    def df(self):
        """The rest of the result as a pandas DataFrame (``fetch_arrow().to_pandas()``); pandas is
        optional: without it this is an ``InterfaceError`` saying how to install it."""
        self._check()
        try:
            import pandas  # noqa: F401
        except ImportError as exc:
            raise E.InterfaceError("cursor.df() needs pandas, which is not installed (pip install pandas, or "
                                   "pip install 'hummock[spark]'); fetch_arrow() returns the same rows as Arrow") from exc
        return self.fetch_arrow().to_pandas()

    def setinputsizes(self, sizes) -> None:
        """PEP 249: accepted and ignored."""

    def setoutputsize(self, size, column=None) -> None:
        """PEP 249: accepted and ignored."""

    def close(self) -> None:
        self._table = None
        self.closed = True

    def __enter__(self) -> Cursor:
        self._check()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _one_statement(sql, method: str) -> None:
    """Refuse ``sql`` holding several statements: ``SqlSyntaxError`` at the second (Postgres:
    "cannot insert multiple commands into a prepared statement"), before any is parsed or run."""
    starts = statement_starts(sql) if isinstance(sql, str) else []
    if len(starts) > 1:
        raise SqlSyntaxError(f"{method}() runs one statement, {len(starts)} were given (split a script "
                             "into statements, e.g. with 'hummock run'); the second starts", *starts[1])


def _python_value(value):
    """A parameter as the binder takes it: numpy scalars become their Python values (datetime64
    and timedelta64 at microsecond precision, as TIMESTAMP and INTERVAL hold them)."""
    np = _numpy()
    if np is not None and isinstance(value, np.generic):
        if isinstance(value, np.datetime64):
            return value.astype("datetime64[us]").item()
        if isinstance(value, np.timedelta64):
            return value.astype("timedelta64[us]").item()
        return value.item()
    return value


def _numpy():
    import sys
    return sys.modules.get("numpy")   # a numpy scalar means numpy is imported already


def format_params(sql: str, params):
    """``(text, params)`` for ``execute(sql, params)`` (module docstring, PEP 249): ``%%`` becomes
    ``%`` (``%%s`` stays the text ``% s``, never a placeholder), each ``%s`` whose value is a tuple
    becomes ``(%s, %s, ...)`` with the tuple's items spliced into ``params``, numpy scalars become
    Python values. Quotes, dollar quotes and comments are copied unchanged but for ``%%``. A
    mapping (``%(name)s``) is refused: this paramstyle is ``format``."""
    if isinstance(params, dict):
        raise ParameterError("parameters by name (%(name)s) are not supported: paramstyle is 'format' "
                             "(%s, or $1 ...), pass a sequence")
    if isinstance(params, (str, bytes)):
        raise ParameterError(f"parameters must be a sequence of values, got a {type(params).__name__} "
                             "(write (value,) for one parameter)")
    try:
        params = list(params)
    except TypeError:
        raise ParameterError(f"parameters must be a sequence of values, got {type(params).__name__}") from None
    if not isinstance(sql, str) or ("%" not in sql and not any(isinstance(p, tuple) for p in params)):
        return sql, [_python_value(p) for p in params]
    text, k = _format_text(sql, tuple(len(p) if isinstance(p, tuple) else -1 for p in params))
    values = []
    for value in params[:k]:
        if isinstance(value, tuple):
            values.extend(_python_value(v) for v in value)
        else:
            values.append(_python_value(value))
    values.extend(_python_value(v) for v in params[k:])   # $n placeholders take them as given
    return text, values


@functools.lru_cache(maxsize=256)
def _format_text(sql: str, shape: tuple) -> tuple:
    """``(text, k)`` of :func:`format_params` for ``sql`` and parameters of ``shape`` (per
    parameter: a tuple's length, else -1): the text with ``%%`` made ``%`` and each ``%s`` of a
    tuple made ``(%s, %s, ...)``; ``k`` the parameters its ``%s`` placeholders take. Cached by
    text and shape, as parses are: re-running a statement scans its text once."""
    out, k, i, n = [], 0, 0, len(sql)
    while i < n:
        c = sql[i]
        if c in ("'", '"'):
            j = i + 1
            while j < n and not (sql[j] == c and not sql.startswith(c * 2, j)):
                j += 2 if sql.startswith(c * 2, j) else 1
            out.append(sql[i:j + 1].replace("%%", "%"))
            i = j + 1
        elif sql.startswith("--", i) or sql.startswith("/*", i):
            j = sql.find("\n", i) if sql.startswith("--", i) else sql.find("*/", i + 2)
            j = n if j < 0 else (j if sql.startswith("--", i) else j + 2)
            out.append(sql[i:j])
            i = j
        elif c == "$" and (m := _DOLLAR_TAG.match(sql, i)) is not None:
            j = sql.find(m.group(0), m.end())
            j = n if j < 0 else j + len(m.group(0))
            out.append(sql[i:j])
            i = j
        elif sql.startswith("%%", i):
            out.append("% " if sql.startswith("s", i + 2) else "%")
            i += 2
        elif sql.startswith("%s", i):
            if k >= len(shape):
                raise ParameterError(f"the statement has more %s placeholders than the {len(shape)} "
                                     "parameter(s) given")
            width = shape[k]
            k += 1
            if width == 0:
                raise ParameterError("an empty tuple parameter: 'x IN ()' is not SQL (pass at least one value)")
            out.append("(" + ", ".join(["%s"] * width) + ")" if width > 0 else "%s")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out), k


