"""The relational layer: typed rows on top of the KV store (DESIGN.md section 7).

Modules: :mod:`relational.types` (data types and values), :mod:`relational.memcomparable`
(order-preserving key encoding), :mod:`relational.value_encoding` (compact row values).
StateTable and StorageTable arrive with the relational-table issue. Imports only ``hummock``.
"""
