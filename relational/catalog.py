"""Table catalog records: :class:`TableDesc` and their persistence inside the store.

Job: describe a relational table completely enough to read and write it (id, name, columns,
pk and its orders, distribution key, value columns, append-only flag, retention), serialize
that description, and keep the descriptions in the store itself, so that a catalog change
commits atomically with the data of the same epoch (``store.checkpoint(epoch)``).

Format (docs/relational.md, "Catalog records"; frozen: changing it needs a new version)::

    record   = magic "HUMKTBL1" || u32le format_version (1) || u32le payload_len
               || u64le xxh64(payload, seed 0) || payload
    payload  = UTF-8 JSON, keys sorted, no whitespace
    stored as: table id CATALOG_TABLE_ID (0xFFFFFFFF), key b"table/" || u32be(table_id)

Invariants: ``TableDesc.from_bytes(d.to_bytes()) == d``; a damaged record raises
``CorruptionError`` naming what was wrong. The catalog table id is reserved: state tables must
not use it (``TableDesc`` refuses it).

Callers: the stream and SQL layers (catalog of tables and MVs), library users.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import xxhash

from hummock._json_depth import MAX_JSON_DEPTH, json_depth_bound
from hummock.errors import CorruptionError
from relational.errors import SchemaError
from relational.memcomparable import OrderType
from relational.types import DataType, TypeKind

# --- frozen constants: part of the catalog format, do not change ------------------------------
CATALOG_TABLE_ID = 0xFFFFFFFF
RECORD_MAGIC = b"HUMKTBL1"
RECORD_VERSION = 1
_ENVELOPE = struct.Struct("<8sIIQ")
KEY_PREFIX = b"table/"
# -----------------------------------------------------------------------------------------------


def type_to_json(dtype: DataType):
    if dtype.kind == TypeKind.STRUCT:
        return {"kind": int(dtype.kind), "fields": [[n, type_to_json(t)] for n, t in dtype.fields]}
    if dtype.kind == TypeKind.LIST:
        return {"kind": int(dtype.kind), "elem": type_to_json(dtype.elem)}
    return {"kind": int(dtype.kind)}


def type_from_json(obj) -> DataType:
    kind = TypeKind(obj["kind"])
    if kind == TypeKind.STRUCT:
        return DataType.struct([(n, type_from_json(t)) for n, t in obj["fields"]])
    if kind == TypeKind.LIST:
        return DataType.list(type_from_json(obj["elem"]))
    return DataType(kind)


@dataclass(frozen=True)
class TableDesc:
    """What a relational table is. ``columns``: ``(name, DataType)`` pairs in schema order;
    ``order_types`` default to ASC; ``value_indices`` ``None`` = every column;
    ``retention_seconds`` ``None`` = keep forever."""

    table_id: int
    name: str
    columns: tuple
    pk_indices: tuple
    order_types: tuple = None
    dist_key_indices: tuple = ()
    value_indices: tuple | None = None
    append_only: bool = False
    retention_seconds: int | None = None
    properties: dict = field(default_factory=dict, compare=True, hash=False)

    def __post_init__(self):
        from relational.row_serde import RowSerde   # validates indices and orders
        if isinstance(self.table_id, bool) or not isinstance(self.table_id, int) or \
                not 0 <= self.table_id < CATALOG_TABLE_ID:
            raise SchemaError(f"table_id must be an int in [0, {CATALOG_TABLE_ID}), got {self.table_id!r}")
        if not isinstance(self.name, str):
            raise SchemaError(f"a table name is a str, got {self.name!r}")
        columns = tuple((n, t) for n, t in self.columns)
        if len({n for n, _ in columns}) != len(columns):
            raise SchemaError(f"table {self.name}: column names repeat")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "pk_indices", tuple(self.pk_indices))
        orders = self.order_types if self.order_types is not None else [OrderType.ASC] * len(self.pk_indices)
        object.__setattr__(self, "order_types", tuple(orders))
        object.__setattr__(self, "dist_key_indices", tuple(self.dist_key_indices or ()))
        if self.value_indices is not None:
            object.__setattr__(self, "value_indices", tuple(self.value_indices))
        RowSerde([t for _, t in columns], self.pk_indices, self.order_types, self.dist_key_indices,
                 self.value_indices)
        if self.retention_seconds is not None and (not isinstance(self.retention_seconds, int)
                                                   or self.retention_seconds < 0):
            raise SchemaError(f"retention_seconds must be a non-negative int or None, got {self.retention_seconds!r}")

    @property
    def types(self) -> list:
        return [t for _, t in self.columns]

    # --- serialization ------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {
            "table_id": self.table_id, "name": self.name,
            "columns": [[n, type_to_json(t)] for n, t in self.columns],
            "pk_indices": list(self.pk_indices),
            "order_types": [[o.descending, o.nulls_first] for o in self.order_types],
            "dist_key_indices": list(self.dist_key_indices),
            "value_indices": None if self.value_indices is None else list(self.value_indices),
            "append_only": self.append_only, "retention_seconds": self.retention_seconds,
            "properties": self.properties,
        }

    @classmethod
    def from_json(cls, obj) -> TableDesc:
        return cls(obj["table_id"], obj["name"], tuple((n, type_from_json(t)) for n, t in obj["columns"]),
                   tuple(obj["pk_indices"]), tuple(OrderType(d, nf) for d, nf in obj["order_types"]),
                   tuple(obj["dist_key_indices"]),
                   None if obj["value_indices"] is None else tuple(obj["value_indices"]),
                   obj["append_only"], obj["retention_seconds"], obj.get("properties", {}))

    def to_bytes(self) -> bytes:
        """The record (format above). Raises SchemaError for a description whose JSON would nest
        deeper than a decoder accepts (``MAX_JSON_DEPTH``: deeply nested types or properties)."""
        payload = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()
        if json_depth_bound(payload) > MAX_JSON_DEPTH:
            raise SchemaError(f"table {self.name}: its description nests deeper than {MAX_JSON_DEPTH} "
                              "levels (types or properties)")
        return _ENVELOPE.pack(RECORD_MAGIC, RECORD_VERSION, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "table record") -> TableDesc:
        """Decode a record; raises ``CorruptionError`` (object ``what``) when it is damaged."""
        data = bytes(data)
        if len(data) < _ENVELOPE.size:
            raise CorruptionError("table record too short", object=what, offset=0, expected=f">= {_ENVELOPE.size} bytes", found=len(data))
        magic, version, length, checksum = _ENVELOPE.unpack_from(data)
        if magic != RECORD_MAGIC:
            raise CorruptionError("not a table record", object=what, offset=0, expected=RECORD_MAGIC, found=magic)
        if version != RECORD_VERSION:
            raise CorruptionError("unknown table record version", object=what, offset=8, expected=RECORD_VERSION, found=version)
        payload = data[_ENVELOPE.size:]
        if length != len(payload):
            raise CorruptionError("table record length mismatch", object=what, offset=12, expected=len(payload), found=length)
        found = xxhash.xxh64_intdigest(payload, 0)
        if found != checksum:
            raise CorruptionError("table record checksum mismatch", object=what, offset=16, expected=checksum, found=found)
        if json_depth_bound(payload) > MAX_JSON_DEPTH:   # refused before json.loads recurses into it
            raise CorruptionError("table record nests too deeply", object=what, offset=_ENVELOPE.size,
                                  expected=f"<= {MAX_JSON_DEPTH} levels", found=f"> {MAX_JSON_DEPTH}")
        try:
            return cls.from_json(json.loads(payload))
        except (ValueError, KeyError, TypeError, SchemaError) as exc:
            raise CorruptionError(f"invalid table description: {type(exc).__name__}: {exc}", object=what,
                                  offset=_ENVELOPE.size) from None


def _key(table_id: int) -> bytes:
    return KEY_PREFIX + table_id.to_bytes(4, "big")


class Catalog:
    """Table descriptions kept in the store's reserved catalog table.

    ``put``/``drop`` write at an epoch like any state table (visible to reads of this store at
    once, durable with that epoch's ``checkpoint``); ``get``/``list`` read at an epoch.
    """

    def __init__(self, store):
        self.store = store

    def put(self, descs, epoch: int) -> None:
        """Write one or more :class:`TableDesc` at ``epoch`` (one batch)."""
        if isinstance(descs, TableDesc):
            descs = [descs]
        pairs = dict((_key(d.table_id), d.to_bytes()) for d in descs)
        self.store.ingest_batch(CATALOG_TABLE_ID, sorted(pairs.items()), epoch)

    def drop(self, table_ids, epoch: int) -> None:
        if isinstance(table_ids, int):
            table_ids = [table_ids]
        self.store.ingest_batch(CATALOG_TABLE_ID, sorted((_key(t), None) for t in set(table_ids)), epoch)

    def get(self, table_id: int, epoch: int) -> TableDesc | None:
        value = self.store.get(CATALOG_TABLE_ID, _key(table_id), epoch)
        return None if value is None else TableDesc.from_bytes(value, f"catalog record of table {table_id}")

    def list(self, epoch: int) -> list:
        """Every table description at ``epoch``, by table id."""
        return [TableDesc.from_bytes(v, f"catalog record {k!r}")
                for k, v in self.store.iter(CATALOG_TABLE_ID, epoch, prefix=KEY_PREFIX)]
