"""The Postgres wire protocol server: ``hummock serve URL`` (docs/pgwire.md).

Modules: :mod:`sql.pgwire.protocol` (framing), :mod:`sql.pgwire.types` (OIDs, value
encodings), :mod:`sql.pgwire.pg_catalog` (the catalog queries psql and psycopg send),
:mod:`sql.pgwire.server` (sessions, the asyncio server). Nothing here is imported by the rest
of ``sql``: the server is a client of :mod:`sql.session` like any other.

Callers: :mod:`cli.serve`, tests, embedders (``PgServer(url).serve_forever()``).
"""

from sql.pgwire.server import PgServer, ServerOptions

__all__ = ["PgServer", "ServerOptions"]
