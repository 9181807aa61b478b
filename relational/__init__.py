"""The relational layer: typed rows on top of the KV store (DESIGN.md section 7).

Modules: :mod:`relational.types` (data types and values), :mod:`relational.memcomparable`
(order-preserving key encoding), :mod:`relational.value_encoding` (compact row values),
:mod:`relational.vnode` (vnode hashing, ``Bitmap``), :mod:`relational.row_serde` (row <-> KV
pair), :mod:`relational.mem_table`, :mod:`relational.state_table` (``StateTable``, streaming
read/write), :mod:`relational.storage_table` (``StorageTable``, batch reads as Arrow),
:mod:`relational.catalog` (``TableDesc``, ``Catalog``), :mod:`relational.arrow` (Arrow types),
:mod:`relational.spark` (the Spark data source; with :mod:`relational.spark_types`,
:mod:`relational.table_scan` and :mod:`relational.bulk_load`).
Imports only ``hummock``. The table classes are loaded on first use (``from relational import
StateTable``), so importing the encoders stays light.
"""

_LAZY = {
    "StateTable": "relational.state_table",
    "StorageTable": "relational.storage_table",
    "TableDesc": "relational.catalog",
    "Catalog": "relational.catalog",
    "Bitmap": "relational.vnode",
    "MemTable": "relational.mem_table",
    "RowSerde": "relational.row_serde",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'relational' has no attribute {name!r}")
