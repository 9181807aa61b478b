"""The pgwire server: Postgres clients (psql, psycopg, JDBC ...) on one Hummock database.

Job: accept connections (asyncio), authenticate (trust, cleartext password or md5), and run
each client's simple and extended queries, prepared statements, COPY FROM STDIN / TO STDOUT
and cancel requests as a session of the database (docs/pgwire.md).

Sessions and the writer. The server opens the database once, as its single writer; each client
is a :class:`sql.session.Connection` on that ``Database`` (``owns_db=False``: its own session
variables and lost-writes notices, the shared graph). Statements of writer sessions run one at
a time, under :attr:`PgServer.lock`, on a worker thread (the event loop never runs SQL): the
Database's graph, DML log and catalog are changed by one statement at a time, exactly as in
one process. A client that asks for a read-only session (startup parameter or ``-c``
option ``default_transaction_read_only=on``, or every client of ``hummock serve --read-only``)
gets its own read-only connection (``sql.connect(url, read_only=True)``: its own reader lease,
each statement reads the newest committed epoch) and runs beside the writer, without the lock.

Invariants:
- one client's bad input -- garbage bytes, a length beyond ``max_message_bytes``, a
  disconnect mid-query -- ends that client's connection only (with an ErrorResponse where the
  socket still takes one); the server and the other sessions go on. A statement that was
  running when its client went away finishes (its writes are kept, as after any acknowledged
  statement) and its result is dropped.
- errors carry the SQLSTATE of their class (``sqlstate`` of sql/errors.py, refined by the
  message for undefined/duplicate objects and data exceptions) and, when the error has a
  line and column, the ``P`` field (1-based character position in the query string).
- cancel (``CancelRequest`` with the session's key) stops a statement still waiting for the
  writer lock, or a result still being sent (57014); a statement already running in the
  engine finishes (the engine has no interruption point) and a query's result is then dropped.
- files on the server: ``COPY ... FROM/TO 'path'`` and ``read_csv``/``read_parquet`` touch the
  server's file system, so they are refused unless ``allow_server_files`` (Postgres reserves
  them for superusers too); ``COPY FROM STDIN`` / ``TO STDOUT`` always work.

Transactions: Hummock has none. ``BEGIN`` and ``COMMIT`` are accepted (``COMMIT`` is FLUSH, so
what the "transaction" wrote is durable and visible when it returns); ``ROLLBACK`` undoes
nothing and says so in a WARNING; ``SAVEPOINT``/``RELEASE`` are no-ops. An error inside a
``BEGIN`` block puts the session in the failed state (25P02) until ROLLBACK/COMMIT, as
Postgres does, so drivers' transaction handling keeps working.

Callers: :mod:`cli.serve` (``hummock serve``), tests and ``bench/pgwire.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import logging
import os
import re
import secrets
import tempfile
import threading
from dataclasses import dataclass, field

from sql import errors as E
from sql.pgwire import pg_catalog as C
from sql.pgwire import protocol as P
from sql.pgwire import types as PT
from sql.pgwire.statement_text import (FailedTransaction, PG_SETTINGS, QueryCanceled, REPORTED,
                                        ServerFilesRefused, _BEGIN, _COMMIT, _COPY, _COPY_STDIN, _COPY_STDOUT,
                                        _DISCARD, _QUERY_WORDS, _REPORTED_NAMES, _RESET, _ROLLBACK,
                                        _ROLLBACK_TO, _SAVEPOINT, _SERVER_FILES, _SET, _SET_TX, _SET_TZ, _SHOW,
                                        _engine_variables, _message, _position, _tag, count_params,
                                        split_query, sqlstate_of)

log = logging.getLogger("sql.pgwire")

DEFAULT_PORT = 4566
ROWS_PER_WRITE = 2000                 # DataRows between awaits (cancel checks, back-pressure)
COPY_CHUNK = 64 << 10


@dataclass
class ServerOptions:
    """How :class:`PgServer` listens and authenticates (``hummock serve --help``)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    auth: str = "trust"                  # "trust" | "password" (cleartext) | "md5"
    users: dict = field(default_factory=dict)   # user -> password (password/md5 auth)
    max_message_bytes: int = 64 << 20
    read_only: bool = False              # every session a reader (another process writes)
    implicit_flush: bool = False         # sessions start with RW_IMPLICIT_FLUSH on
    allow_server_files: bool = False     # COPY 'path' / read_csv(...) over the wire
    workers: int = 16                    # threads running statements
    barrier_interval_ms: int = 1000
    connect_options: dict = field(default_factory=dict)   # more sql.connect keyword arguments

    def __post_init__(self):
        if self.auth not in ("trust", "password", "md5"):
            raise E.InterfaceError(f"auth must be 'trust', 'password' or 'md5', got {self.auth!r}")
        if self.auth != "trust" and not self.users:
            raise E.InterfaceError(f"auth={self.auth!r} needs at least one user and password")


@dataclass
class Outcome:
    """One statement's result, encoded for the wire."""

    tag: str
    fields: list | None = None          # RowDescription (name, oid, size, format) or None
    cells: list | None = None           # per column: encoded cells
    nrows: int = 0
    notices: list = field(default_factory=list)


@dataclass
class Prepared:
    text: str
    oids: list
    nparams: int


@dataclass
class Portal:
    prepared: Prepared
    params: list
    formats: list
    outcome: Outcome | None = None
    at: int = 0


class PgServer:
    """The server (module docstring). ``start()`` (in a running loop) or ``start_in_thread()``
    (a loop of its own; tests, benchmarks) or ``serve_forever()``; ``stop()`` closes it all."""

    def __init__(self, url: str, options: ServerOptions | None = None):
        self.url = url
        self.options = options or ServerOptions()
        self.lock = threading.Lock()
        self.db = None
        self.sessions: dict = {}
        self._pids = iter(range(1000, 1 << 30))
        self._pool = None
        self._server = None
        self._loop = None
        self._thread = None
        self.port = None
        self.clients_served = 0
        self._tasks: set = set()

    # --- lifecycle ---------------------------------------------------------------------------------

    def open(self) -> None:
        """Open the database (the writer, unless ``read_only``)."""
        from sql.database import Database
        from sql.parse import stack_headroom

        if not self.options.read_only and self.db is None:
            with stack_headroom():
                self.db = Database(self.url, self.options.barrier_interval_ms, **self.options.connect_options)
        self._pool = concurrent.futures.ThreadPoolExecutor(self.options.workers, thread_name_prefix="pgwire")

    async def start(self) -> None:
        if self._pool is None:
            self.open()
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._client, self.options.host, self.options.port,
                                                  limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]

    def serve_forever(self, ready=None) -> None:
        async def main():
            await self.start()
            if ready is not None:
                ready(self)
            async with self._server:
                await self._server.serve_forever()
        try:
            asyncio.run(main())
        finally:
            self.close()

    def start_in_thread(self) -> PgServer:
        """Run the server's loop on a daemon thread; returns once it listens (``self.port``)."""
        started = threading.Event()
        failure = []

        def run():
            try:
                asyncio.run(self._run_until_stopped(started))
            except BaseException as exc:   # reported to the caller below
                failure.append(exc)
                started.set()

        self._stopping = None
        self._thread = threading.Thread(target=run, name="pgwire-server", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        return self

    async def _run_until_stopped(self, started) -> None:
        self._stopping = asyncio.Event()
        await self.start()
        started.set()
        await self._stopping.wait()
        self._server.close()
        for session in list(self.sessions.values()):
            session.abort()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=30)
        await self._server.wait_closed()

    def stop(self) -> None:
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(30)
            self._thread = None
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self.db is not None:
            db, self.db = self.db, None
            with self.lock:
                db.close()

    # --- clients -----------------------------------------------------------------------------------

    async def _client(self, reader, writer) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        session = Session(self, reader, writer)
        try:
            await session.run()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        except Exception:   # a bug must not take the server down: log it, drop this client
            log.exception("pgwire session failed")
        finally:
            await session.finish()

    def run_blocking(self, fn):
        return self._loop.run_in_executor(self._pool, fn)

    def cancel(self, pid: int, secret: int) -> None:
        """A CancelRequest: flag session ``pid``'s running statement if ``secret`` is its key."""
        session = self.sessions.get(pid)
        if session is not None and session.secret == secret and session.active:
            session.cancel_requested.set()


class Session:
    """One client connection (module docstring)."""

    def __init__(self, server: PgServer, reader, writer):
        self.server, self.reader, self.writer = server, reader, writer
        self.pid = next(server._pids)
        self.secret = secrets.randbits(31)
        self.conn = None
        self.read_only = server.options.read_only
        self.settings = dict(PG_SETTINGS)
        self.user = self.database = ""
        self.statements: dict = {}
        self.portals: dict = {}
        self.tx = b"I"
        self.cancel_requested = threading.Event()
        self.active = False   # a statement is running or sending: a cancel applies to it
        self.closed = False
        self._tmpdir = None
        self._text = ""

    # --- plumbing ----------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    async def flush(self) -> None:
        await self.writer.drain()

    def abort(self) -> None:
        self.closed = True
        self.cancel_requested.set()
        with contextlib.suppress(Exception):
            self.writer.close()

    async def finish(self) -> None:
        self.closed = True
        self.server.sessions.pop(self.pid, None)
        with contextlib.suppress(Exception):
            self.writer.close()
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                await self.server.run_blocking(lambda: self._close_conn(conn))
            except (RuntimeError, asyncio.CancelledError):   # the pool or loop is stopping: close here
                self._close_conn(conn)
        if self._tmpdir is not None:
            self._tmpdir.cleanup()

    def _close_conn(self, conn) -> None:
        if conn.owns_db:
            conn.close()
        else:
            with self.server.lock:
                conn.close()

    # --- startup -----------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            if not await self._startup():
                return
        except P.ProtocolViolation as exc:
            self.send(P.error_response(exc.sqlstate, str(exc), severity="FATAL"))
            await self.flush()
            return
        self.server.sessions[self.pid] = self
        self.server.clients_served += 1
        await self._loop()

    async def _startup(self) -> bool:
        while True:
            code, body = await P.read_startup(self.reader)
            if code in (P.SSL_REQUEST, P.GSSENC_REQUEST):
                self.send(b"N")   # no TLS / GSS: the client goes on in the clear
                await self.flush()
                continue
            if code == P.CANCEL_REQUEST:
                b = P.Body(body)
                self.server.cancel(b.int32(), b.int32())
                return False
            if code >> 16 != 3:
                raise P.ProtocolViolation(f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
                                          "this server speaks 3.0")
            params = P.startup_params(body)
            break
        if code & 0xFFFF:
            self.send(P.negotiate_version(0, [k for k in params if k.startswith("_pq_.")]))
        self.user = params.get("user") or ""
        if not self.user:
            raise P.ProtocolViolation("no PostgreSQL user name specified in startup packet")
        self.database = params.get("database") or self.user
        if not await self._authenticate():
            return False
        self._apply_startup(params)
        try:
            await self.server.run_blocking(self._open_connection)
        except Exception as exc:   # a store that does not open for a reader, a memory URL ...
            self.send(P.error_response(getattr(exc, "sqlstate", None) or "08006", f"could not open a session: {exc}",
                                       severity="FATAL"))
            await self.flush()
            return False
        self.send(P.auth_ok())
        for name in REPORTED:
            self.send(P.parameter_status(_REPORTED_NAMES.get(name, name), self.settings[name]))
        self.send(P.backend_key(self.pid, self.secret))
        self.send(P.ready(self.tx))
        await self.flush()
        return True

    def _apply_startup(self, params: dict) -> None:
        self.settings["session_authorization"] = self.user
        for key, value in params.items():
            if key in ("user", "database", "replication") or key.startswith("_pq_."):
                continue
            if key == "options":
                for name, val in re.findall(r"(?:-c\s*|--)([\w.]+)=((?:\\ |\S)+)", value):
                    self.settings[name.lower()] = val.replace("\\ ", " ")
            else:
                self.settings[key.lower()] = value
        self.settings["client_encoding"] = "UTF8"   # the only encoding this server speaks
        if self.settings.get("default_transaction_read_only", "off").lower() in ("on", "true", "1", "yes"):
            self.read_only = True
        self.settings["default_transaction_read_only"] = "on" if self.read_only else "off"
        self.settings["transaction_read_only"] = self.settings["default_transaction_read_only"]

    async def _authenticate(self) -> bool:
        opts = self.server.options
        if opts.auth == "trust":
            return True
        salt = secrets.token_bytes(4)
        self.send(P.auth_cleartext() if opts.auth == "password" else P.auth_md5(salt))
        await self.flush()
        kind, body = await P.read_message(self.reader, P.MAX_STARTUP_BYTES)
        if kind != b"p":
            raise P.ProtocolViolation(f"expected a password message, got {kind!r}")
        given = P.Body(body).cstr()
        expected = opts.users.get(self.user)
        if expected is not None and opts.auth == "md5":
            inner = hashlib.md5((expected + self.user).encode()).hexdigest()
            expected = "md5" + hashlib.md5(inner.encode() + salt).hexdigest()
        if expected is None or not secrets.compare_digest(given.encode(), expected.encode()):
            self.send(P.error_response("28P01", f'password authentication failed for user "{self.user}"',
                                       severity="FATAL"))
            await self.flush()
            return False
        return True

    def _open_connection(self) -> None:
        from sql.parse import stack_headroom
        from sql.session import Connection, connect

        opts = self.server.options
        if self.read_only:
            if self.server.url.startswith("memory://") or self.server.url == ":memory:":
                raise E.NotSupportedError("a read-only session needs a database another process can read "
                                          "(a path or s3:// URL), not a memory database")
            with stack_headroom():
                self.conn = connect(self.server.url, read_only=True, **opts.connect_options)
        else:
            with self.server.lock:
                self.conn = Connection(self.server.db, implicit_flush=opts.implicit_flush, owns_db=False)
        for name in ("application_name", "extra_float_digits"):
            if name in self.conn.variables:
                self.conn.variables[name] = self.settings.get(name, self.conn.variables[name])

    # --- the message loop ----------------------------------------------------------------------------

    async def _loop(self) -> None:
        limit = self.server.options.max_message_bytes
        skipping = False   # after an error in an extended-query batch: until Sync
        while not self.closed:
            try:
                kind, body = await P.read_message(self.reader, limit)
            except P.ProtocolViolation as exc:
                self.send(P.error_response(exc.sqlstate, str(exc), severity="FATAL"))
                await self.flush()
                return
            if kind == b"X":
                return
            if kind == b"Q":
                skipping = False
                self.active = True
                try:
                    await self._simple(body)
                finally:
                    self.active = False
                continue
            if kind == b"S":
                skipping = False
                self.send(P.ready(self.tx))
                await self.flush()
                continue
            if kind == b"H":
                await self.flush()
                continue
            if skipping:
                continue
            handler = {b"P": self._parse, b"B": self._bind, b"D": self._describe, b"E": self._execute,
                       b"C": self._close}.get(kind)
            if handler is None:
                if kind in (b"d", b"c", b"f"):   # copy messages outside COPY: ignored (protocol)
                    continue
                self.send(P.error_response("08P01", f"unexpected message type {kind!r}", severity="FATAL"))
                await self.flush()
                return
            self.active = kind == b"E" or kind == b"D"
            try:
                await handler(P.Body(body))
            except P.ProtocolViolation as exc:
                self.send(P.error_response(exc.sqlstate, str(exc), severity="FATAL"))
                await self.flush()
                return
            except Exception as exc:
                self._send_error(exc, self._text, 0)
                skipping = True
            if self.active:
                self.active = False
                self.cancel_requested.clear()
                await self.flush()

    def _send_error(self, exc, text: str, offset: int) -> None:
        """ErrorResponse for ``exc`` (an unexpected exception is logged and reported as XX000:
        the session goes on)."""
        from hummock.errors import HummockError

        if isinstance(exc, (ConnectionError, asyncio.IncompleteReadError)):
            raise exc
        if not isinstance(exc, HummockError):
            log.exception("pgwire: unexpected error in a statement")
            exc = E.InternalError(f"internal error: {type(exc).__name__}: {exc}")
        self.send(P.error_response(sqlstate_of(exc), _message(exc), _position(exc, text, offset)))
        if self.tx == b"T":
            self.tx = b"E"

    # --- simple query --------------------------------------------------------------------------------

    async def _simple(self, body: bytes) -> None:
        text = P.Body(body).cstr()
        pieces = split_query(text)
        if not pieces:
            self.send(P.empty_query())
        for piece, offset in pieces:
            try:
                if _COPY_STDIN.match(piece):
                    await self._copy_in(piece)
                    continue
                if _COPY_STDOUT.match(piece):
                    await self._copy_out(piece)
                    continue
                outcome = await self._run(piece, [], [])
                self._send_outcome_head(outcome)
                await self._send_rows(outcome, 0, outcome.nrows)
                self.send(P.command_complete(outcome.tag))
            except Exception as exc:
                self._send_error(exc, piece, offset)
                break
        self.cancel_requested.clear()
        self.send(P.ready(self.tx))
        await self.flush()

    def _send_outcome_head(self, outcome: Outcome) -> None:
        for text in outcome.notices:
            self.send(P.notice(text))
        if outcome.fields is not None:
            self.send(P.row_description(outcome.fields))

    async def _send_rows(self, outcome: Outcome, start: int, end: int) -> None:
        if outcome.cells is None:
            return
        for at in range(start, end, ROWS_PER_WRITE):
            if self.cancel_requested.is_set():
                raise QueryCanceled("canceling statement due to user request")
            self.send(P.data_rows(outcome.cells, at, min(end, at + ROWS_PER_WRITE)))
            await self.flush()

    # --- extended query ------------------------------------------------------------------------------

    async def _parse(self, b: P.Body) -> None:
        name, text = b.cstr(), b.cstr()
        oids = [b.int32() for _ in range(b.int16())]
        if len(split_query(text)) > 1:
            raise E.SqlSyntaxError("cannot insert multiple commands into a prepared statement")
        n = count_params(text)
        self.statements[name] = Prepared(text, oids + [0] * max(0, n - len(oids)), max(n, len(oids)))
        self.send(P.message(b"1"))

    async def _bind(self, b: P.Body) -> None:
        portal, name = b.cstr(), b.cstr()
        formats = [b.int16() for _ in range(b.int16())]
        values = []
        for _ in range(b.int16()):
            size = b.int32()
            values.append(None if size == -1 else b.bytes(size))
        result_formats = [b.int16() for _ in range(b.int16())]
        prepared = self.statements.get(name)
        if prepared is None:
            raise _undefined("prepared statement", name)
        if len(values) != prepared.nparams:
            raise E.ParameterError(f"bind message supplies {len(values)} parameters, but prepared statement "
                                   f"\"{name}\" requires {prepared.nparams}")
        if len(formats) not in (0, 1, len(values)):
            raise P.ProtocolViolation(f"bind message has {len(formats)} parameter formats for {len(values)} parameters")
        params = []
        for i, data in enumerate(values):
            fmt = formats[i] if len(formats) > 1 else (formats[0] if formats else 0)
            params.append(PT.decode_param(data, prepared.oids[i], fmt == 1))
        self.portals[portal] = Portal(prepared, params, result_formats)
        self.send(P.message(b"2"))

    async def _describe(self, b: P.Body) -> None:
        kind, name = b.byte(), b.cstr()
        if kind == b"S":
            prepared = self.statements.get(name)
            if prepared is None:
                raise _undefined("prepared statement", name)
            self.send(P.parameter_description([o or PT.TEXT_OID for o in prepared.oids]))
            if not _is_query(prepared.text):
                self.send(P.no_data())
                return
            outcome = await self._run(prepared.text, [None] * prepared.nparams, [], describe=True)
            self.send(P.row_description(outcome.fields) if outcome.fields is not None else P.no_data())
            return
        portal = self.portals.get(name)
        if portal is None:
            raise _undefined("portal", name)
        if portal.outcome is None:
            portal.outcome = await self._run_portal(portal)
        self._send_outcome_head(portal.outcome)
        if portal.outcome.fields is None:
            self.send(P.no_data())
        portal.outcome.notices = []

    async def _run_portal(self, portal: Portal) -> Outcome:
        if not split_query(portal.prepared.text):
            return Outcome("")   # an empty query: EmptyQueryResponse
        if _COPY_STDIN.match(portal.prepared.text) or _COPY_STDOUT.match(portal.prepared.text):
            raise E.NotSupportedError("COPY FROM STDIN / TO STDOUT runs through a simple query (psql's \\copy, "
                                      "psycopg's cursor.copy()), not a prepared statement")
        return await self._run(portal.prepared.text, portal.params, portal.formats)

    async def _execute(self, b: P.Body) -> None:
        name, max_rows = b.cstr(), b.int32()
        portal = self.portals.get(name)
        if portal is None:
            raise _undefined("portal", name)
        described = portal.outcome is not None
        if portal.outcome is None:
            portal.outcome = await self._run_portal(portal)
        outcome = portal.outcome
        if not described:
            for text in outcome.notices:
                self.send(P.notice(text))
        end = outcome.nrows if max_rows <= 0 else min(outcome.nrows, portal.at + max_rows)
        await self._send_rows(outcome, portal.at, end)
        portal.at = end
        if outcome.fields is not None and end < outcome.nrows:
            self.send(P.message(b"s"))   # PortalSuspended
        elif not outcome.tag:
            self.send(P.empty_query())
        else:
            self.send(P.command_complete(outcome.tag))

    async def _close(self, b: P.Body) -> None:
        kind, name = b.byte(), b.cstr()
        (self.statements if kind == b"S" else self.portals).pop(name, None)
        self.send(P.message(b"3"))

    # --- running one statement -------------------------------------------------------------------------

    async def _run(self, text: str, params: list, formats: list, describe: bool = False) -> Outcome:
        """Run one statement (server-level, catalog or engine) and encode its result."""
        self._text = text   # an error's position is counted in it (extended query: _loop)
        if self.tx == b"E" and not (_COMMIT.match(text) or _ROLLBACK.match(text) or _ROLLBACK_TO.match(text)):
            raise FailedTransaction("current transaction is aborted, commands ignored until end of transaction block")
        local = self._server_statement(text, describe)
        if local is not None:
            if local == "commit":
                return await self.server.run_blocking(lambda: self._commit(text))
            return local
        if self.read_only and C.mentions_catalog(text):   # a reader: the writer's newest catalog first
            await self.server.run_blocking(self.conn.db.refresh)
        answer = C.answer(text, params, self._context())
        if answer is not None:
            fields = [(n, oid, -1, 0) for n, oid in answer.columns]
            if any(f == 1 for f in formats):
                raise PT.UnsupportedFormat("catalog queries answer in text format only")
            columns = list(zip(*answer.rows)) if answer.rows else [[] for _ in fields]
            cells = [[P._I32.pack(len(v.encode())) + v.encode() if v is not None else b"\xff\xff\xff\xff"
                      for v in col] for col in columns]
            return Outcome(answer.tag, fields, cells, len(answer.rows))
        if not self.server.options.allow_server_files and (_COPY.match(text) or _SERVER_FILES.search(text)):
            raise ServerFilesRefused("reading or writing files on the server (COPY 'path', read_csv(...)) is not "
                                     "allowed over pgwire: use COPY ... FROM STDIN / TO STDOUT (psql's \\copy), or "
                                     "start the server with --allow-server-files")
        return await self.server.run_blocking(lambda: self._engine(text, params, formats))

    def _context(self) -> C.Context:
        catalog = self.conn.db.catalog
        settings = dict(self.settings)
        settings.update({k: v for k, v in self.conn.variables.items() if k in settings})
        return C.Context(catalog, self.user, self.database, settings, self.pid)

    @contextlib.contextmanager
    def _turn(self):
        """The writer lock for a writer session (taken in slices, so a cancel stops the wait)."""
        if self.read_only:
            yield
            return
        lock = self.server.lock
        while not lock.acquire(timeout=0.05):
            if self.cancel_requested.is_set() or self.closed:
                raise QueryCanceled("canceling statement due to user request")
        try:
            yield
        finally:
            lock.release()

    def _engine(self, text: str, params: list, formats: list) -> Outcome:
        cur = self.conn.cursor()
        with self._turn():
            if self.cancel_requested.is_set():
                raise QueryCanceled("canceling statement due to user request")
            cur.execute_prepared(text, params)
        if cur.description is None:
            return Outcome(_tag(text, cur))
        if self.cancel_requested.is_set():
            raise QueryCanceled("canceling statement due to user request")
        table, types = cur.fetch_arrow(), cur.result_types
        binary = _formats(formats, len(types))
        for dtype, fmt in zip(types, binary):
            if fmt:
                PT.check_binary(dtype)
        fields = [(d[0], PT.type_oid(t), PT.type_size(t), int(fmt))
                  for d, t, fmt in zip(cur.description, types, binary)]
        cells = [PT.column_cells(table.column(i), t, fmt) for i, (t, fmt) in enumerate(zip(types, binary))]
        return Outcome(_tag(text, cur), fields, cells, table.num_rows)

    def _commit(self, text: str) -> Outcome:
        self.tx = b"I"
        if self.read_only:
            return Outcome("COMMIT")
        with self._turn():
            self.conn.commit()
        return Outcome("COMMIT")

    def _server_statement(self, text: str, describe: bool):
        """The Outcome of a statement the server answers itself, ``"commit"``, or None."""
        if _BEGIN.match(text):
            if not describe:
                self.tx = b"T"
            return Outcome("BEGIN" if text.split()[0].upper() == "BEGIN" else "START TRANSACTION")
        if _COMMIT.match(text):
            if describe:
                return Outcome("COMMIT")
            if self.tx == b"E":
                self.tx = b"I"
                return Outcome("ROLLBACK")
            return "commit"
        if _ROLLBACK_TO.match(text):
            if not describe and self.tx == b"E":
                self.tx = b"T"
            return Outcome("ROLLBACK")
        if _ROLLBACK.match(text):
            notices = []
            if self.tx == b"I" and not describe:
                notices.append("there is no transaction in progress")
            elif not describe:
                notices.append("ROLLBACK undoes nothing in Hummock: every statement is kept once it returns "
                               "(it commits at the next barrier)")
            if not describe:
                self.tx = b"I"
            return Outcome("ROLLBACK", notices=notices)
        if _SAVEPOINT.match(text):
            return Outcome(text.split()[0].upper())
        if _SET_TX.match(text):
            return Outcome("SET")
        if _DISCARD.match(text):
            return Outcome(" ".join(text.split()[:1]).upper())
        m = _SET_TZ.match(text)
        if m:
            return self._set("timezone", m.group(2), describe)
        m = _SET.match(text)
        if m and (m.group(2).lower() in PG_SETTINGS or "." in m.group(2)) \
                and m.group(2).lower() not in _engine_variables():
            return self._set(m.group(2).lower(), m.group(3), describe)
        m = _RESET.match(text)
        if m:
            name = m.group(1).lower()
            if name == "all":
                for key in PG_SETTINGS:
                    if key not in ("session_authorization", "default_transaction_read_only", "transaction_read_only"):
                        self.settings[key] = PG_SETTINGS[key]
            elif name in PG_SETTINGS and name not in _engine_variables():
                self.settings[name] = PG_SETTINGS[name]
            elif name not in _engine_variables():
                raise E.CatalogError(f"unrecognized configuration parameter {name!r}")
            else:
                from sql.statements import SESSION_VARIABLES
                self.conn.variables[name] = SESSION_VARIABLES[name]
            return Outcome("RESET")
        if re.match(r"\s*SHOW\s+TRANSACTION\s+ISOLATION\s+LEVEL\s*;?\s*$", text, re.I):   # JDBC asks
            value = self.settings["transaction_isolation"]
            return Outcome("SHOW", [("transaction_isolation", PT.TEXT_OID, -1, 0)],
                           [[P._I32.pack(len(value)) + value.encode()]], 1)
        m = _SHOW.match(text)
        if m and m.group(1).lower() in self.settings and m.group(1).lower() not in _engine_variables():
            value = self.settings[m.group(1).lower()]
            return Outcome("SHOW", [(m.group(1).lower(), PT.TEXT_OID, -1, 0)],
                           [[P._I32.pack(len(value.encode())) + value.encode()]], 1)
        return None

    def _set(self, name: str, value: str, describe: bool) -> Outcome:
        value = value.strip()
        if value.upper() in ("DEFAULT", "LOCAL"):
            value = PG_SETTINGS.get(name, "")
        value = value[1:-1].replace("''", "'") if len(value) >= 2 and value[0] == value[-1] == "'" else value
        if name == "timezone" and value.upper() not in ("UTC", "'UTC'", "GMT", "ETC/UTC", "Z", "0", "+00", "00:00"):
            raise E.NotSupportedError(f"time zone {value!r} is not supported: Hummock keeps TIMESTAMPTZ in UTC "
                                      "(SET TIME ZONE 'UTC')")
        if name == "client_encoding" and value.upper().replace("-", "") not in ("UTF8", "UNICODE"):
            raise E.NotSupportedError(f"client_encoding {value!r} is not supported: this server speaks UTF8")
        if name in ("default_transaction_read_only", "transaction_read_only"):
            wanted = "on" if value.lower() in ("on", "true", "1", "yes") else "off"
            if wanted != self.settings[name]:
                raise E.NotSupportedError(f"{name} is chosen when the session starts (options='-c {name}=on'), "
                                          "not changed in it")
            value = wanted
        if describe:
            return Outcome("SET")
        self.settings[name] = value
        if name in REPORTED:
            self.send(P.parameter_status(_REPORTED_NAMES.get(name, name), value))
        return Outcome("SET")

    # --- COPY ------------------------------------------------------------------------------------------

    def _tmp(self, suffix: str) -> str:
        if self._tmpdir is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="hummock-pgwire-")
        return os.path.join(self._tmpdir.name, f"copy-{secrets.token_hex(6)}{suffix}")

    def _copy_plan(self, piece: str, pattern) -> tuple:
        """``(statement text with a temporary path, path, parsed COPY options)``."""
        from sql.parse import parse_script

        m = pattern.match(piece)
        csv = re.search(r"\bcsv\b", piece[m.end():], re.I) is not None
        path = self._tmp(".csv" if csv else ".txt")
        rewritten = piece[:m.start(2)] + "'" + path + "'" + piece[m.end(2):]
        stmts = parse_script(rewritten)
        if len(stmts) != 1 or stmts[0].kind != "copy":
            raise E.SqlSyntaxError("expected one COPY statement")
        return rewritten, path, stmts[0].options

    async def _copy_in(self, piece: str) -> None:
        if self.tx == b"E":
            raise FailedTransaction("current transaction is aborted, commands ignored until end of transaction block")
        rewritten, path, options = self._copy_plan(piece, _COPY_STDIN)
        if self.read_only:   # refused before the client sends its data, as Postgres does
            raise E.ReadOnlyError("COPY FROM is not allowed in a read-only session")
        rel = self.conn.db.catalog.get(options["table"][-1]) if options.get("table") else None
        if rel is None:
            raise E.CatalogError(f"relation {'.'.join(options.get('table') or ['?'])!r} does not exist")
        ncols = len(options["columns"]) if options.get("columns") else len(rel.visible_columns)
        if options["with"].get("format", "").lower() in ("binary",):
            raise E.NotSupportedError("COPY ... FROM STDIN with format binary is not supported: use text or csv")
        self.send(P.copy_response(b"G", ncols))
        await self.flush()
        failed = None
        with open(path, "wb") as f:
            while True:
                kind, body = await P.read_message(self.reader, self.server.options.max_message_bytes)
                if kind == b"d":
                    f.write(body)
                elif kind == b"c":
                    break
                elif kind == b"f":
                    failed = P.Body(body).cstr()
                    break
                elif kind in (b"H", b"S"):
                    continue
                else:
                    raise P.ProtocolViolation(f"unexpected message type {kind!r} during COPY FROM STDIN")
        if failed is not None:
            raise QueryCanceled(f"COPY from stdin failed: {failed}")
        _strip_end_marker(path)
        outcome = await self.server.run_blocking(lambda: self._engine(rewritten, [], []))
        self.send(P.command_complete(outcome.tag))

    async def _copy_out(self, piece: str) -> None:
        if self.tx == b"E":
            raise FailedTransaction("current transaction is aborted, commands ignored until end of transaction block")
        rewritten, path, options = self._copy_plan(piece, _COPY_STDOUT)
        if options["with"].get("format", "").lower() in ("binary", "parquet"):
            raise E.NotSupportedError("COPY ... TO STDOUT writes text, csv or json")
        if options.get("query") is not None:   # run the query here: its column count goes in CopyOutResponse
            outcome, ncols = await self.server.run_blocking(lambda: self._copy_query_out(options, path))
        else:
            outcome = await self.server.run_blocking(lambda: self._engine(rewritten, [], []))
            rel = self.conn.db.catalog.get(options["table"][-1])
            ncols = len(options["columns"]) if options.get("columns") else (len(rel.visible_columns) if rel else 0)
        self.send(P.copy_response(b"H", ncols))
        with open(path, "rb") as f:
            while True:
                chunk = f.read(COPY_CHUNK)
                if not chunk:
                    break
                if not chunk.endswith(b"\n"):
                    chunk += f.readline()
                for line in chunk.splitlines(keepends=True):
                    self.send(P.copy_data(line))
                if self.cancel_requested.is_set():
                    raise QueryCanceled("canceling statement due to user request")
                await self.flush()
        os.unlink(path)
        self.send(P.copy_done())
        self.send(P.command_complete(outcome.tag))


    def _copy_query_out(self, options: dict, path: str) -> tuple:
        """``COPY (query) TO STDOUT``: the query's rows written to ``path`` as COPY TO writes a
        file (sql/copy.py ``write_file``); returns ``(Outcome, column count)``."""
        from sql.copy import CopyOptions, write_file

        where = "COPY (query)"
        copy_options = CopyOptions(path, options["with"], where)
        cur = self.conn.cursor()
        with self._turn():
            cur.execute_prepared(options["query"].text, [])
        table, types = cur.fetch_arrow(), cur.result_types
        names = [d[0] for d in cur.description]
        write_file(table, names, types, path, copy_options, where)
        return Outcome(f"COPY {table.num_rows}"), len(names)


def _strip_end_marker(path: str) -> None:
    """Drop a final ``\\.`` line (the end-of-data marker of the text format) from the copy file."""
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 5))
        tail = f.read()
        for marker in (b"\\.\r\n", b"\\.\n", b"\\."):
            before = tail[:-len(marker)]
            if tail.endswith(marker) and (size == len(marker) or before.endswith(b"\n")):
                f.truncate(size - len(marker))
                break


def _formats(formats: list, n: int) -> list:
    if not formats:
        return [False] * n
    if len(formats) == 1:
        return [formats[0] == 1] * n
    if len(formats) != n:
        raise P.ProtocolViolation(f"bind message has {len(formats)} result formats for {n} columns")
    return [f == 1 for f in formats]


def _is_query(text: str) -> bool:
    words = text.lstrip().split(None, 1)
    return bool(words) and (words[0].upper().startswith(_QUERY_WORDS) or C.mentions_catalog(text))


class UndefinedStatement(E.ProgrammingError):
    sqlstate = "26000"


class UndefinedPortal(E.ProgrammingError):
    sqlstate = "34000"


def _undefined(what: str, name: str):
    cls = UndefinedStatement if what == "prepared statement" else UndefinedPortal
    return cls(f'{what} "{name}" does not exist')
