"""The shell on a terminal (``hummock sql`` with stdin a tty): the prompt loop, line editing,
history, tab completion and a pager.

Job: :func:`interactive` reads statements with prompt_toolkit (readline when it is missing) and
feeds them to a :class:`cli.shell.Shell`:
- Enter runs the text when it is a complete statement (ends with ``;`` outside quotes and
  comments), a meta command, ``help``/``quit``/``exit`` or empty; otherwise it starts a new
  line (prompt ``hummock->``). A statement typed over several lines is one history entry
  (``~/.hummock_history``, ``HUMMOCK_HISTORY`` overrides).
- Tab completes SQL keywords, meta commands and the names of relations and their columns
  (read from the catalog at each completion, so new tables show up).
- A result taller than the terminal goes through ``$PAGER`` (default ``less -SFRX``; an empty
  ``PAGER`` turns paging off), as psql does; results sent elsewhere (``\\o``) never page.

Callers: :mod:`cli.shell` (``run_shell``).
"""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import subprocess

from cli.script import is_complete

KEYWORDS = sorted("""SELECT FROM WHERE GROUP BY ORDER HAVING LIMIT OFFSET JOIN LEFT RIGHT FULL INNER OUTER ON USING
AS AND OR NOT NULL IS IN EXISTS BETWEEN LIKE ILIKE CASE WHEN THEN ELSE END DISTINCT UNION ALL EXCEPT INTERSECT
INSERT INTO VALUES UPDATE SET DELETE CREATE TABLE MATERIALIZED VIEW INDEX DROP IF PRIMARY KEY APPEND ONLY
FLUSH SHOW TABLES VIEWS INDEXES DESCRIBE EXPLAIN ANALYZE COPY WITH FORMAT HEADER CSV PARQUET JSON
SUBSCRIPTION DECLARE CURSOR FETCH CLOSE TRUE FALSE INT INTEGER BIGINT SMALLINT VARCHAR TEXT BOOLEAN
DOUBLE PRECISION REAL NUMERIC DECIMAL DATE TIME TIMESTAMP TIMESTAMPTZ INTERVAL BYTEA ASC DESC NULLS
FIRST LAST OVER PARTITION WINDOW COUNT SUM AVG MIN MAX TUMBLE HOP""".split())
META = ["\\d", "\\dt", "\\dm", "\\di", "\\x", "\\i", "\\o", "\\timing", "\\copy", "\\?", "\\q"]


def history_path() -> pathlib.Path:
    return pathlib.Path(os.environ.get("HUMMOCK_HISTORY", pathlib.Path.home() / ".hummock_history"))


def interactive(shell, url: str) -> None:
    """The prompt loop (module docstring) until ``\\q``, ``quit`` or Ctrl-D."""
    from hummock import __version__
    print(f"hummock {__version__} SQL shell on {url}. Type \\? for help, \\q to quit.", file=shell.out)
    shell.pager = _pager_command()
    read = _reader(shell)
    while not shell.done:
        try:
            text = read("hummock-> " if shell.continuing else "hummock=> ")
        except KeyboardInterrupt:
            shell.buffer = ""
            continue
        except EOFError:
            print(file=shell.out)
            break
        try:
            for line in text.split("\n"):
                shell.feed(line)
                if shell.done:
                    break
        except KeyboardInterrupt:   # a statement interrupted while it ran: the shell goes on
            shell.buffer = ""
            print("cancelled", file=shell.err)


def completion_words(shell) -> list:
    """Keywords, meta commands, and every relation's name and column names."""
    shell._refresh()
    names = set()
    for rel in shell.conn.db.catalog.ordered():
        names.add(rel.name)
        names.update(n for n, _ in rel.visible_columns)
    return KEYWORDS + META + sorted(names)


def page(text: str, command) -> bool:
    """Show ``text`` through the pager ``command`` when it is taller than the terminal; True
    when it did (the caller prints it otherwise)."""
    if not command or text.count("\n") + 2 < shutil.get_terminal_size().lines:
        return False
    try:
        subprocess.run(command, input=text + "\n", text=True, check=False)
    except OSError:
        return False
    return True


def _pager_command():
    value = os.environ.get("PAGER")
    if value is None:
        return ["less", "-SFRX"] if shutil.which("less") else None
    return shlex.split(value) or None


def _reader(shell):
    """``prompt -> text`` with editing and history: prompt_toolkit, else readline."""
    try:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.completion import WordCompleter
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings
    except ImportError:
        return _readline_reader()
    keys = KeyBindings()

    @keys.add("enter")
    def _(event):
        buffer = event.current_buffer
        text = buffer.text.strip()
        if (not text or text.startswith("\\") or text.rstrip(";").lower() in ("help", "quit", "exit")
                or is_complete(shell.buffer + buffer.text + "\n")):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    completer = WordCompleter(lambda: completion_words(shell), ignore_case=True, sentence=False,
                              pattern=_WORD)
    session = PromptSession(history=FileHistory(str(history_path())), key_bindings=keys, multiline=True,
                            completer=completer, complete_while_typing=False,
                            prompt_continuation=lambda width, line, soft: "hummock-> ")
    return lambda prompt: session.prompt(prompt)


def _word_pattern():
    import re
    return re.compile(r"(\\?[A-Za-z0-9_]+|\\)")


_WORD = _word_pattern()


def _readline_reader():
    import atexit
    import readline
    path = str(history_path())
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    atexit.register(lambda: _save_readline(readline, path))
    return input


def _save_readline(readline, path) -> None:
    try:
        readline.write_history_file(path)
    except OSError:
        pass
