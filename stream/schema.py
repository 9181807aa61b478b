"""The schema of a stream: column names and relational types, and their Arrow types.

Job: one immutable description of the columns every chunk of a stream carries, shared by the
executors that produce and consume it. The Arrow type of each column is
:func:`relational.arrow.arrow_type` of its DataType (docs/relational.md), so chunks go into
``StateTable.write_chunk`` without conversion.

Callers: chunks, expressions, executors, the planner (sql).
"""

from __future__ import annotations

import pyarrow as pa

from relational.arrow import arrow_type
from relational.state_table import split_schema
from relational.types import DataType


class Schema:
    """Column names and DataTypes. ``Schema([("id", DataType.BIGINT), ...])`` or
    ``Schema([DataType.INT, ...])`` (names ``c0, c1, ...``). Immutable; equal by content."""

    __slots__ = ("names", "types", "arrow_types", "arrow")

    def __init__(self, columns):
        if isinstance(columns, Schema):
            names, types = list(columns.names), list(columns.types)
        else:
            names, types = split_schema(columns)
        object.__setattr__(self, "names", tuple(names))
        object.__setattr__(self, "types", tuple(types))
        object.__setattr__(self, "arrow_types", tuple(arrow_type(t) for t in types))
        object.__setattr__(self, "arrow", pa.schema(list(zip(names, self.arrow_types))))

    def __setattr__(self, name, value):
        raise AttributeError("Schema is immutable")

    def __len__(self) -> int:
        return len(self.types)

    def __iter__(self):
        return iter(zip(self.names, self.types))

    def __eq__(self, other) -> bool:
        return isinstance(other, Schema) and self.names == other.names and self.types == other.types

    def __hash__(self) -> int:
        return hash((self.names, self.types))

    def __repr__(self) -> str:
        return "Schema(" + ", ".join(f"{n} {t.sql_name()}" for n, t in self) + ")"

    def index(self, name: str) -> int:
        return self.names.index(name)

    def select(self, indices) -> Schema:
        return Schema([(self.names[i], self.types[i]) for i in indices])

    def pairs(self) -> list:
        """``[(name, DataType)]``: what StateTable and TableDesc take."""
        return list(zip(self.names, self.types))

    @staticmethod
    def of(*columns: tuple[str, DataType]) -> Schema:
        return Schema(list(columns))
