# cython: language_level=3
"""TypeKind numbers of ``relational/types.py`` for native modules (``cimport`` only).

Part of the catalog format: never renumbered; ``native/_value_encoding.pyx`` asserts at import
that ``relational.types.TypeKind`` still matches.
"""

cdef enum:
    K_BOOLEAN = 1
    K_SMALLINT = 2
    K_INT = 3
    K_BIGINT = 4
    K_DECIMAL = 5
    K_REAL = 6
    K_DOUBLE = 7
    K_VARCHAR = 8
    K_BYTEA = 9
    K_DATE = 10
    K_TIME = 11
    K_TIMESTAMP = 12
    K_TIMESTAMPTZ = 13
    K_INTERVAL = 14
    K_STRUCT = 15
    K_LIST = 16
    K_JSONB = 17
