"""StorageTable (relational/storage_table.py): Arrow batches at committed epochs, pinned snapshots.

Random schemas over every type are written through a StateTable and read back as record
batches equal (as encoded bytes) to the rows in pk order; old epochs stay readable while a
batch iteration holds its snapshot, across compaction; column selection, prefixes, reverse.
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hummock.errors import InvalidArgumentError
from hummock.key import new_epoch
from relational.arrow import to_arrow, to_pylist
from relational.catalog import TableDesc
from relational.errors import EpochError, RowError, SchemaError, ValueOutOfRangeError
from relational.memcomparable import OrderType
from relational.state_table import StateTable
from relational.storage_table import StorageTable
from relational.types import DataType as T
from strategies import data_types, rows
from table_stores import OPTIONS, opener


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    s = opener(request.param, tmp_path, request)()
    yield s
    s.close()


SCHEMA = [("id", T.BIGINT), ("g", T.INT), ("s", T.VARCHAR)]


def _filled(store, n=100, dist=(0,)):
    t = StateTable(store, 3, SCHEMA, [1, 0], dist_key_indices=list(dist) if dist else None)
    e1 = new_epoch()
    t.init_epoch(e1)
    for i in range(n):
        t.insert((i, i % 5, f"s{i}"))
    t.commit(new_epoch())
    store.checkpoint(e1)
    return t, e1


def _rows(batches):
    return [tuple(r.values()) for b in batches for r in b.to_pylist()]


@pytest.mark.parametrize("dist", [(), (0,)])
def test_batches_in_pk_order_with_columns_and_prefix(store, dist):
    t, e1 = _filled(store, dist=dist)
    st_ = StorageTable(store, 3, SCHEMA, [1, 0], dist_key_indices=list(dist) if dist else None)
    batches = list(st_.batch_iter(e1, batch_size=7))
    assert all(isinstance(b, pa.RecordBatch) and b.num_rows <= 7 for b in batches)
    assert batches[0].schema == pa.schema([("id", pa.int64()), ("g", pa.int32()), ("s", pa.string())])
    expected = sorted(((i, i % 5, f"s{i}") for i in range(100)), key=lambda r: (r[1], r[0]))
    assert _rows(batches) == expected
    assert _rows(st_.batch_iter(e1, reverse=True)) == expected[::-1]
    assert _rows(st_.batch_iter(e1, pk_prefix=(2,), columns=["s", 0])) == [(r[2], r[0]) for r in expected if r[1] == 2]
    assert _rows(st_.batch_iter(e1, start=(3,), end=(4,), columns=[2])) == [(r[2],) for r in expected if r[1] == 3]
    assert st_.get_row((4, 9), e1) == (9, 4, "s9") and st_.get_row((4, 8), e1) is None
    with pytest.raises(SchemaError):
        st_.batch_iter(e1, columns=["nope"])
    with pytest.raises(SchemaError):
        st_.batch_iter(e1, batch_size=0)


def test_epoch_above_committed_is_refused(store):
    t, e1 = _filled(store, 3)
    st_ = StorageTable(store, 3, SCHEMA, [1, 0], dist_key_indices=[0])
    with pytest.raises(InvalidArgumentError):
        st_.batch_iter(e1 + (1 << 40))
    with pytest.raises(InvalidArgumentError):
        st_.get_row((0, 0), e1 + (1 << 40))


def test_the_epoch_is_required_and_arguments_are_checked(store):
    """get_row and batch_iter refuse a missing or non-int epoch the same way (EpochError, an
    InvalidArgumentError), at the call; a bad batch size or pk is a SchemaError/RowError."""
    t, e1 = _filled(store, 3)
    st_ = StorageTable(store, 3, SCHEMA, [1, 0], dist_key_indices=[0])
    for bad in (None, "1", 1.5, True):
        for call in (lambda: st_.get_row((0, 0), bad), lambda: st_.batch_iter(bad)):
            with pytest.raises(EpochError, match="committed epoch") as info:
                call()
            assert isinstance(info.value, InvalidArgumentError) and info.value.epoch is bad
            assert info.value.current == store.max_committed_epoch
    with pytest.raises(EpochError, match="max_committed_epoch"):
        st_.get_row((0, 0), -1)
    for bad in (0, -3, "8", 2.0, None, True):
        with pytest.raises(SchemaError, match="batch_size must be an int >= 1"):
            st_.batch_iter(e1, batch_size=bad)
    with pytest.raises(RowError):
        st_.get_row(0, e1)
    with pytest.raises(RowError):
        st_.batch_iter(e1, pk_prefix=2)
    with pytest.raises(SchemaError, match="pk_indices is required"):
        StorageTable(store, 3, SCHEMA, None)
    with pytest.raises(SchemaError, match="vnodes must be a Bitmap"):
        StorageTable(store, 3, SCHEMA, [1, 0], vnodes=[1, 2])
    assert st_.get_row((0, 0), e1) == (0, 0, "s0") and st_.get_row([1, 1], e1) == (1, 1, "s1")
    assert _rows(st_.batch_iter(e1, batch_size=np.int64(2))) == [(0, 0, "s0"), (1, 1, "s1"), (2, 2, "s2")]


def test_old_epochs_and_a_pinned_snapshot_across_compaction(tmp_path, request):
    store = opener("local", tmp_path, request, OPTIONS.replace(compactor="local"))()
    try:
        t, e1 = _filled(store, 200)
        st_ = StorageTable(store, 3, SCHEMA, [1, 0], dist_key_indices=[0])
        it = st_.batch_iter(e1, batch_size=10)
        first = next(it)
        assert store.stats()["pinned_versions"]
        for round_ in range(4):        # delete everything, rewrite, compact: e1 must not move
            e = t.epoch
            for r in list(t.iter_with_prefix()):
                t.delete(r)
            for i in range(200):
                t.insert((i, i % 5, f"round{round_}"))
            t.commit(new_epoch())
            store.checkpoint(e)
            store.compact_all()
        rest = _rows(it)
        assert _rows([first]) + rest == sorted(((i, i % 5, f"s{i}") for i in range(200)), key=lambda r: (r[1], r[0]))
        assert not store.stats()["pinned_versions"] or all(
            v == 0 for v in store.stats()["pinned_versions"].values())
        latest = store.max_committed_epoch
        assert {r[2] for r in _rows(st_.batch_iter(latest))} == {"round3"}
    finally:
        store.close()


@st.composite
def typed_tables(draw):
    types = draw(st.lists(data_types(max_depth=1), min_size=1, max_size=4))
    n = len(types)
    pk = draw(st.lists(st.integers(0, n - 1), unique=True, min_size=1, max_size=min(n, 2)))
    orders = [draw(st.sampled_from([OrderType.ASC, OrderType.DESC])) for _ in pk]
    dist = draw(st.sampled_from([[], pk[:1]]))
    value = draw(st.sampled_from([None, [i for i in range(n) if i not in pk]]))
    data = draw(st.lists(rows(types), max_size=12))
    return types, pk, orders, dist, value, data


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=typed_tables())
def test_random_schemas_round_trip_through_arrow(store, case):
    types, pk, orders, dist, value, data = case
    try:
        for i, t in enumerate(types):
            to_arrow([r[i] for r in data], t)
    except ValueOutOfRangeError:
        assume(False)
    schema = [(f"c{i}", t) for i, t in enumerate(types)]
    desc = TableDesc(11, "random", schema, pk, orders, dist, value)
    table = StateTable.from_desc(store, desc, consistent=False)
    table.init_epoch(new_epoch())
    live = {}
    for r in data:
        key = table.serde.key_of_pk(table.serde.pk_of(r))
        table.insert(r)
        live[key] = r
    e = table.epoch
    table.commit(new_epoch())
    store.checkpoint(e)
    reader = StorageTable.from_desc(store, desc)
    got = [row for b in reader.batch_iter(e, batch_size=5)
           for row in zip(*[to_pylist(b.column(i), t) for i, t in enumerate(types)])]
    expected = [live[k] for k in sorted(live, key=lambda k: k[2:])]
    serde = table.serde
    assert [serde.encode(r) for r in got] == [serde.encode(r) for r in expected]
    for k, r in list(live.items())[:3]:
        assert serde.encode(reader.get_row(serde.pk_of(r), e)) == serde.encode(r)
    # clean up for the next example
    for r in live.values():
        table.delete(r)
    e = table.epoch
    table.commit(new_epoch())
    store.checkpoint(e)


def test_intervals_convert_to_arrow_up_to_the_exact_nanosecond_limit():
    """An INTERVAL's microseconds become Arrow nanoseconds: ±(2**63 // 1000) microseconds still
    fit an int64 of nanoseconds and convert; one more is refused with a typed error."""
    import pytest as _pytest
    from relational.arrow import to_arrow
    from relational.errors import ValueOutOfRangeError
    from relational.types import DataType, Interval
    limit = (1 << 63) // 1000
    got = to_arrow([Interval(0, 0, limit), Interval(0, 0, -limit)], DataType.INTERVAL).to_pylist()
    assert [v.nanoseconds for v in got] == [limit * 1000, -limit * 1000]
    for usecs in (limit + 1, -limit - 1):
        with _pytest.raises(ValueOutOfRangeError):
            to_arrow([Interval(0, 0, usecs)], DataType.INTERVAL)


SIMPLE = [T.BOOLEAN, T.SMALLINT, T.INT, T.BIGINT, T.REAL, T.DOUBLE, T.VARCHAR, T.BYTEA, T.DATE, T.TIME,
          T.TIMESTAMP, T.TIMESTAMPTZ]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_column_path_batches_equal_the_row_path(data):
    """Tables whose read columns are simple take relational/scan_columns.py; the batches equal,
    value for value, those the row path builds from the decoded rows (and a DECIMAL or INTERVAL
    column beside them is stepped over)."""
    import math
    import uuid

    from hummock import HummockStorage
    from relational.scan_columns import ColumnScan
    from relational.table_iter import decoded_rows, record_batches

    types = data.draw(st.lists(st.sampled_from(SIMPLE), min_size=1, max_size=5), label="types")
    types = [T.BIGINT] + types + data.draw(st.lists(st.sampled_from([T.DECIMAL, T.INTERVAL]), max_size=1))
    schema = [(f"c{i}", t) for i, t in enumerate(types)]
    readable = [i for i, t in enumerate(types) if t not in (T.DECIMAL, T.INTERVAL)]
    columns = data.draw(st.permutations(readable), label="columns")[:data.draw(st.integers(1, len(readable)))]
    values = data.draw(st.lists(rows(types[1:]), max_size=40), label="rows")
    batch_size = data.draw(st.integers(1, 16), label="batch_size")
    store = HummockStorage.open(f"memory://column-path-{uuid.uuid4().hex[:8]}", OPTIONS)
    try:
        t = StateTable(store, 3, schema, [0], dist_key_indices=[0])
        e1 = new_epoch()
        t.init_epoch(e1)
        for i, r in enumerate(values):
            t.insert((i,) + tuple(r))
        t.commit(new_epoch())
        store.checkpoint(e1)
        reader = StorageTable(store, 3, schema, [0], dist_key_indices=[0])
        assert ColumnScan.of(reader.serde, columns) is not None     # the column path is the one taken
        got = list(reader.batch_iter(e1, columns=columns, batch_size=batch_size))
        arrow_schema = reader.arrow_schema(columns)
        with store.snapshot(e1) as snap:
            pairs = sorted(snap.iter(3), key=lambda kv: reader.serde.decode_pk(kv[0]))
        expected = list(record_batches(decoded_rows(reader.serde, pairs), columns, reader.serde.types, arrow_schema,
                                       batch_size))
        assert [b.num_rows for b in got] == [b.num_rows for b in expected]

        def norm(v):
            return "nan" if isinstance(v, float) and math.isnan(v) else v
        for g, e in zip(got, expected):
            assert g.schema == e.schema
            for name in g.schema.names:
                assert [norm(v) for v in g.column(name).to_pylist()] == [norm(v) for v in e.column(name).to_pylist()]
    finally:
        store.close()


@pytest.mark.parametrize("dist", [(), (0,)])
@pytest.mark.parametrize("compact", [False, True])
def test_a_read_split_into_parts_equals_the_whole_scan(store, dist, compact):
    """``read_split`` cuts the key range where the stored bytes split (block first keys) and
    decodes the parts in threads: the batches hold the rows of ``batch_iter``, in pk order,
    with every column choice; a table spread over vnodes (rows interleaved in pk order), a row
    path column or one worker reads whole."""
    t = StateTable(store, 3, SCHEMA, [1, 0], dist_key_indices=list(dist) if dist else None)
    epoch = new_epoch()
    t.init_epoch(epoch)
    model = {}
    for round_ in range(3):   # overwrites and deletes over three checkpoints: versions across SSTs
        for i in range(round_, 3000, 1 + round_):
            row = (i, i % 5, f"r{round_}-{i}" * (1 + i % 3))
            if i in model and round_ == 2 and i % 7 == 0:
                t.delete(model.pop(i))
            elif i in model:
                t.update(model[i], row)
                model[i] = row
            else:
                t.insert(row)
                model[i] = row
        nxt = new_epoch()
        t.commit(nxt)
        store.checkpoint(epoch)
        epoch = nxt
    read_at = store.max_committed_epoch
    if compact and hasattr(store, "compact_all"):
        store.compact_all()
    reader = StorageTable(store, 3, SCHEMA, [1, 0], dist_key_indices=list(dist) if dist else None)
    with store.snapshot(read_at) as snap:
        cuts = snap.split_keys(3, 4, min_bytes=1)
    assert cuts == sorted(set(cuts)) and len(cuts) == 3   # four parts: the split is exercised
    for columns in (None, ["s", "id"], [], ["g"]):
        whole = _rows(reader.batch_iter(read_at, columns=columns, batch_size=500))
        for workers in (1, 2, 4):
            got = reader.read_split(read_at, columns=columns, workers=workers, batch_size=500, min_part_bytes=1)
            assert all(b.num_rows <= 500 for b in got)
            assert sum(b.num_rows for b in got) == len(whole) > 0
            if columns != []:
                assert _rows(got) == whole


def test_read_split_applies_each_in_the_callers_context(store):
    """``each`` runs on every batch where it is decoded, under a copy of the caller's
    ``contextvars`` context (expression evaluation reads its error mode from one), and its
    results come back in key order; its exception propagates."""
    import contextvars
    mode = contextvars.ContextVar("mode", default="unset")
    t, e1 = _filled(store, n=3000, dist=())
    reader = StorageTable(store, 3, SCHEMA, [1, 0])
    whole = _rows(reader.batch_iter(e1, batch_size=100))
    token = mode.set("caller's")
    try:
        got = reader.read_split(e1, workers=2, batch_size=100, min_part_bytes=1,
                                each=lambda b: (mode.get(), _rows([b])))
    finally:
        mode.reset(token)
    assert {m for m, _ in got} == {"caller's"}
    assert [r for _, rows in got for r in rows] == whole

    def fail(b):
        raise ValueError("from each")
    with pytest.raises(ValueError, match="from each"):
        reader.read_split(e1, workers=2, batch_size=100, min_part_bytes=1, each=fail)


def test_read_split_releases_its_snapshot_only_after_every_part_stopped(store, monkeypatch):
    """When one part fails, ``read_split`` raises only once the other parts have stopped: none
    reads on from the snapshot after it was released (nor runs on, unseen, after the call)."""
    import threading
    t, e1 = _filled(store, n=3000, dist=())
    reader = StorageTable(store, 3, SCHEMA, [1, 0])
    first = _rows(reader.batch_iter(e1, batch_size=1))[0]
    released, other_started, late = threading.Event(), threading.Event(), []
    real = store.snapshot

    class Snap:   # the store's snapshot, telling when it is released
        def __init__(self, snap):
            self.snap = snap

        def __getattr__(self, name):
            return getattr(self.snap, name)

        def release(self):
            released.set()
            self.snap.release()
    monkeypatch.setattr(store, "snapshot", lambda epoch: Snap(real(epoch)))

    def each(b):
        if _rows([b])[0] == first:   # the first part fails once the other one runs
            other_started.wait(5)
            raise ValueError("part 0")
        if other_started.is_set():   # (the old code released the snapshot meanwhile)
            released.wait(0.25)
        other_started.set()
        late.append(released.is_set())
        return b
    with pytest.raises(ValueError, match="part 0"):
        reader.read_split(e1, workers=2, batch_size=20, min_part_bytes=1, each=each)
    from relational.parallel import pool, usable_cores
    gate = threading.Barrier(usable_cores(), timeout=10)   # passed once every worker is free
    for f in [pool().submit(gate.wait) for _ in range(usable_cores())]:
        f.result()
    assert released.is_set() and late and not any(late)
