"""Crashes of a store written through the packed insert path, at the engine's named kill points.

tests/test_kill_points.py kills a writer of ``(key, value)`` batches; here the child
(tests/packed_kill_writer.py) writes through relaxed state tables whose all-insert chunks of
BIGINT pks become ``PackedColumns`` runs, ``PackedImm`` imms and SSTs built from the buffers
(``SstableBuilder.add_packed``; one imm per epoch read back first, so flushed from its lists).
The child reports its imms before each sync: every one packed, at least one still holding its
buffers. It is SIGKILLed at each kill point, among them between the packed flush (its SSTs
uploaded) and the commit: ``flush.after_sst_upload``. The hits are this workload's (its
progress lines and the phase each point fires in match kill_writer.py's: a delta write's hit 7
is the commit of epoch 5, hit 9 the compaction delta after epoch 6).

After the kill, read-only first (nothing vacuumed): every acknowledged commit is there and at
most the one in flight more; every epoch up to the recovered one reads, row for row, as the
model of the chunks written (``StorageTable``, decoded), and nothing of a later epoch is
visible; every SST the version references exists. Then as the writer: no orphan SST is left,
the rows still read exactly, and the tables take a next epoch through the packed path again.
Local stores for every point, S3 (moto; ``s3_integration``, native run only, as
tests/test_kill_points.py's) for the packed flush's kill.
"""

import os
import signal
import sys

import pytest

from hummock.killpoints import KILL_POINTS
from relational.errors import EpochError
from relational.storage_table import StorageTable

sys.path.insert(0, os.path.dirname(__file__))
from kill_writer import OPTIONS  # noqa: E402
from packed_kill_writer import DIST_KEYS, SCHEMA, TABLES, epoch_chunks, open_tables, write_epoch  # noqa: E402
from test_kill_points import PHASES, _location, case_params, open_writer, run_child, sst_ids_on  # noqa: E402

from hummock import HummockStorage  # noqa: E402
from hummock.shared_buffer import PackedImm  # noqa: E402

WRITER = os.path.join(os.path.dirname(__file__), "packed_kill_writer.py")

# (kill point, hit, the child's phase at the kill, acknowledged epochs by then)
CASES = [
    ("flush.after_sst_upload", 5, "syncing", 4),        # the packed flush uploaded, no commit yet
    ("flush.after_sst_upload", 1, "syncing", 0),        # ... of the first epoch
    ("manifest.before_delta_write", 7, "committing", 4),
    ("manifest.after_delta_write", 7, "committing", 4),
    ("manifest.after_delta_write", 9, "compacting", 6),
    ("object_store.after_barrier", 9, "committing", 4),
    ("object_store.after_barrier", 11, "compacting", 6),
    ("compaction.after_outputs", 2, "compacting", 6),
    ("compaction.after_install", 2, "compacting", 6),
    ("vacuum.mid_delete", 10, "compacting", 6),
]
S3_CASES = {("flush.after_sst_upload", 5)}


def test_the_cases_cover_every_kill_point():
    assert {point for point, *_ in CASES} == set(KILL_POINTS) == set(PHASES)


def model_up_to(last: int) -> list[dict]:
    """``[{table: {pk: row}}]`` after each epoch 0..``last`` (index 0: empty)."""
    tables = {t: {} for t in TABLES}
    out = [{t: {} for t in TABLES}]
    for i in range(1, last + 1):
        for table, rows in epoch_chunks(i):
            for r in rows:
                tables[table][r[0]] = r          # relaxed: the newer row of a pk wins
        out.append({t: dict(rows) for t, rows in tables.items()})
    return out


def _rows(store, table: int, epoch: int) -> list:
    reader = StorageTable(store, table, SCHEMA, [0], dist_key_indices=DIST_KEYS[table])
    return sorted((tuple(r.values()) for r in reader.to_arrow(epoch).to_pylist()), key=lambda r: r[0])


def check_reads(store, models: list, committed: int) -> None:
    """Every epoch 1..committed reads exactly as the model (retention keeps them); the epoch
    after the committed one is not readable, and the newest reads hold none of its rows."""
    assert store.max_committed_epoch >> 16 == committed
    for i in range(1, committed + 1):
        for table in TABLES:
            assert _rows(store, table, i << 16) == sorted(models[i][table].values()), (i, table)
    for table in TABLES:
        with pytest.raises(EpochError):
            StorageTable(store, table, SCHEMA, [0], dist_key_indices=DIST_KEYS[table]).get_row((1,), (committed + 1) << 16)
        if committed:
            keys = [k for k, _ in store.iter(table, store.max_committed_epoch)]
            assert len(keys) == len(models[committed][table])


def _write_next(store, nxt: int) -> int:
    """Epoch ``nxt`` as the child writes it, then a checkpoint; the packed imms it made."""
    write_epoch(open_tables(store, nxt << 16), nxt)
    packed = sum(type(imm) is PackedImm for imm in store._buffer.all_imms())
    store.checkpoint(nxt << 16)
    return packed


@pytest.mark.parametrize("kind, point, hit, phase, acked_at_kill", case_params(CASES, S3_CASES))
def test_kill_the_packed_writer_at_point_then_recover(kind, point, hit, phase, acked_at_kill, tmp_path, request,
                                                     monkeypatch):
    url, extra = _location(kind, tmp_path, request)
    options = OPTIONS.replace(**extra)
    code, lines, err = run_child(url, extra, f"{point}:{hit}", WRITER)
    assert code == -signal.SIGKILL, f"child exited {code}, not by SIGKILL at {point}:{hit}\n{err[-3000:]}"
    progress = [line for line in lines if not line.startswith("imms ")]
    assert progress and progress[-1].split()[0] != "done"
    for line in lines:          # the packed path: every imm packed; table 1 flushed from its buffers
        if line.startswith("imms "):
            unread, packed, total, direct = line.split()[1:]
            assert (int(unread), int(packed), int(total), direct) == (3, 4, 4, "1"), line
    acked = max([int(line.split()[1]) for line in progress if line.startswith("committed ")], default=0)
    last_phase, in_flight = progress[-1].split()[0], int(progress[-1].split()[1])
    assert last_phase in PHASES[point], (point, progress[-3:])
    assert (last_phase, acked) == (phase, acked_at_kill), (point, hit, progress[-4:])

    # 1. read-only: nothing is vacuumed, so the store is exactly what the crash left
    with HummockStorage.open(url, options, read_only=True) as reader:
        committed = reader.max_committed_epoch >> 16
        if last_phase == "committing" and point == "manifest.after_delta_write":
            assert committed == in_flight == acked + 1   # the delta is the commit point
        else:
            assert committed == acked                     # never committed, or nothing was in flight
        referenced = reader.version().sst_ids()
        missing = referenced - sst_ids_on(reader)
        assert not missing, f"SSTs the durable version references are gone: {sorted(missing)}"
        models = model_up_to(committed + 1)
        check_reads(reader, models, committed)
        leftovers = sst_ids_on(reader) - referenced

    # 2. the writer: its open vacuums the crash's leftovers; the next epoch is packed again
    with open_writer(url, options, monkeypatch) as store:
        on_store = sst_ids_on(store)
        assert on_store == store.version().sst_ids(), \
            f"orphan SSTs survived the writer's vacuum: {sorted(on_store - store.version().sst_ids())}"
        check_reads(store, models, committed)
        assert _write_next(store, committed + 1) == 4
        check_reads(store, models, committed + 1)
        store.compact_all()
        check_reads(store, models, committed + 1)
    if point in ("flush.after_sst_upload", "compaction.after_outputs", "compaction.after_install",
                 "vacuum.mid_delete", "object_store.after_barrier"):
        assert leftovers, f"a kill at {point} should leave unreferenced SSTs for the reopen's vacuum"


def test_packed_child_without_kill_point_runs_to_the_end(tmp_path):
    """The harness itself: without HUMMOCK_KILL_POINT the child completes (exit 3, 'done'),
    and every epoch reads as the model."""
    path = str(tmp_path / "store")
    code, lines, err = run_child(path, {}, None, WRITER)
    assert code == 3 and lines[-1] == "done", err[-2000:]
    with HummockStorage.open(path, OPTIONS, read_only=True) as store:
        committed = store.max_committed_epoch >> 16
        assert committed == 12
        check_reads(store, model_up_to(committed + 1), committed)
