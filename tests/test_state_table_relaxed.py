"""A relaxed (``consistent=False``) StateTable against a dict model.

Relaxed mode is what a Materialize with ``no_check`` and every table fed by a consistent stream
use: no storage probes, an insert of a pk that has a row overwrites it, and all-insert chunks
wait in the MemTable as sorted runs merged at commit (``MemTable.append_run``). Random chunks --
all-insert ones (new pks, pks with a row, pks written earlier in the epoch), mixed ones with
deletes and update pairs of present rows, invisible rows -- interleaved with point reads, batched
reads, scans, small-threshold flushes, commits and reopens must read exactly the model, and a
reopened store must hold the last checkpoint's rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from hummock import HummockStorage, StorageOptions
from hummock.key import new_epoch
from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT, StateTable
from relational.types import DataType as T

SCHEMA = [("id", T.INT), ("v", T.VARCHAR)]
PKS = st.integers(0, 12)     # few pks: chunks of one epoch often write the same pk
VALUES = st.text(alphabet="abc", max_size=3)


class RelaxedMachine(RuleBasedStateMachine):
    new_path = None    # set by the test: () -> a new store location

    @initialize(dist=st.sampled_from([None, [0]]), flush=st.sampled_from([1 << 30, 200]))
    def setup(self, dist, flush):
        self.args = dict(dist_key_indices=dist, consistent=False, flush_threshold=flush)
        self.path = type(self).new_path()
        self.store = HummockStorage.open(self.path, StorageOptions(compactor="none"))
        self.model: dict = {}
        self.checkpointed: dict = {}
        self._new_table()

    def _new_table(self):
        self.table = StateTable(self.store, 9, SCHEMA, [0], **self.args)
        self.table.init_epoch(new_epoch())

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()

    @rule(rows=st.dictionaries(PKS, VALUES, min_size=1, max_size=12), hide=st.sets(PKS, max_size=3))
    def insert_chunk(self, rows, hide):
        """All inserts (some of pks with a row: they overwrite); rows of ``hide`` invisible."""
        pks = list(rows)
        visible = [pk not in hide for pk in pks]
        self.table.write_chunk(np.full(len(pks), OP_INSERT, np.int8),
                               [pa.array(pks, pa.int32()), pa.array([rows[p] for p in pks])],
                               visibility=visible if not all(visible) else None)
        for pk, shown in zip(pks, visible):
            if shown:
                self.model[pk] = rows[pk]

    @rule(data=st.data())
    def mixed_chunk(self, data):
        """Deletes and update pairs of present rows, inserts of absent pks."""
        present = sorted(self.model)
        ops, ids, vals = [], [], []
        touched = set()
        for pk in data.draw(st.lists(st.sampled_from(present), unique=True, max_size=6)) if present else []:
            touched.add(pk)
            if data.draw(st.booleans()):
                ops.append(OP_DELETE), ids.append(pk), vals.append(self.model.pop(pk))
            else:
                new = data.draw(VALUES)
                ops += [OP_UPDATE_DELETE, OP_UPDATE_INSERT]
                ids += [pk, pk]
                vals += [self.model[pk], new]
                self.model[pk] = new
        for pk in data.draw(st.lists(PKS.filter(lambda p: p not in self.model and p not in touched), unique=True,
                                     max_size=4)):
            value = data.draw(VALUES)
            ops.append(OP_INSERT), ids.append(pk), vals.append(value)
            self.model[pk] = value
        if ops:
            self.table.write_chunk(np.array(ops, np.int8), [pa.array(ids, pa.int32()), pa.array(vals)])

    @rule()
    def commit(self):
        self.table.commit(new_epoch())

    @rule()
    def checkpoint(self):
        epoch = self.table.epoch
        self.table.commit(new_epoch())
        self.store.checkpoint(epoch)
        self.checkpointed = dict(self.model)

    @rule()
    def flush(self):
        self.table.try_flush()

    @rule()
    def reopen(self):
        """A crash: everything after the last checkpoint is gone."""
        self.store.close()
        self.store = HummockStorage.open(self.path, StorageOptions(compactor="none"))
        self.model = dict(self.checkpointed)
        self._new_table()

    @rule(pks=st.lists(PKS, max_size=8))
    def reads(self, pks):
        assert self.table.get_rows([(p,) for p in pks]) == [(p, self.model[p]) if p in self.model else None
                                                            for p in pks]
        for p in pks[:2]:
            assert self.table.get_row((p,)) == ((p, self.model[p]) if p in self.model else None)

    @rule()
    def scan(self):
        """(A rule, not an invariant: a read settles the pending runs, and runs should pile up.)"""
        assert sorted(self.table.iter_with_prefix()) == sorted(self.model.items())

    @invariant()
    def mem_is_sound(self):
        if hasattr(self, "table"):
            self.table.mem._check()


def test_relaxed_state_table_against_a_model(tmp_path_factory):
    class Machine(RelaxedMachine):
        pass

    Machine.new_path = staticmethod(lambda: str(tmp_path_factory.mktemp("relaxed") / "store"))
    run_state_machine_as_test(Machine, settings=settings(max_examples=40, stateful_step_count=30, deadline=None))


def test_an_all_insert_chunk_repeating_an_integer_pk_keeps_its_last_row(tmp_path):
    """All-insert chunks with integer pks are checked for repeats on the pk columns in numpy
    (``StateTable._distinct_int_pks``): a pk that repeats takes the general path (relaxed: the
    last row wins; strict: refused), and rows sharing only one column of a two-column pk are
    distinct rows, written as a run."""
    from relational.errors import InconsistentOpError
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        one = StateTable(store, 1, [("id", T.BIGINT), ("v", T.VARCHAR)], [0], consistent=False)
        two = StateTable(store, 2, [("a", T.INT), ("b", T.SMALLINT), ("v", T.VARCHAR)], [0, 1], consistent=False)
        strict = StateTable(store, 3, [("id", T.BIGINT), ("v", T.VARCHAR)], [0], consistent=True)
        for t in (one, two, strict):
            t.init_epoch(new_epoch())
        ops = np.full(4, OP_INSERT, np.int8)
        one.write_chunk(ops, [pa.array([5, 3, 5, 1], pa.int64()), pa.array(["a", "b", "c", "d"])])
        assert list(one.iter_with_prefix()) == [(1, "d"), (3, "b"), (5, "c")]
        two.write_chunk(ops, [pa.array([1, 1, 2, 1], pa.int32()), pa.array([7, 8, 7, 7], pa.int16()),
                              pa.array(["a", "b", "c", "d"])])
        assert list(two.iter_with_prefix()) == [(1, 7, "d"), (1, 8, "b"), (2, 7, "c")]
        two.write_chunk(ops, [pa.array([3, 4, 5, 6], pa.int32()), pa.array([7, 7, 7, 7], pa.int16()),
                              pa.array(["e", "f", "g", "h"])])   # a run: distinct in the first column
        assert len(two.mem._runs) == 1 and len(list(two.iter_with_prefix())) == 7
        with pytest.raises(InconsistentOpError):
            strict.write_chunk(ops, [pa.array([9, 8, 9, 7], pa.int64()), pa.array(["a", "b", "c", "d"])])
        assert list(strict.iter_with_prefix()) == []
