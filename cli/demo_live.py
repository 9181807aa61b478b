"""The demo's live figures: after each FLUSH, events streamed and events/s, the committed epoch,
each MV's row count (read from its counter MV, ``counters``: a one-row ``count(*)`` MV over the
MV's change stream that cli/demo.py creates, so a FLUSH costs one point read per MV, not a scan
of it; an MV without a counter is counted by ``SELECT count(*)``), and the LSM shape (L0 sub-levels and bytes, bytes per level, compaction
tasks so far).

On a terminal a rich ``Live`` panel (a progress bar and a table) redraws in place; otherwise one
plain line per tenth of the events goes to ``out``, so logs and tests see a short, stable text.

Callers: :mod:`cli.demo` only.
"""

from __future__ import annotations

import time

from cli.common import human_bytes


class LiveFigures:
    def __init__(self, conn, queries, total_events: int, out, counters=None):
        self.conn, self.queries, self.total, self.out = conn, queries, total_events, out
        self.counters = dict(counters or {})   # MV name -> its one-row count(*) MV
        self.started = time.perf_counter()
        self.tty = hasattr(out, "isatty") and out.isatty()
        self._live = None
        self._next_line = 0

    def __enter__(self) -> LiveFigures:
        if self.tty:
            from rich.console import Console
            from rich.live import Live
            self._live = Live(self._render(None), console=Console(file=self.out), refresh_per_second=4,
                              transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.__exit__(None, None, None)

    def figures(self, stats) -> dict:
        store = self.conn.db.store
        info = store.stats()
        rows = {q.mv: self._rows(q.mv) for q in self.queries}
        elapsed = time.perf_counter() - self.started
        return {"events": stats.events, "rate": stats.events / elapsed if elapsed else 0.0,
                "epoch": info["max_committed_epoch"], "rows": rows, "l0_sub_levels": info["l0_sub_levels"],
                "level_sizes": list(info["level_sizes"]),
                "compactions": (info.get("compaction") or {}).get("tasks", 0)}

    def _rows(self, mv: str) -> int:
        counter = self.counters.get(mv)
        if counter is None:
            return self.conn.execute(f"SELECT count(*) FROM {mv}").fetchone()[0]
        row = self.conn.execute(f"SELECT n FROM {counter}").fetchone()
        return row[0] if row else 0

    def update(self, stats) -> None:
        if self._live is not None:
            self._live.update(self._render(self.figures(stats)))
        elif stats.events >= self._next_line or stats.events >= self.total:
            self._next_line = stats.events + max(self.total // 10, 1)
            f = self.figures(stats)
            mvs = " ".join(f"{name.removeprefix('nexmark_')}={n:,}" for name, n in f["rows"].items())
            print(f"  {f['events']:>10,} events {f['rate']:>9,.0f}/s  epoch {f['epoch']}  {mvs}  "
                  f"L0 {f['l0_sub_levels']} sub-levels {human_bytes(f['level_sizes'][0])}, "
                  f"L1-L6 {human_bytes(sum(f['level_sizes'][1:]))}, {f['compactions']} compactions",
                  file=self.out, flush=True)

    def _render(self, f):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        table = Table(title="hummock demo: live", show_header=True, expand=False)
        table.add_column("figure")
        table.add_column("value", justify="right")
        if f is None:
            return Group(ProgressBar(total=self.total, completed=0), table)
        table.add_row("events", f"{f['events']:,} / {self.total:,}")
        table.add_row("events/s", f"{f['rate']:,.0f}")
        table.add_row("committed epoch", str(f["epoch"]))
        for name, n in f["rows"].items():
            table.add_row(f"rows in {name}", f"{n:,}")
        table.add_row("L0", f"{f['l0_sub_levels']} sub-levels, {human_bytes(f['level_sizes'][0])}")
        for i, size in enumerate(f["level_sizes"][1:], 1):
            if size:
                table.add_row(f"L{i}", human_bytes(size))
        table.add_row("compaction tasks", str(f["compactions"]))
        return Group(ProgressBar(total=self.total, completed=f["events"]), table)
