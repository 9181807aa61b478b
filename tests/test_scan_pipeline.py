"""The GIL-free column decode (native/_scan_columns.pyx ``gather_values`` + ``decode_gathered``,
pipelined by ``ColumnScan.stream``): for rows read from a real store scan it gives exactly what
``decode_columns`` gives -- the same buffers for valid rows, the same DecodeError (offset and
reason) for malformed ones, UTF-8 judged as Python's strict decoder judges it -- and a
pipelined ``StorageTable.batch_iter`` yields the batches of an unpipelined one.

Native only: the pure-Python run has no GIL-free decoder (its twin decodes on the scan's thread)."""

import os

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from hummock import _twins
from relational.storage_table import StorageTable
from relational.types import DataType as T
from relational.value_encoding import encode_row
from test_scan_columns import _outcome, tables

pytestmark = pytest.mark.skipif(os.environ.get("HUMMOCK_PURE_PYTHON") == "1",
                                reason="the GIL-free decoder is native only; the twin has no gather_values")

E = 1 << 16


def _native():
    impl = _twins.load("_scan_columns", "relational._scan_columns_py")
    assert hasattr(impl, "gather_values"), "native _scan_columns expected"
    return impl


def _store_scan(datas):
    """A fresh memory store holding ``datas`` as the values of table 1, and a scan of them."""
    store = HummockStorage.open("memory://")
    if datas:
        store.ingest_batch(1, [(b"k%06d" % i, d) for i, d in enumerate(datas)], E)
    store.checkpoint(E)
    return store


def _both(datas, codes, wanted, limit):
    impl = _native()
    store = _store_scan(datas)
    try:
        def plain():
            return impl.decode_columns(store.iter(1, E), limit, codes, wanted)

        def gathered():
            g = impl.gather_values(store.iter(1, E), limit)
            return impl.decode_gathered(g, codes, wanted)
        return _outcome(plain), _outcome(gathered)
    finally:
        store.close()


@settings(max_examples=60, deadline=None)
@given(tables(), st.integers(1, 25))
def test_gathered_decode_equals_decode_columns(table, limit):
    types, datas, wanted = table
    assume(datas)   # an empty store's scan is no UserScan: ColumnScan.stream then reads plainly
    codes = tuple(int(t.kind) for t in types)
    plain, gathered = _both(datas, codes, tuple(wanted), limit)
    assert gathered == plain


@settings(max_examples=60, deadline=None)
@given(tables(), st.data())
def test_malformed_rows_raise_the_same_error(table, data):
    types, datas, wanted = table
    assume(datas)
    rows_ = [bytearray(d) for d in datas]
    victim = rows_[data.draw(st.integers(0, len(rows_) - 1))]
    if victim:
        victim[data.draw(st.integers(0, len(victim) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(victim)))
    del victim[cut:cut + data.draw(st.integers(0, 2))]
    codes = tuple(int(t.kind) for t in types)
    plain, gathered = _both([bytes(r) for r in rows_], codes, tuple(wanted), 30)
    assert gathered == plain


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=6), min_size=1, max_size=8))
@example([b"\xed\xa0\x80"]).via("a surrogate")
@example([b"\xc0\x80"]).via("overlong 2")
@example([b"\xe0\x80\x80"]).via("overlong 3")
@example([b"\xf0\x80\x80\x80"]).via("overlong 4")
@example([b"\xf4\x90\x80\x80"]).via("above U+10FFFF")
@example([b"\xe2\x82"]).via("cut short")
@example([b"\xe2\x82\xac\xf0\x9f\x98\x80", "é".encode()]).via("valid")
def test_utf8_is_judged_as_pythons_strict_decoder_judges_it(raw):
    """VARCHAR bytes of every shape (ASCII, multi-byte, overlong, surrogates, > U+10FFFF, cut):
    written as BYTEA rows, read as VARCHAR."""
    datas = [encode_row((b,), [T.BYTEA]) for b in raw]
    plain, gathered = _both(datas, (int(T.VARCHAR.kind),), (0,), 10)
    assert gathered == plain
    assert (plain[0] == "ok") == all(_is_utf8(b) for b in raw)


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_a_pipelined_batch_iter_yields_the_unpipelined_batches():
    types = [("id", T.BIGINT), ("name", T.VARCHAR), ("x", T.DOUBLE), ("d", T.DECIMAL)]
    store = HummockStorage.open("memory://")
    try:
        table = StorageTable(store, 1, types, [0])
        serde = table.serde
        rows = [(i, None if i % 7 == 0 else "n%dé" % i, i / 3, None) for i in range(5000)]
        store.ingest_batch(1, sorted(serde.encode(r) for r in rows), E)
        store.checkpoint(E)
        for columns in (["name"], ["x", "id"], ["name", "x"]):
            piped = list(table._batches(E, *_args(table, columns), pipelined=True))
            plain = list(table._batches(E, *_args(table, columns), pipelined=False))
            assert [b.num_rows for b in piped] == [b.num_rows for b in plain] and len(plain) > 3
            assert all(a.equals(b) for a, b in zip(piped, plain)), columns
    finally:
        store.close()


def _args(table, columns):
    from itertools import repeat

    from relational.table_iter import batch_schema, pk_ranges
    idx = table._column_indices(columns)
    ranges = pk_ranges(table.serde, table.vnodes, (), None, None, True, False)
    return ranges, idx, batch_schema(table.names, table.serde.types, idx), repeat(1000), False, None
