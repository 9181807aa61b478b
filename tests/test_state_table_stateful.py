"""StateTable against a dict model (pk -> row) with a hypothesis state machine.

Rules: insert / delete / update (strict mode: valid ones succeed, invalid ones raise
InconsistentOpError and change nothing), write_chunk of mixed ops, try_flush (tiny threshold),
commit, checkpoint, reopen (back to the last checkpoint), get_row, iter_with_prefix with random
prefix / bounds / reverse compared with a Python sort of the model under the table's ASC/DESC
orders, and StorageTable reads at old committed epochs. Runs on memory, local and S3 stores
(S3 with fewer examples), in whichever mode (native / pure) the suite runs.
"""

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from hummock.key import new_epoch
from relational.errors import InconsistentOpError
from relational.memcomparable import OrderType
from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT, StateTable
from relational.storage_table import StorageTable
from relational.types import DataType as T
from table_stores import opener
from test_state_table import pk_sort_key

SCHEMA = [("g", T.INT), ("k", T.VARCHAR), ("v", T.BIGINT), ("d", T.DOUBLE)]
G = st.one_of(st.none(), st.integers(-2, 2))
K = st.sampled_from(["", "a", "a\x00", "ab", "b"])
PK = st.tuples(G, K)
V = st.integers(-10, 10)
D = st.one_of(st.none(), st.sampled_from([0.5, -1.0]))
ORDERS = st.sampled_from([OrderType.ASC, OrderType.DESC, OrderType(False, True), OrderType(True, False)])


class StateTableMachine(RuleBasedStateMachine):
    make_opener = None   # set per store kind: () -> (() -> HummockStorage on one new location)

    @initialize(orders=st.tuples(ORDERS, ORDERS), dist=st.sampled_from([None, [0]]),
                value=st.sampled_from([None, [2, 3], [0, 2, 3]]))
    def setup(self, orders, dist, value):
        self.args = dict(schema=SCHEMA, pk_indices=[0, 1], order_types=list(orders), dist_key_indices=dist,
                         value_indices=value)
        self.orders = orders
        self.open_store = type(self).make_opener()     # every example starts on a new location
        self.store = self.open_store()
        self.model = {}
        self.history = {}              # committed (ingested) epoch -> model at that epoch
        self.checkpointed = None       # (epoch, model) of the last checkpoint
        self.pending = []              # epochs ingested but not yet checkpointed
        self._new_table()

    def _new_table(self):
        self.table = StateTable(self.store, 5, flush_threshold=1 << 30, **self.args)
        self.table.init_epoch(new_epoch())

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()

    # --- writes -----------------------------------------------------------------------------

    def _row(self, pk, v, d):
        return (pk[0], pk[1], v, d)

    @rule(pk=PK, v=V, d=D)
    def insert(self, pk, v, d):
        row = self._row(pk, v, d)
        if pk in self.model:
            try:
                self.table.insert(row)
            except InconsistentOpError as exc:
                assert exc.pk == pk
                return
            raise AssertionError(f"insert of existing {pk} accepted")
        self.table.insert(row)
        self.model[pk] = row

    @rule(pk=PK, data=st.data())
    def delete(self, pk, data):
        if pk in self.model:
            self.table.delete(self.model.pop(pk))
            return
        try:
            self.table.delete(self._row(pk, data.draw(V), None))
        except InconsistentOpError as exc:
            assert exc.pk == pk
            return
        raise AssertionError(f"delete of missing {pk} accepted")

    @rule(pk=PK, v=V, d=D, wrong_old=st.booleans())
    def update(self, pk, v, d, wrong_old):
        if pk not in self.model:
            return
        old = self.model[pk]
        if wrong_old:
            bad = (old[0], old[1], old[2] + 100, old[3])
            try:
                self.table.update(bad, self._row(pk, v, d))
            except InconsistentOpError as exc:
                assert exc.pk == pk
                return
            raise AssertionError("update with a wrong old row accepted")
        self.table.update(old, self._row(pk, v, d))
        self.model[pk] = self._row(pk, v, d)

    @rule(pks=st.lists(PK, unique=True, max_size=6), data=st.data())
    def write_chunk(self, pks, data):
        ops, rows = [], []
        for pk in pks:
            if pk in self.model:
                old = self.model[pk]
                if data.draw(st.booleans()):
                    ops.append(OP_DELETE)
                    rows.append(old)
                    del self.model[pk]
                else:
                    new = self._row(pk, data.draw(V), data.draw(D))
                    ops += [OP_UPDATE_DELETE, OP_UPDATE_INSERT]
                    rows += [old, new]
                    self.model[pk] = new
            else:
                new = self._row(pk, data.draw(V), data.draw(D))
                ops.append(OP_INSERT)
                rows.append(new)
                self.model[pk] = new
        columns = [pa.array([r[i] for r in rows], t) for i, t in
                   enumerate([pa.int32(), pa.string(), pa.int64(), pa.float64()])]
        self.table.write_chunk(ops, columns)

    @rule()
    def try_flush(self):
        self.table.flush_threshold = 0
        assert self.table.try_flush()
        self.table.flush_threshold = 1 << 30

    @rule()
    def commit(self):
        epoch = self.table.epoch
        self.table.commit(new_epoch())
        self.history[epoch] = dict(self.model)
        self.pending.append(epoch)

    @precondition(lambda self: self.pending)
    @rule()
    def checkpoint(self):
        epoch = self.pending[-1]
        self.store.checkpoint(epoch)
        self.checkpointed = (epoch, self.history[epoch])
        self.pending = []

    @rule()
    def commit_and_checkpoint(self):
        self.commit()
        self.checkpoint()

    @rule()
    def reopen(self):
        self.store.close()
        self.store = self.open_store()
        if self.checkpointed is None:
            self.model, self.history = {}, {}
        else:
            epoch, snapshot = self.checkpointed
            self.model = dict(snapshot)
            self.history = {e: m for e, m in self.history.items() if e <= epoch}
        self.pending = []
        self._new_table()

    # --- reads ------------------------------------------------------------------------------

    @rule(pk=PK)
    def get_row(self, pk):
        assert self.table.get_row(pk) == self.model.get(pk)

    def _expected(self, rows, prefix, start, end, reverse):
        key = pk_sort_key(self.orders)
        ordered = sorted(rows, key=lambda r: key(r[:2]))
        if prefix:
            ordered = [r for r in ordered if r[0] == prefix[0]]
            if start is not None:
                ordered = [r for r in ordered if key((0, r[1])) >= key((0, start))]
            if end is not None:
                ordered = [r for r in ordered if key((0, r[1])) < key((0, end))]
        return ordered[::-1] if reverse else ordered

    @rule(prefix=st.one_of(st.just(()), G.map(lambda g: (g,))), start=st.one_of(st.none(), K),
          end=st.one_of(st.none(), K), reverse=st.booleans())
    def iterate(self, prefix, start, end, reverse):
        bounds = dict(start=(start,), end=(end,)) if prefix else {}
        if not prefix:
            start = end = None
        got = list(self.table.iter_with_prefix(prefix, reverse=reverse,
                                               start=bounds.get("start") if start is not None else None,
                                               end=bounds.get("end") if end is not None else None))
        assert got == self._expected(list(self.model.values()), prefix, start, end, reverse)

    @precondition(lambda self: self.checkpointed is not None)
    @rule(data=st.data(), reverse=st.booleans())
    def read_old_epoch(self, data, reverse):
        committed = self.store.max_committed_epoch
        epoch = data.draw(st.sampled_from(sorted(e for e in self.history if e <= committed)))
        reader = StorageTable(self.store, 5, **self.args)
        rows = [tuple(r.values()) for b in reader.batch_iter(epoch, batch_size=3, reverse=reverse)
                for r in b.to_pylist()]
        assert rows == self._expected(list(self.history[epoch].values()), (), None, None, reverse)
        pk = data.draw(PK)
        assert reader.get_row(pk, epoch) == self.history[epoch].get(pk)

    @invariant()
    def mem_table_is_sound(self):
        if hasattr(self, "table"):
            self.table.mem._check()


SETTINGS = settings(max_examples=40, stateful_step_count=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _run(make_opener, settings_=SETTINGS):
    machine = type("Machine", (StateTableMachine,), {"make_opener": staticmethod(make_opener)})
    run_state_machine_as_test(machine, settings=settings_)


def test_stateful_memory(tmp_path, request):
    _run(lambda: opener("memory", tmp_path, request))


def test_stateful_local(tmp_path, request):
    _run(lambda: opener("local", tmp_path, request))


def test_stateful_s3(tmp_path, request):
    _run(lambda: opener("s3", tmp_path, request), settings(SETTINGS, max_examples=6))
