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
``CorruptionError`` naming what was wrong -- also one whose checksum holds but whose content
does not describe a table (JSON of the wrong shape or types, an unknown type code, indices out
of range): every field's JSON type is checked before anything is built, and the error names the
field (``expected``/``found``). A record stored under ``table/<id>`` describes table ``<id>``. The catalog table id is reserved: state tables must
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


def type_from_json(obj, field: str = "type") -> DataType:
    """The DataType of ``type_to_json``'s form; ``_Malformed`` names ``field`` (the path to
    ``obj`` in the record) when the JSON has the wrong shape or an unknown type code."""
    code = _expect(_expect(obj, dict, field).get("kind"), int, f"{field}.kind")
    if code not in _TYPE_CODES:
        raise _Malformed(f"{field}.kind", f"a type code in {min(_TYPE_CODES)}..{max(_TYPE_CODES)}", code)
    kind = TypeKind(code)
    if kind == TypeKind.STRUCT:
        fields = []
        for i, item in enumerate(_expect(obj.get("fields"), list, f"{field}.fields")):
            where = f"{field}.fields[{i}]"
            if not isinstance(item, list) or len(item) != 2:
                raise _Malformed(where, "a [name, type] pair", item)
            fields.append((_expect(item[0], str, f"{where}[0]"), type_from_json(item[1], f"{where}[1]")))
        return DataType.struct(fields)
    if kind == TypeKind.LIST:
        return DataType.list(type_from_json(obj.get("elem"), f"{field}.elem"))
    return DataType(kind)


_TYPE_CODES = frozenset(int(k) for k in TypeKind)
_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer", bool: "a boolean"}


class _Malformed(ValueError):
    """A record's JSON field of the wrong shape: ``field`` (its path), ``expected``, ``found``."""

    def __init__(self, field: str, expected: str, found):
        text = repr(found)
        self.field, self.expected = field, expected
        self.found = found if len(text) <= 80 else text[:77] + "..."   # a value, or its cut repr
        super().__init__(f"{field}: expected {expected}, found {text if len(text) <= 80 else self.found}")


def _expect(value, kind: type, field: str):
    """``value`` if its JSON type is ``kind`` (a bool is no integer), else ``_Malformed``."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Malformed(field, _JSON_NAMES[kind], value)
    return value


def _indices(value, field: str) -> tuple:
    return tuple(_expect(v, int, f"{field}[{i}]") for i, v in enumerate(_expect(value, list, field)))


def _order_type(value, field: str) -> OrderType:
    if not isinstance(value, list) or len(value) != 2:
        raise _Malformed(field, "a [descending, nulls_first] pair of booleans", value)
    return OrderType(_expect(value[0], bool, f"{field}[0]"), _expect(value[1], bool, f"{field}[1]"))


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
        """The description a record's JSON holds. Raises ``_Malformed`` (a ``ValueError``) naming
        the first field whose JSON type is wrong; ``SchemaError`` and ``TypeMismatchError`` for
        well-typed content that describes no table."""
        obj = _expect(obj, dict, "the description")
        columns = [_expect(c, list, f"columns[{i}]") for i, c in enumerate(_expect(obj.get("columns"), list, "columns"))]
        for i, c in enumerate(columns):
            if len(c) != 2:
                raise _Malformed(f"columns[{i}]", "a [name, type] pair", c)
            _expect(c[0], str, f"columns[{i}][0]")
        value_indices = obj.get("value_indices")
        retention = obj.get("retention_seconds")
        return cls(_expect(obj.get("table_id"), int, "table_id"), _expect(obj.get("name"), str, "name"),
                   tuple((n, type_from_json(t, f"columns[{i}][1]")) for i, (n, t) in enumerate(columns)),
                   _indices(obj.get("pk_indices"), "pk_indices"),
                   tuple(_order_type(o, f"order_types[{i}]")
                         for i, o in enumerate(_expect(obj.get("order_types"), list, "order_types"))),
                   _indices(obj.get("dist_key_indices"), "dist_key_indices"),
                   None if value_indices is None else _indices(value_indices, "value_indices"),
                   _expect(obj.get("append_only"), bool, "append_only"),
                   None if retention is None else _expect(retention, int, "retention_seconds"),
                   _expect(obj.get("properties", {}), dict, "properties"))

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
            obj = json.loads(payload)
        except ValueError as exc:   # not UTF-8, not JSON
            raise CorruptionError(f"table record payload is not JSON: {exc}", object=what,
                                  offset=_ENVELOPE.size) from None
        try:
            return cls.from_json(obj)
        except _Malformed as exc:
            raise CorruptionError(f"invalid table description: {exc.field}", object=what, offset=_ENVELOPE.size,
                                  expected=exc.expected, found=exc.found) from None
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:   # SchemaError, ...
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
        key = _key(table_id)
        value = self.store.get(CATALOG_TABLE_ID, key, epoch)
        return None if value is None else decode_record(key, value)

    def list(self, epoch: int) -> list:
        """Every table description at ``epoch``, by table id. Raises ``CorruptionError`` for a
        record that does not decode (:func:`decode_record`)."""
        return [decode_record(k, v) for k, v in self.store.iter(CATALOG_TABLE_ID, epoch, prefix=KEY_PREFIX)]


#: The table-id allocator's record (written by the SQL catalog and by bulk loads): table id 0,
#: ``properties["next_table_id"]`` the next id to hand out. Every writer of records that claims
#: an id moves it past that id, so no two writers hand out one id.
ALLOCATOR_TABLE_ID = 0
ALLOCATOR_NAME = "__sql_meta__"


def allocator_desc(next_table_id: int) -> TableDesc:
    """The allocator record saying ``next_table_id`` is the next id to hand out."""
    return TableDesc(ALLOCATOR_TABLE_ID, ALLOCATOR_NAME, (("next_table_id", DataType.BIGINT),), (0,),
                     properties={"next_table_id": next_table_id})


def claimed_table_ids(descs) -> tuple:
    """``(ids, next_id)``: the table ids the records ``descs`` claim (each record's own and the
    ``properties["sql"]["internal_ids"]`` of SQL relations, whose state tables have no record)
    and the lowest id above every claimed id and the allocator's ``next_table_id``. Malformed
    SQL properties are skipped here (``SqlCatalog.from_descs`` reports them)."""
    ids, next_id = set(), 1
    for desc in descs:
        if desc.table_id == ALLOCATOR_TABLE_ID:
            found = desc.properties.get("next_table_id")
            if isinstance(found, int) and not isinstance(found, bool):
                next_id = max(next_id, found)
            continue
        ids.add(desc.table_id)
        sql = desc.properties.get("sql")
        if isinstance(sql, dict) and isinstance(sql.get("internal_ids"), list):
            ids.update(i for i in sql["internal_ids"] if isinstance(i, int) and not isinstance(i, bool))
    return ids, max([next_id] + [i + 1 for i in ids])


def record_name(key: bytes) -> str:
    """How errors and ``hummock inspect`` name the catalog record stored under ``key``."""
    return f"catalog record {bytes(key)!r} (table {CATALOG_TABLE_ID})"


def decode_record(key: bytes, value: bytes) -> TableDesc:
    """The description stored under catalog ``key``: ``TableDesc.from_bytes``, and the key must
    be ``table/<u32be id>`` of that description's id, else ``CorruptionError``."""
    what = record_name(key)
    desc = TableDesc.from_bytes(value, what)
    key = bytes(key)
    if len(key) != len(KEY_PREFIX) + 4 or not key.startswith(KEY_PREFIX):
        raise CorruptionError("catalog key is not table/<u32 id>", object=what, expected=f"{len(KEY_PREFIX) + 4} bytes",
                              found=len(key))
    if int.from_bytes(key[len(KEY_PREFIX):], "big") != desc.table_id:
        raise CorruptionError("catalog record describes another table than its key names", object=what,
                              offset=_ENVELOPE.size, expected=int.from_bytes(key[len(KEY_PREFIX):], "big"),
                              found=desc.table_id)
    return desc
