"""Checksummed but hostile JSON in manifest checkpoints, deltas and catalog records.

A payload whose checksum is right can still nest deeper than any record of the format: the
decoders must refuse it with ``CorruptionError`` (never ``RecursionError``), ``Manifest.open``
must treat such a checkpoint like any other corrupt one, and ``TableDesc.to_bytes`` must never
write a record its decoder refuses. ``json_depth_bound`` is checked against the depth of what
``json.loads`` builds.
"""

from __future__ import annotations

import json
import logging

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from hummock._json_depth import MAX_JSON_DEPTH, json_depth_bound
from hummock.errors import CorruptionError
from hummock.manifest import Manifest, checkpoint_path, delta_path
from hummock.object_store import LocalObjectStore, MemoryObjectStore
from hummock.sstable.block import checksum
from hummock.version import HummockVersion, VersionDelta, apply
from hummock.version_codec import (DELTA_MAGIC, ENVELOPE, MANIFEST_FORMAT_VERSION, VERSION_MAGIC, decode_delta,
                                   decode_version)
from relational.catalog import _ENVELOPE as RECORD_ENVELOPE
from relational.catalog import RECORD_MAGIC, RECORD_VERSION, TableDesc
from relational.errors import SchemaError
from relational.types import DataType as T


def seal(magic: bytes, payload: bytes) -> bytes:
    """A manifest object around ``payload`` with a correct envelope and checksum."""
    return ENVELOPE.pack(magic, MANIFEST_FORMAT_VERSION, len(payload), checksum(payload)) + payload


def seal_record(payload: bytes) -> bytes:
    return RECORD_ENVELOPE.pack(RECORD_MAGIC, RECORD_VERSION, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload


def nested(depth: int, inner: bytes = b"0") -> bytes:
    return b"[" * depth + inner + b"]" * depth


HOSTILE = [nested(100_000), b'{"a":' * 50_000 + b"1" + b"}" * 50_000, b"[" * 100_000,
           nested(MAX_JSON_DEPTH + 1), b'{"id":' + nested(MAX_JSON_DEPTH) + b"}"]


def depth_of(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    return 0


# --- the depth bound ----------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a', max_size=3),
                                                                inner, max_size=3),
    max_leaves=30)


@given(json_values, st.booleans())
def test_bound_is_exact_for_valid_json(value, ascii_only):
    payload = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert json_depth_bound(payload, limit=1000) == depth_of(value)


def test_bound_ignores_brackets_in_strings_and_escapes():
    assert json_depth_bound(b'["[[[", "\\"[[", "\\\\", {"{": "]]]"}]') == 2
    assert json_depth_bound(b'"\\\\"') == 0
    assert json_depth_bound(nested(MAX_JSON_DEPTH)) == MAX_JSON_DEPTH


def test_bound_covers_unbalanced_and_stops_counting():
    assert json_depth_bound(b"[[[" + b"}" * 3) >= 3
    assert json_depth_bound(b"[" * 10) == 10
    assert json_depth_bound(nested(10_000)) > MAX_JSON_DEPTH


# --- checkpoints and deltas -----------------------------------------------------------------------

@pytest.mark.parametrize("payload", HOSTILE, ids=["lists", "objects", "unclosed", "limit+1", "in-a-field"])
@pytest.mark.parametrize("magic, decode", [(VERSION_MAGIC, decode_version), (DELTA_MAGIC, decode_delta)],
                         ids=["checkpoint", "delta"])
def test_deep_payload_is_corruption_not_recursion(magic, decode, payload):
    with pytest.raises(CorruptionError, match="nests too deeply") as info:
        decode(seal(magic, payload), object="manifest/x")
    assert (info.value.object, info.value.offset) == ("manifest/x", ENVELOPE.size)


def test_payload_at_the_depth_limit_is_only_malformed():
    with pytest.raises(CorruptionError, match="malformed manifest payload"):
        decode_version(seal(VERSION_MAGIC, nested(MAX_JSON_DEPTH)))


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    yield MemoryObjectStore() if request.param == "memory" else LocalObjectStore(tmp_path / "objects")


def _commits(n: int):
    """A manifest history of n versions: reserve ids, then empty commits."""
    version = HummockVersion.empty()
    deltas = [VersionDelta.reserve_sst_ids(version, 5)]
    version = apply(version, deltas[0])
    for i in range(1, n):
        deltas.append(VersionDelta.commit(version, (i + 1) << 16, []))
        version = apply(version, deltas[-1])
    return deltas, version


def test_open_skips_a_deeply_nested_checkpoint(store, caplog):
    deltas, final = _commits(10)
    manifest = Manifest.open(store, checkpoint_interval=4)
    for delta in deltas:
        manifest.commit(delta)
    store.upload(checkpoint_path(8), seal(VERSION_MAGIC, nested(200_000)))
    with caplog.at_level(logging.WARNING, logger="hummock.manifest"):
        assert Manifest.open(store, checkpoint_interval=4).current == final
    assert any("corrupt manifest checkpoint" in r.getMessage() for r in caplog.records)


def test_open_names_a_deeply_nested_delta(store):
    deltas, _ = _commits(6)
    manifest = Manifest.open(store)
    for delta in deltas:
        manifest.commit(delta)
    store.upload(delta_path(5), seal(DELTA_MAGIC, nested(200_000)))
    with pytest.raises(CorruptionError, match="nests too deeply") as info:
        Manifest.open(store)
    assert info.value.object == delta_path(5)


# --- catalog records ---------------------------------------------------------------------------------

@pytest.mark.parametrize("payload", HOSTILE, ids=["lists", "objects", "unclosed", "limit+1", "in-a-field"])
def test_deep_catalog_record_is_corruption(payload):
    with pytest.raises(CorruptionError, match="nests too deeply") as info:
        TableDesc.from_bytes(seal_record(payload), "catalog record of table 1")
    assert (info.value.object, info.value.offset) == ("catalog record of table 1", RECORD_ENVELOPE.size)


def test_deep_type_inside_a_valid_record_is_corruption():
    shallow = TableDesc(1, "t", [("a", T.INT), ("b", T.list(T.INT))], [0]).to_bytes()[RECORD_ENVELOPE.size:]
    inner = json.dumps({"kind": int(T.INT.kind)}).encode()
    head = b'{"elem":'
    deep = head * 5_000 + inner + (b',"kind":%d}' % int(T.list(T.INT).kind)) * 5_000
    payload = shallow.replace(b'{"elem":' + inner.replace(b" ", b""), deep, 1)
    assert len(payload) > len(shallow)
    with pytest.raises(CorruptionError, match="nests too deeply"):
        TableDesc.from_bytes(seal_record(payload))


def test_nested_types_within_the_limit_round_trip():
    dtype = T.INT
    for i in range(12):
        dtype = T.struct([("f", dtype), ("g", T.VARCHAR)]) if i % 2 else T.list(dtype)
    desc = TableDesc(1, "t", [("k", T.INT), ("deep", dtype)], [0])
    assert TableDesc.from_bytes(desc.to_bytes()) == desc


def test_to_bytes_refuses_what_from_bytes_would_refuse():
    dtype = T.INT
    for _ in range(MAX_JSON_DEPTH):
        dtype = T.list(dtype)
    with pytest.raises(SchemaError, match="nests deeper"):
        TableDesc(1, "t", [("k", T.INT), ("deep", dtype)], [0]).to_bytes()
    properties = {"a": nested(MAX_JSON_DEPTH).decode()}   # brackets inside a string are fine
    desc = TableDesc(1, "t", [("k", T.INT)], [0], properties=properties)
    assert TableDesc.from_bytes(desc.to_bytes()) == desc
    deep = 0
    for _ in range(MAX_JSON_DEPTH):
        deep = {"x": deep}
    with pytest.raises(SchemaError, match="nests deeper"):
        TableDesc(1, "t", [("k", T.INT)], [0], properties=deep).to_bytes()
