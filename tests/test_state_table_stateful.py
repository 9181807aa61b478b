"""StateTable against a dict model (pk -> row) with a hypothesis state machine.

Rules: insert / delete / update (strict mode: valid ones succeed, invalid ones raise
InconsistentOpError and change nothing), write_chunk of mixed ops (a pk may repeat: insert, then
delete or update pairs of the chunk's own row), write_visible_chunk (mixed ops plus rows masked
out by a visibility mask that would be refused if they were applied: inconsistent, unknown ops,
other vnodes), write_refused_chunk (one visible row of a vnode not owned, an unknown op, or a
row contradicting the chunk's own earlier rows: the whole chunk is refused), try_flush (tiny threshold), update_watermark (several
per epoch, the highest wins; at the commit each owned vnode's store watermark rises to it, never
falls, and every row below its vnode's store watermark leaves the model as soon as it leaves the
MemTable: at that commit, at a later commit or flush), truncate (the whole table id is empty
from the current epoch on), commit, checkpoint, reopen (back to the last checkpoint, store
watermarks included), get_row, get_rows (many pks, repeats, absent ones), iterate: iter_with_prefix or
iter_batches with random prefix, bounds (inclusive or exclusive at either end, partial on the
first pk column), reverse, limit and batch size, compared with a Python sort of the model under
the table's ASC/DESC orders, write_while_iterating (a join's pattern: an open iterator, tuples
or Arrow batches, while chunks, updates of the rows it yielded, commits, flushes, a published
watermark, a truncation and a rescale change its range; it yields the rows as of its creation,
over the vnodes owned then), rescale (update_vnode_bitmap between epochs; reads then cover the new
vnodes, writes outside them raise VnodeNotOwnedError; reopen owns every vnode again), and
StorageTable reads at old committed epochs. Runs on memory, local and S3 stores (S3 with fewer
examples), in whichever mode (native / pure) the suite runs.

All or nothing (issue 10): a commit or try_flush whose ingest the store refuses changes nothing
(MemTable, watermark, epoch) and the retry commits the epoch; an update moving a row onto an
existing pk, a chunk with one inconsistent row anywhere, a row, pk or epoch of the wrong shape
all raise and leave the table exactly as it was.
"""

from itertools import islice

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from hummock import StoreClosedError
from hummock.errors import InvalidArgumentError
from hummock.key import new_epoch
from hummock.object_store.base import ObjectStoreError
from relational.errors import EpochError, InconsistentOpError, RowError, SchemaError, VnodeNotOwnedError
from relational.memcomparable import OrderType
from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT, StateTable
from relational.storage_table import StorageTable
from relational.types import DataType as T
from relational.vnode import Bitmap
from table_stores import opener
from test_state_table import pk_sort_key
from test_state_table_atomic import FaultyStore

SCHEMA = [("g", T.INT), ("k", T.VARCHAR), ("v", T.BIGINT), ("d", T.DOUBLE)]
G = st.one_of(st.none(), st.integers(-2, 2))
K = st.sampled_from(["", "a", "a\x00", "ab", "b"])
PK = st.tuples(G, K)
V = st.integers(-10, 10)
D = st.one_of(st.none(), st.sampled_from([0.5, -1.0]))
ORDERS = st.sampled_from([OrderType.ASC, OrderType.DESC, OrderType(False, True), OrderType(True, False)])
REFUSALS = st.sampled_from([lambda: InvalidArgumentError("injected: batch refused"),
                            lambda: StoreClosedError("injected: the store is closed"),
                            lambda: ObjectStoreError("injected: spill upload failed", path="sst/9.sst")])
COLUMN_TYPES = [pa.int32(), pa.string(), pa.int64(), pa.float64()]
BOUND = st.one_of(st.none(), K, st.integers(-2, 2))   # a str bounds k (after a prefix), an int g


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
        self.watermark = None          # pending watermark on the first pk column
        self.store_wm = {}             # vnode -> the store's watermark value (published)
        self.wm_history = {}           # committed (ingested) epoch -> store_wm at that epoch
        self.vnodes = Bitmap.full()    # what the table instance owns (rescale changes it)
        self._new_table()

    def _new_table(self):
        self.table = StateTable(self.store, 5, flush_threshold=1 << 30, vnodes=self.vnodes, **self.args)
        self.table.init_epoch(new_epoch())

    def _owns(self, pk) -> bool:
        return self.table.serde.vnode_of_pk(pk) in self.vnodes

    def _owned_model(self) -> dict:
        return {pk: r for pk, r in self.model.items() if self._owns(pk)}

    def _not_owned(self, call):
        """``call`` writes or reads outside the owned vnodes: it raises and changes nothing."""
        before = self._state()
        try:
            call()
        except VnodeNotOwnedError:
            pass
        else:
            raise AssertionError(f"access outside the owned vnodes {self.vnodes} accepted")
        assert self._state() == before

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()

    def _state(self):
        """What a refused operation must leave unchanged."""
        return self.table.epoch, dict(self.table.mem.records), self.table._watermark, self.table.vnodes

    # --- writes -----------------------------------------------------------------------------

    def _row(self, pk, v, d):
        return (pk[0], pk[1], v, d)

    @rule(pk=PK, v=V, d=D)
    def insert(self, pk, v, d):
        row = self._row(pk, v, d)
        if not self._owns(pk):
            return self._not_owned(lambda: self.table.insert(row))
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
        if not self._owns(pk):
            return self._not_owned(lambda: self.table.delete(self.model.get(pk) or self._row(pk, 0, None)))
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
        if not self._owns(pk):
            return self._not_owned(lambda: self.table.update(old, self._row(pk, v, d)))
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

    def _valid_chunk(self, pks, data, model):
        """Ops and rows of a consistent chunk over ``pks``, applied to ``model``."""
        ops, rows = [], []
        for pk in pks:   # in order: a repeated pk meets the row its earlier occurrence left
            if pk in model:
                old = model[pk]
                if data.draw(st.booleans()):
                    ops.append(OP_DELETE)
                    rows.append(old)
                    del model[pk]
                else:
                    new = self._row(pk, data.draw(V), data.draw(D))
                    ops += [OP_UPDATE_DELETE, OP_UPDATE_INSERT]
                    rows += [old, new]
                    model[pk] = new
            else:
                new = self._row(pk, data.draw(V), data.draw(D))
                ops.append(OP_INSERT)
                rows.append(new)
                model[pk] = new
        return ops, rows

    @staticmethod
    def _columns(rows):
        return [pa.array([r[i] for r in rows], t) for i, t in enumerate(COLUMN_TYPES)]

    @rule(pks=st.lists(PK, max_size=8), data=st.data())
    def write_chunk(self, pks, data):
        """A consistent chunk of mixed ops; a pk may come several times (insert, then delete or
        update pairs of the row the chunk itself wrote: an aggregation's pattern)."""
        pks = [pk for pk in pks if self._owns(pk)]
        event(f"chunk: {'repeated pks' if len(set(pks)) < len(pks) else 'distinct pks'}")
        ops, rows = self._valid_chunk(pks, data, self.model)
        self.table.write_chunk(ops, self._columns(rows))

    @rule(pks=st.lists(PK, unique=True, max_size=6), data=st.data())
    def write_visible_chunk(self, pks, data):
        """A consistent chunk (over owned pks) with invisible rows that would be refused if
        applied (an inconsistent row, an unknown op, a row of a vnode not owned); the mask
        comes as a list, a numpy array or an Arrow array."""
        ops, rows = self._valid_chunk([pk for pk in pks if self._owns(pk)], data, self.model)
        visible = [True] * len(ops)
        for _ in range(data.draw(st.integers(0, 3))):
            at = data.draw(st.integers(0, len(ops)))
            pk = data.draw(PK)
            op = data.draw(st.sampled_from([OP_INSERT, OP_DELETE, OP_UPDATE_DELETE, 9]))
            ops.insert(at, op)
            rows.insert(at, self._row(pk, 99, None))
            visible.insert(at, False)
        form = data.draw(st.sampled_from([list, np.array, pa.array]))
        event(f"visibility: {sum(visible)} of {len(visible)} rows visible")
        self.table.write_chunk(ops, self._columns(rows), visibility=form(visible))

    # --- invalid writes change nothing ------------------------------------------------------

    @rule(pks=st.lists(PK, unique=True, max_size=6), bad_pk=PK, inserts_only=st.booleans(), data=st.data())
    def write_inconsistent_chunk(self, pks, bad_pk, inserts_only, data):
        """A consistent chunk with one inconsistent row at a random position: nothing applied.
        ``inserts_only``: new pks and an insert of an existing one (the batched path)."""
        owned = self._owned_model()
        if inserts_only and owned:
            bad_pk = data.draw(st.sampled_from(sorted(owned, key=repr)))
            pks = [pk for pk in pks if pk not in self.model]
        pks = [pk for pk in pks if self._owns(pk)]
        if bad_pk in pks or not self._owns(bad_pk):
            return
        ops, rows = self._valid_chunk(pks, data, dict(self.model))
        if bad_pk in self.model:
            old = self.model[bad_pk]
            wrong = (old[0], old[1], old[2] + 100, old[3])
            choices = [(OP_INSERT, self._row(bad_pk, 0, None))]
            if not inserts_only:
                choices += [(OP_DELETE, wrong), (OP_UPDATE_DELETE, wrong)]
            op, row = data.draw(st.sampled_from(choices))
        else:
            op, row = data.draw(st.sampled_from([OP_DELETE, OP_UPDATE_DELETE])), self._row(bad_pk, 0, None)
        at = data.draw(st.integers(0, len(ops)))
        ops.insert(at, op)
        rows.insert(at, row)
        event("inconsistent chunk: " + ("all inserts" if set(ops) == {OP_INSERT} else "mixed ops"))
        before = self._state()
        try:
            self.table.write_chunk(ops, self._columns(rows))
        except InconsistentOpError as exc:
            assert exc.pk == bad_pk
        else:
            raise AssertionError(f"an inconsistent row for {bad_pk} at {at} was accepted")
        assert self._state() == before

    @rule(pks=st.lists(PK, min_size=1, max_size=6), kind=st.sampled_from(["not owned", "unknown op", "against itself"]),
          masked=st.booleans(), data=st.data())
    def write_refused_chunk(self, pks, kind, masked, data):
        """A consistent chunk (pks may repeat) plus one visible row that dooms it: a row of a
        vnode this instance does not own (VnodeNotOwnedError), an unknown op (SchemaError), or
        a row that contradicts the chunk's own earlier rows (InconsistentOpError: an insert of
        a pk the chunk inserted, a delete of one it deleted, an old row it did not write).
        Nothing is applied, with or without a visibility mask hiding other rows."""
        model = dict(self.model)
        ops, rows = self._valid_chunk([pk for pk in pks if self._owns(pk)], data, model)
        touched = sorted({r[:2] for r in rows}, key=repr)
        if kind == "not owned":
            foreign = [pk for pk in map(tuple, data.draw(st.lists(PK, min_size=1, max_size=4))) if not self._owns(pk)]
            if not foreign:
                return
            at, op, row, error = data.draw(st.integers(0, len(ops))), OP_INSERT, self._row(foreign[0], 0, None), \
                VnodeNotOwnedError
        elif kind == "unknown op":
            at, op, row, error = data.draw(st.integers(0, len(ops))), data.draw(st.sampled_from([0, 5, 9])), \
                self._row(data.draw(PK), 0, None), SchemaError
            if not self._owns(row[:2]):
                return
        else:
            if not touched:
                return
            pk = data.draw(st.sampled_from(touched))
            if pk in model:
                old = model[pk]
                op, row = data.draw(st.sampled_from([(OP_INSERT, self._row(pk, 0, None)),
                                                     (OP_DELETE, (old[0], old[1], old[2] + 100, old[3])),
                                                     (OP_UPDATE_DELETE, (old[0], old[1], old[2] + 100, old[3]))]))
            else:
                op, row = data.draw(st.sampled_from([OP_DELETE, OP_UPDATE_DELETE])), self._row(pk, 0, None)
            at, error = len(ops), InconsistentOpError   # after the rows it contradicts
        ops.insert(at, op)
        rows.insert(at, row)
        visibility = None
        if masked:   # hide some other rows (not the doomed one, nor the rows it contradicts)
            visibility = [i == at or error is InconsistentOpError or data.draw(st.booleans())
                          for i in range(len(ops))]
        event(f"refused chunk: {kind}")
        before = self._state()
        try:
            self.table.write_chunk(ops, self._columns(rows), visibility=visibility)
        except error as exc:
            if error is InconsistentOpError:
                assert exc.pk == row[:2]
        else:
            raise AssertionError(f"a chunk with a {kind} row at {at} was accepted")
        assert self._state() == before
        pks = [pk for pk in touched if self._owns(pk)]
        assert self.table.get_rows(pks) == [self.model.get(pk) for pk in pks]

    @precondition(lambda self: len(self.model) >= 2)
    @rule(data=st.data(), v=V)
    def update_onto_an_existing_pk(self, data, v):
        owned = self._owned_model()
        if len(owned) < 2:
            return
        src, dst = data.draw(st.lists(st.sampled_from(sorted(owned, key=repr)), min_size=2, max_size=2,
                                      unique=True))
        before = self._state()
        try:
            self.table.update(self.model[src], self._row(dst, v, None))
        except InconsistentOpError as exc:
            assert exc.pk == dst
        else:
            raise AssertionError(f"update of {src} onto the existing {dst} accepted")
        assert self._state() == before
        assert self.table.get_row(src) == self.model[src] and self.table.get_row(dst) == self.model[dst]

    @rule(call=st.sampled_from(["insert", "delete", "get_row", "prefix", "commit", "commit_spill"]))
    def bad_argument(self, call):
        before = self._state()
        expected = EpochError if call.startswith("commit") else RowError
        try:
            {"insert": lambda: self.table.insert(7), "delete": lambda: self.table.delete(None),
             "get_row": lambda: self.table.get_row(1), "prefix": lambda: self.table.iter_with_prefix(1),
             "commit": lambda: self.table.commit(None),
             "commit_spill": lambda: self.table.commit(new_epoch() + 1)}[call]()
        except expected:
            pass
        else:
            raise AssertionError(f"{call} with a bad argument accepted")
        assert self._state() == before

    @rule()
    def try_flush(self):
        self.table.flush_threshold = 0
        assert self.table.try_flush()
        self.table.flush_threshold = 1 << 30
        self._hide_below_store_watermarks()

    @rule(w=st.integers(-2, 3))
    def update_watermark(self, w):
        self.table.update_watermark(w)
        self.watermark = w if self.watermark is None else max(self.watermark, w)

    @rule(refusal=REFUSALS, refused=st.booleans())
    def truncate(self, refusal, refused):
        """The whole table id (every vnode) is empty from this epoch on; a refused call (the
        store closed or read-only) changes nothing."""
        if refused:
            proxy = FaultyStore(self.store)
            exc = refusal()
            proxy.truncate_table = lambda *args: (_ for _ in ()).throw(exc)
            before = self._state()
            self.table.store = proxy
            try:
                self.table.truncate()
            except type(exc):
                assert self._state() == before
                return
            finally:
                self.table.store = self.store
            raise AssertionError("a refused truncate returned")
        self.table.truncate()
        self.model = {}

    @rule()
    def commit(self):
        epoch = self.table.epoch
        self.table.commit(new_epoch())
        self._committed(epoch)

    def _hide_below_store_watermarks(self):
        """Rows that left the MemTable below their vnode's store watermark are hidden (NULLs never)."""
        vnode_of = self.table.serde.vnode_of_pk
        self.model = {pk: r for pk, r in self.model.items()
                      if pk[0] is None or pk[0] >= self.store_wm.get(vnode_of(pk), pk[0])}

    def _committed(self, epoch):
        if self.watermark is not None:   # published for the owned vnodes; it never falls
            for vnode in self.vnodes:
                self.store_wm[vnode] = max(self.store_wm.get(vnode, self.watermark), self.watermark)
            self.watermark = None
        self._hide_below_store_watermarks()
        self.history[epoch] = dict(self.model)
        self.wm_history[epoch] = dict(self.store_wm)
        self.pending.append(epoch)

    def _refused(self, refusal, call):
        """Run ``call`` with the next ingest refused; True if it raised (and changed nothing)."""
        proxy = FaultyStore(self.store)
        exc = refusal()
        proxy.refuse_ingest(exc)
        before = self._state()
        self.table.store = proxy
        try:
            call()
        except type(exc) as raised:
            assert raised is exc and proxy.ingest_calls == 1
            assert self._state() == before
            return True
        finally:
            self.table.store = self.store
        assert proxy.ingest_calls == 0     # nothing to write, so nothing to refuse
        return False

    @rule(refusal=REFUSALS)
    def refused_commit_then_retry(self, refusal):
        epoch = self.table.epoch
        refused = self._refused(refusal, lambda: self.table.commit(new_epoch()))
        event(f"commit with a refusal: {'refused, retried' if refused else 'nothing to write'}")
        if refused:
            for pk in list(self._owned_model())[:3]:   # the epoch's rows are still readable
                assert self.table.get_row(pk) == self.model[pk]
            self.commit()                            # the retry
        else:
            self._committed(epoch)

    @rule(refusal=REFUSALS)
    def refused_flush(self, refusal):
        self.table.flush_threshold = 0
        try:
            if not self._refused(refusal, self.table.try_flush):
                self._hide_below_store_watermarks()
        finally:
            self.table.flush_threshold = 1 << 30

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
            self.model, self.history, self.store_wm = {}, {}, {}
        else:
            epoch, snapshot = self.checkpointed
            self.model = dict(snapshot)
            self.history = {e: m for e, m in self.history.items() if e <= epoch}
            self.store_wm = dict(self.wm_history[epoch])
        self.pending = []
        self.watermark = None
        self.vnodes = Bitmap.full()    # a recovered instance owns every vnode again
        self._new_table()

    # --- reads ------------------------------------------------------------------------------

    @rule(pk=PK)
    def get_row(self, pk):
        if not self._owns(pk):
            return self._not_owned(lambda: self.table.get_row(pk))
        assert self.table.get_row(pk) == self.model.get(pk)

    @rule(pks=st.lists(PK, max_size=8), owned_only=st.booleans())
    def get_rows(self, pks, owned_only):
        if owned_only:
            pks = [pk for pk in pks if self._owns(pk)]
        if not all(map(self._owns, pks)):
            return self._not_owned(lambda: self.table.get_rows(pks))
        assert self.table.get_rows(pks) == [self.model.get(pk) for pk in pks]

    def _expected(self, rows, prefix, start, end, reverse, start_inclusive=True, end_inclusive=False, limit=None,
                  every_vnode=False):
        """The model's rows (of the owned vnodes, or ``every_vnode``) with ``prefix`` between
        the bounds (tuples over the pk columns after the prefix, compared as prefixes), in pk
        order, reversed, limited."""
        key = pk_sort_key(self.orders)
        ordered = sorted((r for r in rows if every_vnode or self._owns(r[:2])), key=lambda r: key(r[:2]))
        n = len(prefix)
        ordered = [r for r in ordered if r[:n] == tuple(prefix)]
        rest = pk_sort_key(self.orders[n:])
        if start is not None:
            lo = rest(start)
            ordered = [r for r in ordered if (rest(r[n:n + len(start)]) >= lo if start_inclusive
                                              else rest(r[n:n + len(start)]) > lo)]
        if end is not None:
            hi = rest(end)
            ordered = [r for r in ordered if (rest(r[n:n + len(end)]) <= hi if end_inclusive
                                              else rest(r[n:n + len(end)]) < hi)]
        if reverse:
            ordered = ordered[::-1]
        return ordered if limit is None else ordered[:limit]

    def _pinned_elsewhere(self, prefix) -> bool:
        """True when every row with ``prefix`` is in one vnode this instance does not own."""
        if self.args["dist_key_indices"] is None:
            return 0 not in self.vnodes
        return bool(prefix) and not self._owns((prefix[0], ""))

    @rule(prefix=st.one_of(st.just(()), G.map(lambda g: (g,))), start=BOUND, end=BOUND, reverse=st.booleans(),
          start_inclusive=st.booleans(), end_inclusive=st.booleans(), limit=st.one_of(st.none(), st.integers(0, 3)),
          batch_size=st.sampled_from([None, None, 1, 3]))
    def iterate(self, prefix, start, end, reverse, start_inclusive=True, end_inclusive=False, limit=None,
                batch_size=None):
        """iter_with_prefix (or iter_batches with ``batch_size``): a str bound bounds k after a
        (g,) prefix, an int bound bounds g without a prefix (a partial bound); others are
        dropped."""
        def bound(b):
            if b is None or isinstance(b, str) != bool(prefix):
                return None
            return (b,)
        start, end = bound(start), bound(end)
        kwargs = dict(start=start, end=end, start_inclusive=start_inclusive, end_inclusive=end_inclusive,
                      reverse=reverse, limit=limit)
        if self._pinned_elsewhere(prefix):
            return self._not_owned(lambda: self.table.iter_with_prefix(prefix, **kwargs))
        if batch_size is None:
            got = list(self.table.iter_with_prefix(prefix, **kwargs))
        else:
            batches = list(self.table.iter_batches(prefix, batch_size=batch_size, **kwargs))
            assert all(0 < b.num_rows <= batch_size for b in batches)
            assert all(b.schema.names == ["g", "k", "v", "d"] for b in batches)
            got = [tuple(r.values()) for b in batches for r in b.to_pylist()]
        assert got == self._expected(list(self.model.values()), prefix, start, end, reverse, start_inclusive,
                                     end_inclusive, limit)

    @rule(prefix=st.one_of(st.just(()), G.map(lambda g: (g,))), reverse=st.booleans(),
          batch_size=st.sampled_from([None, None, 1, 2]), data=st.data())
    def write_while_iterating(self, prefix, reverse, batch_size, data):
        """A join's pattern: an iterator is open while its range changes (chunks, updates of
        the rows it already yielded, new rows, commits, flushes, a watermark published, a
        truncation, a rescale); it yields the rows as of its creation (over the vnodes owned
        then), and afterwards a new read sees every change. ``batch_size``: the same through
        iter_batches."""
        if self._pinned_elsewhere(prefix):
            return
        # this epoch's writes in the range first, so that the iterator has MemTable records left
        pks = [pk for pk in data.draw(st.lists(PK, max_size=12)) if self._owns(pk)]
        ops, rows = self._valid_chunk(pks, data, self.model)
        self.table.write_chunk(ops, self._columns(rows))
        expected = self._expected(list(self.model.values()), prefix, None, None, reverse)
        if batch_size is None:
            it = self.table.iter_with_prefix(prefix, reverse=reverse)
        else:   # (the first iterable of a generator expression is evaluated now)
            it = (tuple(r.values()) for b in self.table.iter_batches(prefix, reverse=reverse, batch_size=batch_size)
                  for r in b.to_pylist())
        got = []
        for _ in range(data.draw(st.integers(1, 4))):
            got += islice(it, data.draw(st.integers(0, 3)))
            action = data.draw(st.sampled_from(["chunk", "degrees", "commit", "flush", "watermark", "truncate",
                                                "rescale"]))
            event(f"write while iterating: {action}")
            if action == "chunk":
                pks = [pk for pk in data.draw(st.lists(PK, max_size=6)) if self._owns(pk)]
                ops, rows = self._valid_chunk(pks, data, self.model)
                self.table.write_chunk(ops, self._columns(rows))
            elif action == "degrees":    # update the rows found so far; insert one next to them
                for row in got:
                    pk = row[:2]
                    if pk in self.model and self._owns(pk):
                        old = self.model[pk]
                        new = (old[0], old[1], old[2] + 1, old[3])
                        self.table.update(old, new)
                        self.model[pk] = new
                pk = (prefix[0] if prefix else data.draw(G), data.draw(K))
                if pk not in self.model and self._owns(pk):
                    self.table.insert(self._row(pk, 0, None))
                    self.model[pk] = self._row(pk, 0, None)
            elif action == "commit":
                self.commit()
            elif action == "flush":
                self.try_flush()
            elif action == "watermark":   # published by the commit: hides rows the iterator still yields
                self.update_watermark(w=data.draw(st.integers(-2, 3)))   # (keywords: subclasses wrap rules)
                self.commit()
            elif action == "truncate":
                self.table.truncate()
                self.model = {}
            else:
                self.rescale(data=data)
        got += list(it)
        assert got == expected
        if not self._pinned_elsewhere(prefix):
            assert list(self.table.iter_with_prefix(prefix, reverse=reverse)) == self._expected(
                list(self.model.values()), prefix, None, None, reverse)

    @rule(data=st.data())
    def rescale(self, data):
        """update_vnode_bitmap between epochs: refused (changing nothing) with uncommitted
        writes; after a commit it returns the old set and reads cover the new one."""
        if self.table.mem:
            before = self._state()
            try:
                self.table.update_vnode_bitmap(Bitmap.full())
            except SchemaError:
                pass
            else:
                raise AssertionError("update_vnode_bitmap with uncommitted writes accepted")
            assert self._state() == before
            self.commit()
        choices = [Bitmap.full(), Bitmap.from_range(0, 128), Bitmap.from_range(128, 256), Bitmap([0]),
                   Bitmap(range(1, 256))]
        if self.model:
            v = self.table.serde.vnode_of_pk(data.draw(st.sampled_from(sorted(self.model, key=repr))))
            choices += [Bitmap([v]), Bitmap(x for x in range(256) if x != v)]
        new = data.draw(st.sampled_from(choices))
        assert self.table.update_vnode_bitmap(new) == self.vnodes
        self.vnodes = new
        event(f"rescale to {len(new)} vnodes")
        pks = sorted(self._owned_model(), key=repr)
        assert self.table.get_rows(pks) == [self.model[pk] for pk in pks]

    @precondition(lambda self: self.checkpointed is not None)
    @rule(data=st.data(), reverse=st.booleans())
    def read_old_epoch(self, data, reverse):
        committed = self.store.max_committed_epoch
        readable = sorted(e for e in self.history if self.store.min_readable_epoch <= e <= committed)
        if not readable:   # removing a truncated table's SSTs raised min_readable_epoch past them
            return
        epoch = data.draw(st.sampled_from(readable))
        reader = StorageTable(self.store, 5, **self.args)
        rows = [tuple(r.values()) for b in reader.batch_iter(epoch, batch_size=3, reverse=reverse)
                for r in b.to_pylist()]
        assert rows == self._expected(list(self.history[epoch].values()), (), None, None, reverse, every_vnode=True)
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
