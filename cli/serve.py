"""``hummock serve URL``: the database at URL behind the Postgres wire protocol (docs/pgwire.md).

Job: parse the options into :class:`sql.pgwire.ServerOptions`, open the database, listen, print
one line saying where (stderr), serve until interrupted (Ctrl-C / SIGTERM: a clean stop -- the
graph checkpointed, the store closed -- and exit code 0).

Passwords never go on the command line: ``--auth password|md5`` reads the password of
``--user`` from the environment variable named by ``--password-env`` (default
``HUMMOCK_PG_PASSWORD``) or from ``--password-file``.

Callers: :mod:`cli.main` (registered as a subcommand).
"""

from __future__ import annotations

import os
import signal
import sys

from cli.common import CommandError


def register(commands) -> None:
    parser = commands.add_parser(
        "serve", help="serve the database to Postgres clients (psql, psycopg, JDBC ...)",
        description="Serve the database at URL over the Postgres wire protocol: one writer database, each "
                    "client a session of it (read-only clients get a reader of their own). "
                    "Connect with: psql -h 127.0.0.1 -p 4566 -U me. Docs: docs/pgwire.md")
    parser.add_argument("url", metavar="URL", help="a path, file:///path, s3://bucket/prefix?... or :memory:")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=4566, help="port to listen on (default 4566; 0: any free)")
    parser.add_argument("--auth", choices=("trust", "password", "md5"), default="trust",
                        help="trust (default: anyone who reaches the port), password (cleartext) or md5")
    parser.add_argument("--user", default=None, help="the user --auth password/md5 admits")
    parser.add_argument("--password-env", default="HUMMOCK_PG_PASSWORD", metavar="VAR",
                        help="environment variable holding --user's password (default HUMMOCK_PG_PASSWORD)")
    parser.add_argument("--password-file", default=None, metavar="FILE", help="file holding --user's password")
    parser.add_argument("--read-only", action="store_true",
                        help="serve readers only, beside a writer in another process (every session read-only)")
    parser.add_argument("--implicit-flush", action="store_true",
                        help="sessions start with RW_IMPLICIT_FLUSH on (each write is visible when it returns)")
    parser.add_argument("--allow-server-files", action="store_true",
                        help="let clients read and write files on this machine (COPY 'path', read_csv(...))")
    parser.add_argument("--barrier-interval-ms", type=int, default=1000, help="checkpoint period (default 1000)")
    parser.add_argument("--max-message-bytes", type=int, default=64 << 20,
                        help="largest client message accepted (default 64 MiB)")
    parser.set_defaults(func=serve)


def options_of(args):
    from sql.pgwire import ServerOptions

    users = {}
    if args.auth != "trust":
        if not args.user:
            raise CommandError(f"--auth {args.auth} needs --user NAME (and its password in ${args.password_env} "
                               "or --password-file)", 2)
        if args.password_file:
            with open(args.password_file, encoding="utf-8") as f:
                password = f.read().rstrip("\n")
        else:
            password = os.environ.get(args.password_env)
        if not password:
            raise CommandError(f"--auth {args.auth}: no password for {args.user!r} (set ${args.password_env} or pass "
                               "--password-file)", 2)
        users[args.user] = password
    return ServerOptions(host=args.host, port=args.port, auth=args.auth, users=users, read_only=args.read_only,
                         implicit_flush=args.implicit_flush, allow_server_files=args.allow_server_files,
                         barrier_interval_ms=args.barrier_interval_ms, max_message_bytes=args.max_message_bytes)


def serve(args) -> int:
    from sql.pgwire import PgServer

    server = PgServer(args.url, options_of(args))

    def ready(s):
        print(f"hummock: serving {args.url} on {s.options.host}:{s.port} (Postgres protocol; auth {args.auth}"
              f"{', read-only' if args.read_only else ''}); Ctrl-C stops", file=sys.stderr, flush=True)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever(ready)
    except KeyboardInterrupt:
        print("hummock: server stopped", file=sys.stderr)
    return 0
