"""The SQL catalog: tables, materialized views, their internal state tables and dependencies,
persisted as relational ``Catalog`` records (``TableDesc``; SQL-level facts in ``properties["sql"]``).

Job: map names to :class:`Relation` objects (the ``TableDesc`` of the relation's materialized
state table plus what SQL needs: visible column count, hidden ``_row_id``, ON CONFLICT,
APPEND ONLY, an MV's definition SQL, internal state table ids in plan order, the relations it
reads), allocate table ids, and read/write the records at an epoch.

Record layout (docs/sql.md, "Catalog"): every relation is one ``TableDesc`` of its
materialized table with ``properties = {"sql": {...}}``; internal state tables have no record
of their own (their ids live in the owning MV's ``internal_ids``). Table id 0 is a meta record
``__sql_meta__`` whose ``properties["next_table_id"]`` is the next id to hand out, so ids are
never reused (also after DROP). Older stores without the meta record start after the highest id.

Invariants: names are case-insensitive (stored lower-case unless quoted); a relation appears
after every relation it depends on (ids grow); ``SqlCatalog`` objects are values: DDL works on
a ``copy()`` and swaps it in only once the change committed, so a failed statement leaves the
catalog as it was.

Callers: :mod:`sql.database` (lifecycle), :mod:`sql.bind` (name resolution), :mod:`sql.build`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from relational.catalog import Catalog, TableDesc
from relational.types import DataType

from sql.errors import CatalogError

META_TABLE_ID = 0
ROW_ID = "_row_id"


@dataclass
class Relation:
    """A table or MV (module docstring). ``desc`` is its materialized state table."""

    kind: str                      # "table" | "mv"
    desc: TableDesc
    n_visible: int
    row_id: bool = False           # hidden BIGINT _row_id after the visible columns
    conflict: str = "no_check"     # Materialize conflict behaviour (tables with a pk)
    append_only: bool = False
    definition: str | None = None  # an MV's SQL (its query)
    internal_ids: list = field(default_factory=list)
    depends_on: list = field(default_factory=list)   # relation names an MV reads

    @property
    def name(self) -> str:
        return self.desc.name

    @property
    def table_id(self) -> int:
        return self.desc.table_id

    @property
    def columns(self) -> list:
        """Every column (visible then hidden) as ``(name, DataType)``."""
        return list(self.desc.columns)

    @property
    def visible_columns(self) -> list:
        return list(self.desc.columns[:self.n_visible])

    @property
    def pk_indices(self) -> list:
        return list(self.desc.pk_indices)

    @property
    def user_pk(self) -> bool:
        return self.kind == "table" and not self.row_id

    def to_desc(self) -> TableDesc:
        props = {"sql": {"kind": self.kind, "n_visible": self.n_visible, "row_id": self.row_id,
                         "conflict": self.conflict, "append_only": self.append_only,
                         "definition": self.definition, "internal_ids": list(self.internal_ids),
                         "depends_on": list(self.depends_on)}}
        d = self.desc
        return TableDesc(d.table_id, d.name, d.columns, d.pk_indices, d.order_types, d.dist_key_indices,
                         d.value_indices, d.append_only, d.retention_seconds, props)

    @classmethod
    def from_desc(cls, desc: TableDesc) -> Relation:
        p = desc.properties["sql"]
        return cls(p["kind"], desc, p["n_visible"], p.get("row_id", False), p.get("conflict", "no_check"),
                   p.get("append_only", False), p.get("definition"), list(p.get("internal_ids", [])),
                   list(p.get("depends_on", [])))


class SqlCatalog:
    """Relations by name plus the id allocator (module docstring)."""

    def __init__(self, relations=(), next_table_id: int = 1):
        self.relations: dict = {r.name: r for r in relations}
        self.next_table_id = next_table_id

    def copy(self) -> SqlCatalog:
        return copy.deepcopy(self)

    # --- persistence ----------------------------------------------------------------------------

    @classmethod
    def load(cls, store, epoch: int) -> SqlCatalog:
        relations, next_id = [], 1
        for desc in Catalog(store).list(epoch):
            if desc.table_id == META_TABLE_ID:
                next_id = max(next_id, int(desc.properties.get("next_table_id", 1)))
            elif "sql" in desc.properties:
                rel = Relation.from_desc(desc)
                relations.append(rel)
                next_id = max(next_id, rel.table_id + 1, *(i + 1 for i in rel.internal_ids))
        relations.sort(key=lambda r: r.table_id)
        return cls(relations, next_id)

    def meta_desc(self) -> TableDesc:
        return TableDesc(META_TABLE_ID, "__sql_meta__", (("next_table_id", DataType.BIGINT),), (0,),
                         properties={"next_table_id": self.next_table_id})

    def write(self, store, epoch: int, changed=(), dropped=()) -> None:
        """Write the records of ``changed`` relations (and the meta record), drop those of
        ``dropped`` table ids, all at ``epoch``."""
        cat = Catalog(store)
        cat.put([self.meta_desc()] + [r.to_desc() for r in changed], epoch)
        if dropped:
            cat.drop(list(dropped), epoch)

    # --- names and ids ----------------------------------------------------------------------------

    def allocate_id(self) -> int:
        tid = self.next_table_id
        self.next_table_id += 1
        return tid

    def get(self, name: str) -> Relation | None:
        return self.relations.get(name)

    def require(self, name: str, node=None, kind: str | None = None) -> Relation:
        rel = self.relations.get(name)
        if rel is None or (kind is not None and rel.kind != kind):
            what = {"table": "table", "mv": "materialized view"}.get(kind, "relation")
            raise CatalogError(f"{what} {name!r} does not exist")
        return rel

    def add(self, rel: Relation) -> None:
        if rel.name in self.relations:
            raise CatalogError(f"relation {rel.name!r} already exists")
        self.relations[rel.name] = rel

    def remove(self, name: str) -> Relation:
        dependents = self.dependents(name)
        if dependents:
            raise CatalogError(f"cannot drop {name!r}: materialized view {dependents[0]!r} depends on it")
        return self.relations.pop(name)

    def dependents(self, name: str) -> list:
        return [r.name for r in self.ordered() if name in r.depends_on]

    def ordered(self) -> list:
        """Relations in creation (id) order: every relation after those it reads."""
        return sorted(self.relations.values(), key=lambda r: r.table_id)

    def tables(self) -> list:
        return [r for r in self.ordered() if r.kind == "table"]

    def mvs(self) -> list:
        return [r for r in self.ordered() if r.kind == "mv"]
