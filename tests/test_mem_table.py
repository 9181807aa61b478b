"""MemTable (relational/mem_table.py) against a dict model, in strict and relaxed mode.

A small harness plays the state table's part: it checks "storage" (a dict ``base``) for keys
the MemTable has no record of, as StateTable does. After any sequence of operations, applying
``drain()`` to ``base`` must give the model; in strict mode every record's old row is the
stored row and a cancelled insert leaves no tombstone; ordered range reads (interleaved with
writes) equal a sort of the live records; ``_check()`` holds after every step.
"""

from itertools import islice

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relational.errors import InconsistentOpError
from relational.mem_table import DELETE, INSERT, RECORD_OVERHEAD, UPDATE, MemTable

ALL_KEYS = [b"", b"a", b"a\x00", b"ab", b"b", b"c"]
KEYS = st.sampled_from(ALL_KEYS)
VALS = st.sampled_from([b"1", b"2", b"3"])
OPS = st.lists(st.one_of(
    st.tuples(st.just("insert"), KEYS, VALS),
    st.tuples(st.just("delete"), KEYS, VALS),
    st.tuples(st.just("update"), KEYS, VALS, VALS),
    st.tuples(st.just("range"), st.one_of(st.none(), KEYS), st.one_of(st.none(), KEYS), st.booleans()),
    st.tuples(st.just("insert_many"), st.lists(KEYS, max_size=3), VALS),
    st.tuples(st.just("insert_absent"), st.lists(KEYS, max_size=3, unique=True), VALS),
), max_size=40)
BASE = st.dictionaries(KEYS, VALS, max_size=4)


class Harness:
    def __init__(self, base, consistent):
        self.base = dict(base)
        self.mem = MemTable(consistent=consistent, describe_key=lambda k: ("pk", k))
        self.model = dict(base)

    def current(self, key):
        rec = self.mem.get(key)
        if rec is None:
            return self.base.get(key)
        return rec[2]

    def check_storage(self, op, key, old):
        """What StateTable does in strict mode for a key without a record."""
        if self.mem.get(key) is not None or not self.mem.consistent:
            return
        stored = self.base.get(key)
        if op == "insert" and stored is not None:
            raise InconsistentOpError("insert of a pk that already has a row", key)
        if op in ("delete", "update") and stored != old:
            raise InconsistentOpError(f"{op} of a missing or different row", key)

    def apply(self, step):
        kind = step[0]
        if kind == "range":
            _, start, end, reverse = step
            live = [k for k in ALL_KEYS if self.mem.get(k) is not None]
            expected = sorted((k for k in live if (start is None or k >= start) and (end is None or k < end)),
                              reverse=reverse)
            assert [k for k, _ in self.mem.range(start, end, reverse)] == expected
            assert self.mem.has_range(start, end) == bool(expected) or reverse
            return
        if kind == "insert_many":
            _, keys, value = step
            if self.mem.consistent and any(self.base.get(k) is not None and self.mem.get(k) is None for k in keys):
                return   # StateTable's storage check refuses this chunk before the MemTable sees it
            if self.mem.insert_many(keys, [value] * len(keys)):
                assert len(set(keys)) == len(keys) and not any(self.mem_had.get(k) for k in keys)
                for k in keys:
                    self.model[k] = value
            return
        if kind == "insert_absent":   # (distinct keys: the caller's promise)
            _, keys, value = step
            if self.mem.consistent and any(self.base.get(k) is not None and self.mem.get(k) is None for k in keys):
                return
            had = any(self.mem.get(k) is not None for k in keys)
            assert self.mem.insert_absent(keys, [value] * len(keys)) == (not had)
            if not had:
                for k in keys:
                    self.model[k] = value
            return
        op, key = step[0], step[1]
        strict = self.mem.consistent
        cur = self.current(key)
        if op == "insert":
            expect_error = strict and cur is not None
        elif op == "delete":
            expect_error = strict and cur != step[2]
        else:
            expect_error = strict and cur != step[2]
        try:
            self.check_storage(op, key, step[2] if op != "insert" else None)
            if op == "insert":
                self.mem.insert(key, step[2])
            elif op == "delete":
                self.mem.delete(key, step[2])
            else:
                self.mem.update(key, step[2], step[3])
        except InconsistentOpError as exc:
            assert expect_error, (step, cur)
            assert exc.pk in (key, ("pk", key))
            return
        assert not expect_error, (step, cur)
        if op == "delete":
            self.model.pop(key, None)
        else:
            self.model[key] = step[-1]


def _run(base, ops, consistent):
    h = Harness(base, consistent)
    for step in ops:
        h.mem_had = {k: h.mem.get(k) for k in ALL_KEYS}
        h.apply(step)
        h.mem._check()
    if consistent:
        for key, (op, old, new) in h.mem._ops.items():
            if op == INSERT:
                assert key not in h.base
            else:
                assert h.base.get(key) == old, (key, op, old)
    batch = h.mem.drain()
    assert [k for k, _ in batch] == sorted(k for k, _ in batch)
    if consistent:
        assert all(k in h.base for k, v in batch if v is None), "a cancelled insert left a tombstone"
    for key, value in batch:
        if value is None:
            h.base.pop(key, None)
        else:
            h.base[key] = value
    assert h.base == h.model
    assert len(h.mem) == 0 and h.mem.drain() == []


@given(BASE, OPS)
def test_strict_mode_against_model(base, ops):
    _run(base, ops, consistent=True)


@given(BASE, OPS)
def test_relaxed_mode_against_model(base, ops):
    _run(base, ops, consistent=False)


def test_merge_rules_strict():
    m = MemTable()
    m.insert(b"k", b"1")
    m.delete(b"k", b"1")
    assert m.get(b"k") is None and len(m) == 0          # insert + delete cancel
    m.delete(b"d", b"old")
    m.insert(b"d", b"new")
    assert m.get(b"d") == (UPDATE, b"old", b"new")      # delete + insert = update
    m.update(b"d", b"new", b"newer")
    assert m.get(b"d") == (UPDATE, b"old", b"newer")
    m.delete(b"d", b"newer")
    assert m.get(b"d") == (DELETE, b"old", None)
    m.insert(b"i", b"1")
    m.update(b"i", b"1", b"2")
    assert m.get(b"i") == (INSERT, None, b"2")
    assert m.drain() == [(b"d", None), (b"i", b"2")]


@pytest.mark.parametrize("setup,call,reason", [
    (lambda m: m.insert(b"k", b"1"), lambda m: m.insert(b"k", b"2"), "insert of a pk that already has a row"),
    (lambda m: m.delete(b"k", b"1"), lambda m: m.delete(b"k", b"1"), "delete of a pk that has no row"),
    (lambda m: m.delete(b"k", b"1"), lambda m: m.update(b"k", b"1", b"2"), "update of a pk that has no row"),
    (lambda m: m.insert(b"k", b"1"), lambda m: m.delete(b"k", b"9"), "delete whose old row is not the current row"),
    (lambda m: m.insert(b"k", b"1"), lambda m: m.update(b"k", b"9", b"2"), "update whose old row is not the current row"),
])
def test_strict_errors_name_the_pk_and_change_nothing(setup, call, reason):
    m = MemTable(describe_key=lambda k: (k.decode(),), table="t1")
    setup(m)
    before = dict(m._ops)
    with pytest.raises(InconsistentOpError) as info:
        call(m)
    assert info.value.pk == ("k",) and info.value.reason == reason
    assert "pk=('k',)" in str(info.value) and "t1" in str(info.value)
    assert m._ops == before


def test_relaxed_insert_then_delete_leaves_a_tombstone():
    m = MemTable(consistent=False)
    m.insert(b"k", b"1")
    m.delete(b"k", b"whatever")
    assert m.drain() == [(b"k", None)]


def test_insert_many_falls_back_on_conflicts():
    m = MemTable()
    assert m.insert_many([b"a", b"b"], [b"1", b"2"])
    assert not m.insert_many([b"c", b"c"], [b"1", b"2"])
    assert not m.insert_many([b"d", b"a"], [b"1", b"2"])
    assert len(m) == 2
    list(m.range())
    assert m.insert_many([b"0", b"z"], [b"1", b"2"])
    m._check()
    assert [k for k, _ in m.range()] == [b"0", b"a", b"b", b"z"]


def test_range_index_merges_many_new_keys():
    m = MemTable()
    for i in range(0, 200, 2):
        m.insert(b"%03d" % i, b"v")
    assert len(list(m.range())) == 100
    for i in range(1, 200, 2):
        m.insert(b"%03d" % i, b"v")
    for i in range(0, 200, 3):
        m.delete(b"%03d" % i, b"v")
    m._check()
    assert [k for k, _ in m.range()] == [b"%03d" % i for i in range(200) if i % 3]
    assert [k for k, _ in m.range(b"010", b"020", reverse=True)] == [b"%03d" % i for i in range(19, 9, -1) if i % 3]


# --- all or nothing: checks without effects, undo, columns without draining -------------------

def _snapshot(m):
    return dict(m._ops), m.approx_bytes, [k for k, _ in m.range()]


@given(st.booleans(), OPS, OPS)
def test_undo_restores_the_records_before_a_run_of_operations(consistent, before_ops, run):
    """The state table's chunk path: save each key's record before its operation, and on a
    failure put them back; the MemTable (records, size, ordered reads) is as before the run."""
    h = Harness({}, consistent)
    for step in before_ops:
        h.mem_had = {k: h.mem.get(k) for k in ALL_KEYS}
        h.apply(step)
    records, approx, keys = _snapshot(h.mem)
    saved = []
    for step in run:
        if step[0] in ("insert", "delete", "update"):
            saved.append((step[1], h.mem.get(step[1])))
            try:
                getattr(h.mem, step[0])(*step[1:])
            except InconsistentOpError:
                pass
        elif step[0] == "range":
            list(h.mem.range(step[1], step[2], step[3]))
    h.mem.undo(saved, approx)
    h.mem._check()
    assert _snapshot(h.mem) == (records, approx, keys)


@given(st.booleans(), OPS, KEYS, VALS)
def test_checks_raise_exactly_when_the_operation_would(consistent, ops, key, value):
    h = Harness({}, consistent)
    for step in ops:
        h.mem_had = {k: h.mem.get(k) for k in ALL_KEYS}
        h.apply(step)
    for op, check, args in (("insert", h.mem.check_insert, (key,)), ("delete", h.mem.check_delete, (key, value))):
        before = _snapshot(h.mem)
        try:
            check(*args)
            refused = None
        except InconsistentOpError as exc:
            refused = exc.reason
        assert _snapshot(h.mem) == before
        trial = h.mem.copy()
        try:
            getattr(trial, op)(*((key, value) if op == "insert" else args))
            assert refused is None
        except InconsistentOpError as exc:
            assert exc.reason == refused
        assert _snapshot(h.mem) == before            # the copy is independent


def test_columns_leave_the_buffer_and_drain_empties_it():
    m = MemTable()
    m.insert(b"b", b"2")
    m.delete(b"a", b"1")
    assert m.columns() == ([b"a", b"b"], [None, b"2"]) and len(m) == 2
    assert m.drain_columns() == ([b"a", b"b"], [None, b"2"]) and len(m) == 0
    m.delete(b"k", b"1")
    with pytest.raises(InconsistentOpError, match="update of a pk that has no row"):
        m.check_delete(b"k", b"1", "update")      # the caller names the operation
    with pytest.raises(InconsistentOpError, match="update whose old row is not the current row"):
        m.insert(b"k", b"2") or m.check_delete(b"k", b"1", "update")


# --- apply: a chunk of operations through the merge rules, all or nothing ---------------------

import relational._rel_memapply_py as memapply_py   # noqa: E402
from relational import mem_table                     # noqa: E402
from twins import implementations                    # noqa: E402

APPLY_IMPLS = implementations(memapply_py, "_rel_memapply")
RUN = st.lists(st.tuples(st.booleans(), KEYS, VALS), max_size=12)


def _one_by_one(mem, base, run):
    """What the state table's row path does: per operation, check storage for a key without a
    record (strict), then the single-operation method. Returns the error's (reason, key)."""
    for is_insert, key, value in run:
        if mem.consistent and mem.get(key) is None:
            stored = base.get(key)
            if is_insert and stored is not None:
                return "insert of a pk that already has a row", key
            if not is_insert and stored is None:
                return "delete of a pk that has no row", key
            if not is_insert and stored != value:
                return "delete whose old row is not the stored row", key
        try:
            (mem.insert if is_insert else mem.delete)(key, value)
        except InconsistentOpError as exc:
            return exc.reason, key
    return None


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
@given(consistent=st.booleans(), base=BASE, before=OPS, run=RUN, indexed=st.booleans())
def test_apply_equals_the_operations_one_by_one(impl, consistent, base, before, run, indexed):
    """``MemTable.apply`` (native and pure ``merge_ops``) gives the records and size of the
    single operations in order, or raises the first refusal of those and changes nothing."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mem_table, "_apply", impl)
        _apply_case(consistent, base, before, run, indexed)


def _apply_case(consistent, base, before, run, indexed):
    h = Harness(base, consistent)
    for step in before:
        h.mem_had = {k: h.mem.get(k) for k in ALL_KEYS}
        h.apply(step)
    if indexed:
        list(h.mem.range())
    reference = h.mem.copy()
    refusal = _one_by_one(reference, h.base, run)
    before_state = _snapshot(h.mem)
    # what the state table probes: the stored value of every key without a record
    stored = {k: h.base.get(k) for _, k, _ in run if h.mem.get(k) is None}
    inserts, keys, values = ([r[i] for r in run] for i in range(3))
    try:
        h.mem.apply(inserts, keys, values, stored if consistent else None)
    except InconsistentOpError as exc:
        assert refusal == (exc.reason, exc.pk[1]), (refusal, exc.reason, exc.pk)
        assert _snapshot(h.mem) == before_state
        return
    assert refusal is None
    h.mem._check()
    assert h.mem._ops == reference._ops
    assert h.mem.approx_bytes == reference.approx_bytes
    assert [k for k, _ in h.mem.range()] == sorted(reference._ops)


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
def test_merge_ops_refuses_bad_input_alike(impl):
    err = lambda reason, key: InconsistentOpError(reason, key)   # noqa: E731
    cases = [
        ((None, [], [], [], None, True, err), TypeError),
        (({}, [], [], [], [], True, err), TypeError),
        (({}, [True], [b"k"], [], None, True, err), ValueError),
        (({}, [True], ["k"], [b"v"], None, True, err), TypeError),
        (({}, [True], [b"k"], [bytearray(b"v")], None, True, err), TypeError),
        (({b"k": (1, None)}, [True], [b"k"], [b"v"], None, False, err), ValueError),
        (({b"k": [1, None, b"v"]}, [False], [b"k"], [b"v"], None, True, err), ValueError),
    ]
    for args, exc in cases:
        with pytest.raises(exc):
            impl.merge_ops(*args)
    overlay, gone, added = impl.merge_ops({b"a": (1, None, b"1")}, (x for x in [False, True]), iter([b"a", b"b"]),
                                          [b"1", b"22"], {b"b": None}, True, err)
    assert overlay == {b"b": (1, None, b"22")} and gone == [b"a"] and added == 1 + 2 + RECORD_OVERHEAD


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
@given(st.dictionaries(st.binary(max_size=4), st.binary(max_size=4), max_size=8),
       st.dictionaries(st.binary(min_size=5, max_size=6), st.binary(max_size=4), max_size=8))
def test_insert_new_adds_insert_records(impl, before, new):
    records = {k: (2, v, None) for k, v in before.items()}
    expected = {**records, **{k: (1, None, v) for k, v in new.items()}}
    impl.insert_new(records, list(new), list(new.values()))
    assert records == expected


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
def test_insert_new_refuses_bad_input_and_changes_nothing(impl):
    for args, exc in [((None, [], []), TypeError), (({}, [b"k"], []), ValueError),
                      (({}, [b"k", "j"], [b"v", b"w"]), TypeError), (({}, [b"k", b"j"], [b"v", 5]), TypeError)]:
        with pytest.raises(exc):
            impl.insert_new(*args)
        assert args[0] in (None, {})


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
@given(st.dictionaries(st.binary(max_size=3), st.binary(max_size=3), max_size=8),
       st.dictionaries(st.binary(max_size=3), st.binary(max_size=3), max_size=8))
def test_insert_absent_inserts_all_or_changes_nothing(impl, before, new):
    """``insert_absent``: every key added as ``insert_new`` adds it when none has a record
    (True); else False with the records exactly as before (the native one deletes again the
    keys it added before meeting a recorded one), in dict order too."""
    records = {k: (2, v, None) for k, v in before.items()}
    was = list(records.items())
    done = impl.insert_absent(records, list(new), list(new.values()))
    assert done == set(before).isdisjoint(new)
    if done:
        assert list(records.items()) == was + [(k, (1, None, v)) for k, v in new.items()]
    else:
        assert list(records.items()) == was
    for args, exc in [((None, [], []), TypeError), (({}, [b"k"], []), ValueError),
                      (({}, [b"k", "j"], [b"v", b"w"]), TypeError), (({}, [b"k", b"j"], [b"v", 5]), TypeError)]:
        with pytest.raises(exc):
            impl.insert_absent(*args)
        assert args[0] in (None, {})


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
@given(st.lists(st.binary(max_size=3), max_size=24), st.sets(st.binary(max_size=3), max_size=8), st.booleans())
def test_probe_keys_are_the_distinct_unrecorded_keys(impl, keys, recorded, ascending):
    """Sorted keys (a sorted chunk's) and keys in any order give the model's answer: the
    distinct keys without a record, in first-occurrence order."""
    if ascending:
        keys = sorted(keys)
    records = dict.fromkeys(recorded, (1, None, b"v"))
    expected = []
    for key in keys:
        if key not in records and key not in expected:
            expected.append(key)
    assert impl.probe_keys(records, keys) == expected
    assert impl.probe_keys(records, iter(keys)) == expected


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
def test_probe_keys_refuses_bad_input(impl):
    for args in [(None, [b"k"]), ([], [b"k"]), ({}, [b"k", "j"]), ({}, [b"b", b"a", 5])]:
        with pytest.raises(TypeError):
            impl.probe_keys(*args)


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
@given(st.lists(st.lists(st.binary(max_size=4), max_size=12), min_size=1, max_size=4),
       st.sets(st.binary(max_size=4), max_size=16), st.lists(st.binary(max_size=5), max_size=10),
       st.integers(0, 3))
def test_prefix_records_are_the_model_s_after_any_additions(impl, additions, recorded, prefixes, plen):
    """Keys added in several rounds (repeats included, keys shorter than the prefix length
    among them), then prefixes read after each round (some longer than the prefix length):
    each prefix's recorded keys, ascending, with their records; None for none. ``find`` gives
    every key added under a prefix."""
    records = {k: (1, None, k) for k in recorded}
    index, added = impl.PrefixIndex(plen), []
    for round_keys in additions:
        index.add(round_keys)
        added += round_keys
        wanted = [p[:plen + 1] for p in prefixes]
        expected = []
        for p in wanted:
            found = sorted({k for k in added if k[:plen] == p and k in records})
            expected.append([(k, records[k]) for k in found] or None)
        assert index.records(records, wanted) == expected
        assert all(index.find(p) == sorted({k for k in added if k[:plen] == p}) for p in wanted)


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
def test_prefix_index_keeps_many_keys_and_refuses_bad_input(impl):
    """Past its first table size the index still finds every key (the native chains are
    rebuilt as it grows); a key or prefix that is not bytes raises TypeError and adds
    nothing, a bad prefix length ValueError."""
    index = impl.PrefixIndex(3)
    keys = [i.to_bytes(4, "big") for i in range(5000)]
    index.add(keys[:70])
    index.add(keys[70:])
    recorded = {k: k for k in keys[::7]}
    prefixes = [k[:3] for k in keys[::600]]
    assert index.records(recorded, prefixes) == [[(k, k) for k in keys if k[:3] == p and k in recorded]
                                                 for p in prefixes]
    with pytest.raises(TypeError):
        index.add([b"abcd", "b"])
    assert index.find(b"abc") == []
    for args in [({}, ["ab"]), ([], [b"ab"])]:
        with pytest.raises(TypeError):
            index.records(*args)
    for bad in (-1, 1.0, None):
        with pytest.raises(ValueError):
            impl.PrefixIndex(bad)


def test_native_records_are_left_to_no_garbage_collection():
    """The native merge and insert build records the collector never has to traverse (an
    epoch's MemTable holds tens of thousands), so the MemTable's dict stays untracked too."""
    import gc
    if len(APPLY_IMPLS) == 1:
        pytest.skip("HUMMOCK_PURE_PYTHON=1: the twin leaves tracking to the collector")
    native = APPLY_IMPLS[1]
    records = {}
    native.insert_new(records, [b"a", b"b"], [b"1", b"2"])
    overlay, _, _ = native.merge_ops(records, [False, True, True], [b"a", b"a", b"c"], [b"1", b"9", b"3"],
                                     {}, True, lambda reason, key: InconsistentOpError(reason, key))
    records.update(overlay)
    assert records == {b"a": (1, None, b"9"), b"b": (1, None, b"2"), b"c": (1, None, b"3")}
    assert not any(gc.is_tracked(r) for r in records.values())
    assert not gc.is_tracked(records)


# --- range iterators are snapshots ----------------------------------------------------------

WRITES = st.lists(st.one_of(
    st.tuples(st.just("insert"), KEYS, VALS),
    st.tuples(st.just("delete"), KEYS, VALS),
    st.tuples(st.just("update"), KEYS, VALS, VALS),
    st.tuples(st.just("apply"), RUN),
    st.tuples(st.just("insert_many"), st.lists(KEYS, max_size=3, unique=True), VALS),
    st.tuples(st.just("open"), st.one_of(st.none(), KEYS), st.one_of(st.none(), KEYS), st.booleans()),
    st.tuples(st.just("next"), st.integers(0, 5), st.integers(1, 3)),
    st.tuples(st.just("drop"), st.integers(0, 5)),
    st.tuples(st.just("undo")),
    st.tuples(st.just("clear")),
), max_size=40)


@given(consistent=st.booleans(), steps=WRITES)
def test_range_iterators_yield_the_records_as_of_their_creation(consistent, steps):
    """Iterators opened at random points (several at once, both directions) yield exactly the
    records of their range at their creation, whatever is written, undone or cleared while
    they are open; the MemTable's invariants hold throughout (relaxed mode: no refusals)."""
    mem = MemTable(consistent=consistent)
    open_iters = []              # [iterator, expected items, items read]
    for step in steps:
        kind = step[0]
        saved = [(k, mem.get(k)) for k in ALL_KEYS]
        approx = mem.approx_bytes
        try:
            if kind in ("insert", "delete"):
                getattr(mem, kind)(step[1], step[2])
            elif kind == "update":
                mem.update(step[1], step[2], step[3])
            elif kind == "apply":
                run = step[1]
                mem.apply([r[0] for r in run], [r[1] for r in run], [r[2] for r in run], {})
            elif kind == "insert_many":
                mem.insert_many(step[1], [step[2]] * len(step[1]))
            elif kind == "open":
                _, start, end, reverse = step
                expected = sorted(((k, r) for k, r in mem._ops.items()
                                   if (start is None or k >= start) and (end is None or k < end)), reverse=reverse)
                open_iters.append([mem.range(start, end, reverse), expected, []])
            elif kind == "next" and open_iters:
                entry = open_iters[step[1] % len(open_iters)]
                entry[2] += list(islice(entry[0], step[2]))
            elif kind == "drop" and open_iters:
                entry = open_iters.pop(step[1] % len(open_iters))
                assert entry[2] == entry[1][:len(entry[2])]
            elif kind == "undo":
                mem.undo(saved, approx)
            elif kind == "clear":
                mem.clear()
        except InconsistentOpError:
            pass
        mem._check()
    for it, expected, got in open_iters:
        assert got + list(it) == expected


def test_a_write_freezes_only_the_open_iterators_and_only_once():
    mem = MemTable()
    for i in range(100):
        mem.insert(b"%03d" % i, b"v")
    done = mem.range(b"000", b"010")
    assert len(list(done)) == 10              # exhausted: unregistered
    partial = mem.range(b"050", None)
    assert next(partial)[0] == b"050"
    dropped = mem.range()
    next(dropped)
    del dropped                               # dropped: leaves by itself
    assert len(mem._live) == 1
    mem.insert(b"999", b"v")                  # freezes `partial`: its 49 keys left are copied
    assert not mem._live and len(partial._keys) == 49
    mem.delete(b"051", b"v")
    assert [k for k, _ in partial] == [b"%03d" % i for i in range(51, 100)]
    assert b"051" not in mem._ops and b"999" in mem._ops


RUNS_STEPS = st.lists(st.one_of(
    st.tuples(st.just("insert"), KEYS, VALS),
    st.tuples(st.just("delete"), KEYS, VALS),
    st.tuples(st.just("update"), KEYS, VALS, VALS),
    st.tuples(st.just("run"), st.lists(KEYS, unique=True, max_size=4), VALS),
    st.tuples(st.just("columns")),
    st.tuples(st.just("range"), st.one_of(st.none(), KEYS), st.one_of(st.none(), KEYS)),
    st.tuples(st.just("clear")),
), max_size=30)


@given(RUNS_STEPS)
def test_append_run_equals_inserting_its_keys_one_by_one(steps):
    """Relaxed mode: a run kept aside by ``append_run`` (merged at ``columns``, or settled into
    records by the next read or write) behaves exactly as inserting its keys one by one, in
    order with every other operation: same batch, same records, same range reads."""
    runs, plain = MemTable(consistent=False), MemTable(consistent=False)
    for step in steps:
        kind = step[0]
        if kind == "run":
            keys = sorted(step[1])
            runs.append_run(keys, [step[2]] * len(keys))
            for key in keys:
                plain.insert(key, step[2])
        elif kind == "columns":
            assert runs.columns() == plain.columns()
        elif kind == "range":
            assert list(runs.range(step[1], step[2])) == list(plain.range(step[1], step[2]))
        elif kind == "clear":
            runs.clear()
            plain.clear()
        elif kind == "update":
            runs.update(step[1], step[2], step[3])
            plain.update(step[1], step[2], step[3])
        else:
            getattr(runs, kind)(step[1], step[2])
            getattr(plain, kind)(step[1], step[2])
        runs._check()
        assert bool(runs) == bool(plain)
    assert runs.columns() == plain.columns()
    assert runs.records == plain.records and len(runs) == len(plain)


def test_runs_that_follow_one_another_are_concatenated_not_merged(monkeypatch):
    """A table's chunks of increasing row ids leave runs each above the one before: ``columns``
    concatenates them (no merge in C); runs that interleave or repeat a key are still merged,
    the latest value of a key winning."""
    import relational.mem_table as mt
    calls = []
    merge = mt._apply.merge_insert_runs
    monkeypatch.setattr(mt, "_apply", type("A", (), {"merge_insert_runs": staticmethod(
        lambda runs: calls.append(len(runs)) or merge(runs))}))
    m = MemTable(consistent=False)
    m.append_run([b"a", b"b"], [b"1", b"2"])
    m.append_run([b"c"], [b"3"])
    m.append_run([b"d", b"e"], [b"4", b"5"])
    assert m.columns() == ([b"a", b"b", b"c", b"d", b"e"], [b"1", b"2", b"3", b"4", b"5"])
    assert calls == []
    m.append_run([b"b", b"z"], [b"9", b"8"])   # b again, and below e: a merge
    assert m.columns() == ([b"a", b"b", b"c", b"d", b"e", b"z"], [b"1", b"9", b"3", b"4", b"5", b"8"])
    assert calls == [4]


def test_append_run_is_refused_in_strict_mode():
    with pytest.raises(AssertionError):
        MemTable(consistent=True).append_run([b"a"], [b"1"])


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
@given(st.lists(st.dictionaries(st.binary(max_size=3), st.binary(max_size=3), max_size=12), max_size=9))
def test_merge_insert_runs_keeps_the_latest_value_of_each_key(impl, dicts):
    runs = [(sorted(d), [d[k] for k in sorted(d)]) for d in dicts]
    merged = {}
    for d in dicts:
        merged.update(d)
    assert impl.merge_insert_runs(runs) == (sorted(merged), [merged[k] for k in sorted(merged)])


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
def test_merge_insert_runs_refuses_bad_runs_alike(impl):
    for runs, error in (([([b"a"], [b"1", b"2"])], ValueError), ([([b"b", b"a"], [b"1", b"2"])], ValueError),
                        ([([b"a", b"a"], [b"1", b"2"])], ValueError), ([(["a"], [b"1"])], TypeError),
                        ([([b"a"], [None])], TypeError)):
        with pytest.raises(error):
            impl.merge_insert_runs(runs)


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
@given(st.dictionaries(st.one_of(st.binary(max_size=12), st.binary(min_size=8, max_size=12).map(lambda b: b"\x00" * 9 + b)),
                       st.tuples(st.sampled_from([1, 2, 3]), st.none() | st.binary(max_size=3),
                                 st.none() | st.binary(max_size=3)), max_size=60))
def test_sorted_news_sorts_keys_and_takes_each_new_value(impl, records):
    """Keys in bytes order (shared prefixes, prefixes of each other, the empty key) with their
    records' new values, the dict untouched."""
    before = dict(records)
    keys, news = impl.sorted_news(records)
    assert keys == sorted(records) and news == [records[k][2] for k in keys]
    assert records == before


@pytest.mark.parametrize("impl", APPLY_IMPLS, ids=lambda m: m.__name__)
def test_sorted_news_refuses_bad_records_alike(impl):
    for records, error in (([(b"a", (1, None, b"x"))], TypeError), ({"a": (1, None, b"x")}, TypeError),
                           ({b"a": (1, None)}, ValueError), ({b"a": [1, None, b"x"]}, ValueError)):
        with pytest.raises(error):
            impl.sorted_news(records)
    assert impl.sorted_news({}) == ([], [])


def _traced(build):
    """(result of ``build()``, bytes it allocated and still holds, per tracemalloc)."""
    import gc
    import tracemalloc
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = build()
        return out, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("relaxed_run", [False, True])
def test_approx_bytes_charges_what_the_records_really_take(relaxed_run):
    """The spill threshold bounds real memory: the charge is within 25% of what the records
    allocate (tracemalloc counts requested bytes, without pymalloc's rounding, so the charge
    may be a little above it), for strict records and for relaxed runs alike."""
    n = 20_000

    def build():
        m = MemTable(consistent=not relaxed_run)
        values = [i.to_bytes(4, "big") * 5 for i in range(n)]   # fresh bytes objects, traced
        ks = [b"\x00\x01" + i.to_bytes(8, "big") for i in range(n)]
        if relaxed_run:
            m.append_run(ks, values)
        else:
            for k, v in zip(ks, values):
                m.insert(k, v)
        return m
    m, real = _traced(build)
    assert 0.8 * real <= m.approx_bytes <= 1.25 * real, (m.approx_bytes, real)


def test_a_shared_buffer_batch_is_charged_what_it_really_takes():
    from hummock.shared_buffer import check_batch
    n = 20_000
    (keys, values, size), real = _traced(lambda: check_batch(
        [(b"\x00\x01" + i.to_bytes(8, "big"), i.to_bytes(4, "big") * 5) for i in range(n)]))
    assert 0.8 * real <= size <= 1.25 * real, (size, real)
