"""Renders stored keys and values for ``hummock inspect``: through the table catalog when the
table is known, as raw hex otherwise.

A relational table's key is ``vnode (u16be) || memcomparable(pk)`` and its value the value
encoding of its value columns (docs/relational.md "Row format"); the catalog table
(``relational.catalog.CATALOG_TABLE_ID``) holds ``table/<u32be id>`` -> a ``TableDesc`` record.
A key or value that does not decode with its table's description is shown in hex with the
reason: inspection must work on any store, also a damaged one.

Callers: ``cli/inspection.py``.
"""

from __future__ import annotations

from hummock import HummockError
from hummock.value import VALUE_TAG_DELETE, VALUE_TAG_PUT
from relational.catalog import CATALOG_TABLE_ID, KEY_PREFIX, Catalog, TableDesc
from relational.row_serde import RowSerde

MAX_HEX = 64   # bytes of a key or value shown in hex before it is cut


def hex_text(data: bytes) -> str:
    return data[:MAX_HEX].hex() + (f"..(+{len(data) - MAX_HEX} bytes)" if len(data) > MAX_HEX else "")


class RowDecoder:
    """Decodes the entries of any table, looking descriptions up in the catalog once each."""

    def __init__(self, store, epoch: int, *, raw: bool = False):
        self._catalog = None if raw else Catalog(store)
        self._epoch = epoch
        self._serdes: dict[int, tuple | None] = {}

    def table(self, table_id: int) -> tuple[TableDesc, RowSerde] | None:
        """The description and serde of ``table_id``, or None (unknown, raw mode, or unreadable)."""
        if self._catalog is None or table_id == CATALOG_TABLE_ID:
            return None
        if table_id not in self._serdes:
            try:
                desc = self._catalog.get(table_id, self._epoch)
            except HummockError:   # a damaged record or an expired epoch: fall back to hex
                desc = None
            self._serdes[table_id] = None if desc is None else (desc, RowSerde(
                desc.types, desc.pk_indices, desc.order_types, desc.dist_key_indices, desc.value_indices))
        return self._serdes[table_id]

    def table_name(self, table_id: int) -> str | None:
        if table_id == CATALOG_TABLE_ID:
            return "(catalog)"
        known = self.table(table_id)
        return None if known is None else known[0].name

    def entry(self, full_key: bytes, tagged_value: bytes) -> dict:
        """One SST entry as a dict: table, epoch, kind (put/delete) and the decoded key/value."""
        table_id = int.from_bytes(full_key[:4], "big")
        table_key = full_key[4:-8]
        epoch = (2**64 - 1) - int.from_bytes(full_key[-8:], "big")
        tag = tagged_value[0] if tagged_value else None
        kind = "put" if tag == VALUE_TAG_PUT else "delete" if tag == VALUE_TAG_DELETE else f"bad tag {tag}"
        value = tagged_value[1:] if tag == VALUE_TAG_PUT else None
        out = {"table_id": table_id, "epoch": epoch, "kind": kind}
        out.update(self._decoded(table_id, table_key, value))
        return out

    def _decoded(self, table_id: int, table_key: bytes, value: bytes | None) -> dict:
        if table_id == CATALOG_TABLE_ID and self._catalog is not None and table_key.startswith(KEY_PREFIX):
            described = {"key": f"table/{int.from_bytes(table_key[len(KEY_PREFIX):], 'big')}"}
            if value is not None:
                try:
                    desc = TableDesc.from_bytes(value)
                    described["value"] = f"{desc.name}({', '.join(f'{n} {t.sql_name()}' for n, t in desc.columns)}) " \
                                         f"pk={list(desc.pk_indices)}"
                except HummockError as exc:
                    described["value"] = f"{hex_text(value)} (undecodable: {exc})"
            return described
        known = self.table(table_id)
        if known is not None:
            desc, serde = known
            try:
                vnode = int.from_bytes(table_key[:2], "big")
                pk = serde.decode_pk(table_key)
                out = {"key": f"vnode={vnode} pk={_row_text(pk)}"}
                if value is not None:
                    row = serde.decode(table_key, value)
                    out["value"] = ", ".join(f"{n}={v!r}" for (n, _), v in zip(desc.columns, row))
                return out
            except (HummockError, ValueError, IndexError) as exc:
                return {"key": hex_text(table_key), "value": None if value is None else hex_text(value),
                        "note": f"does not decode as table {desc.name}: {exc}"}
        return {"key": hex_text(table_key), "value": None if value is None else hex_text(value)}


def _row_text(values) -> str:
    return "(" + ", ".join(repr(v) for v in values) + ")"
