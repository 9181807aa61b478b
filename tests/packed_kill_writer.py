"""Child process of tests/test_packed_kill_points.py: kill_writer.py's deterministic writer, but
writing through relaxed state tables whose all-insert chunks of BIGINT pks take the packed
insert path (``StateTable._packed_insert``: ``PackedColumns`` runs, ``PackedImm`` imms, SSTs
built by ``SstableBuilder.add_packed``), killed at a named kill point
(``HUMMOCK_KILL_POINT=name[:N]``, hummock/killpoints.py).

Usage: ``python packed_kill_writer.py URL [OPTIONS_JSON]`` (``OPTIONS_JSON``: extra
``StorageOptions`` fields, e.g. the S3 endpoint and credentials).

Resumes after the store's ``max_committed_epoch``. Each epoch ``i`` (epoch ``i << 16``) writes
``epoch_chunks(i)`` (a pure function of ``i``: the parent rebuilds the rows): two insert chunks
per table, each of distinct pks, the second above the first, some pks rewriting rows of the
epoch before (relaxed: the newer row wins). Each table spills after its first chunk
(``try_flush``), so its epoch is two packed imms. Table 1 has no distribution key (one vnode):
its two imms' key ranges follow one another, and its flush adds them straight from their
buffers (``add_packed``). Table 2 is hashed on its pk and reads a spilled row back inside the
epoch (``get_row``), so one of its imms holds lists when flushed: the general merge. Then
``sync`` (the flush; ``flush.after_sst_upload`` fires after its SSTs are uploaded, before any
commit), ``commit_epoch``, and every third epoch ``compact_all()`` (``vacuum_min_age_s=0``).

Progress lines (flushed), the phase the parent reads the in-flight operation from, as
kill_writer.py's, plus before each sync ``imms <packed with buffers> <packed> <all> <tables
flushed from buffers>``::

    opened <max_committed index>
    imms <b> <p> <n> <t>
    syncing <i>
    committing <i>
    committed <i>
    compacting <i>
    compacted <tasks>
    done              no kill point was hit (exit status 3)
"""

import json
import os
import sys

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(__file__))

from hummock.flush import _packed_in_order  # noqa: E402
from hummock.shared_buffer import PackedImm  # noqa: E402
from kill_writer import open_store, run_epochs  # noqa: E402
from relational.state_table import StateTable  # noqa: E402
from relational.types import DataType as T  # noqa: E402

SCHEMA = [("id", T.BIGINT), ("grp", T.INT), ("name", T.VARCHAR), ("score", T.DOUBLE)]
TABLES = (1, 2)
READ_TABLE = 2
DIST_KEYS = {1: [], 2: [0]}   # table -> its distribution key
ROWS = 120        # per chunk


def row(i: int, table: int, pk: int) -> tuple:
    return (pk, (pk * 7 + i) % 5, None if pk % 7 == 0 else f"n{i}-{table}-{pk}", pk / 4 + i)


def epoch_chunks(i: int):
    """``[(table, [row, ...]), ...]`` in write order: per table two chunks of distinct pks, the
    second's above the first's; the first starts inside the previous epoch's range."""
    out = []
    for table in TABLES:
        base = i * 2 * ROWS - ROWS // 2 + table * 13
        for c in range(2):
            lo = base + c * ROWS
            out.append((table, [row(i, table, pk) for pk in range(lo, lo + ROWS)]))
    return out


def columns(rows):
    ids, grps, names, scores = zip(*rows)
    return [pa.array(ids, pa.int64()), pa.array(grps, pa.int32()), pa.array(names, pa.string()),
            pa.array(scores, pa.float64())]


def open_tables(store, epoch: int) -> dict:
    """The child's state tables (relaxed, BIGINT pk), at ``epoch``."""
    tables = {t: StateTable(store, t, SCHEMA, [0], dist_key_indices=DIST_KEYS[t], consistent=False,
                            flush_threshold=1 << 30) for t in TABLES}
    for t in tables.values():
        t.init_epoch(epoch)
    return tables


def write_epoch(tables: dict, i: int) -> None:
    """Write ``epoch_chunks(i)``, spilling after each table's first chunk (reading table 2's
    spilled imm back), and commit the tables: the epoch's packed imms are in the store."""
    for n, (table, rows) in enumerate(epoch_chunks(i)):
        t = tables[table]
        t.write_chunk(np.ones(len(rows), np.int16), columns(rows))
        if n % 2 == 0:                   # after a table's first chunk: a spill, a packed imm now
            t.flush_threshold = 0
            t.try_flush()
            t.flush_threshold = 1 << 30
            if table == READ_TABLE:      # a read of that imm inside the epoch builds its lists
                assert t.get_row((rows[5][0],)) == rows[5]
    for t in tables.values():
        t.commit((i + 1) << 16)


def main(url: str, extra: dict) -> int:
    store, first = open_store(url, extra)
    tables = open_tables(store, first << 16)

    def report_imms() -> None:
        imms = store._buffer.all_imms()
        packed = [imm for imm in imms if type(imm) is PackedImm]
        direct = [t for t in TABLES if _packed_in_order(store._buffer.imms(t)) is not None]
        print(f"imms {sum(imm.packed is not None for imm in packed)} {len(packed)} {len(imms)} "
              f"{','.join(map(str, direct)) or '-'}", flush=True)
    return run_epochs(store, first, lambda i: write_epoch(tables, i), report_imms)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}))
