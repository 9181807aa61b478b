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
after every relation it depends on (ids grow); a record whose ``properties["sql"]`` is malformed
(wrong JSON types, an unknown kind or conflict behaviour, column counts or ids out of range, a
name or id used twice, an MV reading a relation that does not exist) is a ``CorruptionError``
naming the record and the field, at load and in ``hummock inspect verify``; ``SqlCatalog`` objects are values: DDL works on
a ``copy()`` and swaps it in only once the change committed, so a failed statement leaves the
catalog as it was.

Column defaults (docs/sql.md "Column defaults"): ``properties.sql.defaults``, on a table whose
columns have any, is one entry per visible column -- the DEFAULT's SQL text or null; a record
without it (every older one) has no defaults. ``properties.sql.typmods`` (one entry per visible
column: ``[precision, scale]`` of a ``NUMERIC(p, s)`` column or null) and ``properties.sql.not_null``
(one boolean per visible column: declared ``NOT NULL``) are there only when some column has
one; a record without them (every older one) has neither (sql/column_checks.py enforces them).
``properties.sql.layout_epoch``, on a table or index whose columns ADD/DROP COLUMN changed, is
the epoch its rows were re-encoded at
(sql/alter.py; absent: never). ``properties.sql.scan_layouts``, on an MV planned before an ALTER
TABLE changed the columns of a table it reads, is ``{table: [[column or null, type], ...]}``: the
columns (by their present names; null: dropped since) the MV reads the table as (sql/alter.py).

Indexes (``CREATE INDEX i ON t (c)``, docs/sql.md "Indexes") are relations of kind ``"index"``,
as RisingWave builds them: an MV over ``SELECT * FROM t`` whose materialized table has every
column of ``t`` (same order, hidden ``_row_id`` too) but pk ``(c..., t's pk)``; ``index_columns`` is how many leading pk columns are the indexed ones.
They share the relations' namespace (as in Postgres), are never read by name in queries, and go
with their table on DROP TABLE. Batch plans read them in place of the table
(:mod:`sql.plan.key_range`).

Watermarks (``WATERMARK FOR col AS expr`` of CREATE TABLE / SOURCE, docs/sql.md "Watermarks"):
``properties.sql.watermark`` is ``{"column": name, "expr": SQL text}`` and the relation's last
``internal_ids`` entry is the WatermarkFilter's state table (the current watermark); a record
without it (every older one) has no watermark.

Sources (``CREATE SOURCE``, docs/sql.md "Sources") are relations of kind ``"source"``: a table's
record (columns, hidden ``_row_id``) whose table holds no rows; ``properties.sql.connector`` is
the WITH options (strings), also on a table fed by a connector; ``internal_ids`` is the
connector's offset table (sql/source.py).

Subscriptions (``CREATE SUBSCRIPTION``, docs/sql.md "Subscriptions") are records of their own:
the ``TableDesc`` of the subscription's change-log table (its own id from the allocator, the
subscription's name, the relation's columns and pk) with ``properties["subscription"]``
(``relation``, ``retention_ms``, ``start_epoch``: relational/change_log.py). They live in
``SqlCatalog.subscriptions``, a namespace apart from relations; a relation with a subscription
cannot be dropped.

Callers: :mod:`sql.database` (lifecycle), :mod:`sql.bind` (name resolution), :mod:`sql.build`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from hummock.errors import CorruptionError
from relational.catalog import (CATALOG_TABLE_ID, KEY_PREFIX, Catalog, TableDesc, allocator_desc, record_name,
                                type_from_json, type_to_json)
from relational.change_log import SUBSCRIPTION_PROPERTY, ChangeLogSpec, subscription_properties
from relational.types import TypeKind
from stream.numeric_typmod import check_typmod
from stream.executors.materialize import CONFLICT_BEHAVIOURS

from sql.errors import CatalogError

META_TABLE_ID = 0
ROW_ID = "_row_id"


@dataclass
class Relation:
    """A table or MV (module docstring). ``desc`` is its materialized state table."""

    kind: str                      # "table" | "mv" | "index" | "source"
    desc: TableDesc
    n_visible: int
    row_id: bool = False           # hidden BIGINT _row_id after the visible columns
    conflict: str = "no_check"     # Materialize conflict behaviour (tables with a pk)
    append_only: bool = False
    definition: str | None = None  # an MV's SQL (its query)
    internal_ids: list = field(default_factory=list)
    depends_on: list = field(default_factory=list)   # relation names an MV reads
    index_columns: int = 0         # an index: its indexed columns = the first pk columns
    connector: dict | None = None  # a source / connector-fed table: its WITH options (sql/source.py)
    defaults: list | None = None   # a table: per visible column its DEFAULT's SQL text or None (sql/defaults.py)
    layout_epoch: int = 0          # a table / index: the epoch of its last ADD/DROP COLUMN rewrite (sql/alter.py)
    scan_layouts: dict | None = None  # an MV: {table: [(column or None, DataType)]} it reads as before an ALTER
    typmods: list | None = None    # a table: per visible column (precision, scale) of NUMERIC(p, s), (n,) of VARCHAR(n) or None
    not_null: list | None = None   # a table: per visible column whether it is declared NOT NULL
    watermark: tuple | None = None  # a table / source: (column name, SQL text) of WATERMARK FOR col AS expr
    pushed_filters: bool = False   # an MV planned with WHERE conjuncts below its joins (sql/plan/rules.py)

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

    def default_of(self, i: int) -> str | None:
        """The SQL text of visible column ``i``'s DEFAULT (None: the column defaults to NULL)."""
        return self.defaults[i] if self.defaults else None

    def typmod_of(self, i: int) -> tuple | None:
        """``(precision, scale)`` of visible column ``i`` declared ``NUMERIC(p, s)``, else None."""
        return self.typmods[i] if self.typmods else None

    def not_null_of(self, i: int) -> bool:
        """Whether visible column ``i`` refuses NULL (declared NOT NULL, or in a user primary key)."""
        return bool(self.not_null and self.not_null[i]) or (self.user_pk and i in self.desc.pk_indices)

    @property
    def checked(self) -> bool:
        """Whether writes into the table have typmods or NOT NULL columns to enforce
        (sql/column_checks.py); False costs a write nothing."""
        return bool(self.typmods and any(self.typmods)) or bool(self.not_null and any(self.not_null))

    @property
    def user_pk(self) -> bool:
        return self.kind == "table" and not self.row_id

    def to_desc(self) -> TableDesc:
        props = {"sql": {"kind": self.kind, "n_visible": self.n_visible, "row_id": self.row_id,
                         "conflict": self.conflict, "append_only": self.append_only,
                         "definition": self.definition, "internal_ids": list(self.internal_ids),
                         "depends_on": list(self.depends_on)}}
        if self.kind == "index":
            props["sql"]["index_columns"] = self.index_columns
        if self.connector is not None:
            props["sql"]["connector"] = dict(self.connector)
        if self.defaults and any(t is not None for t in self.defaults):   # absent in older records
            props["sql"]["defaults"] = list(self.defaults)
        if self.layout_epoch:
            props["sql"]["layout_epoch"] = self.layout_epoch
        if self.typmods and any(self.typmods):   # absent in older records (no typmods)
            props["sql"]["typmods"] = [None if t is None else list(t) for t in self.typmods]
        if self.not_null and any(self.not_null):
            props["sql"]["not_null"] = [bool(x) for x in self.not_null]
        if self.pushed_filters:   # absent in older records: reopened without push_filter_below_join
            props["sql"]["pushed_filters"] = True
        if self.watermark is not None:   # absent in older records
            props["sql"]["watermark"] = {"column": self.watermark[0], "expr": self.watermark[1]}
        if self.scan_layouts:
            props["sql"]["scan_layouts"] = {t: [[n, type_to_json(dt)] for n, dt in cols]
                                            for t, cols in self.scan_layouts.items()}
        d = self.desc
        return TableDesc(d.table_id, d.name, d.columns, d.pk_indices, d.order_types, d.dist_key_indices,
                         d.value_indices, d.append_only, d.retention_seconds, props)

    @classmethod
    def from_desc(cls, desc: TableDesc) -> Relation:
        """The relation a catalog record describes; ``CorruptionError`` (naming the record and the
        field) when its ``properties["sql"]`` is malformed."""
        p = _sql_field(desc, desc.properties["sql"], dict, "")
        kind = _sql_field(desc, p.get("kind"), str, "kind")
        n_visible = _sql_field(desc, p.get("n_visible"), int, "n_visible")
        conflict = _sql_field(desc, p.get("conflict", "no_check"), str, "conflict")
        definition = p.get("definition")
        if kind not in ("table", "mv", "index", "source"):
            raise _malformed(desc, "kind", "'table', 'mv', 'index' or 'source'", kind)
        if not 0 < n_visible <= len(desc.columns):
            raise _malformed(desc, "n_visible", f"1..{len(desc.columns)} (the record's columns)", n_visible)
        if conflict not in CONFLICT_BEHAVIOURS:
            raise _malformed(desc, "conflict", f"one of {', '.join(CONFLICT_BEHAVIOURS)}", conflict)
        index_columns = 0
        if kind == "index":
            index_columns = _sql_field(desc, p.get("index_columns"), int, "index_columns")
            if not 0 < index_columns <= len(desc.pk_indices):
                raise _malformed(desc, "index_columns", f"1..{len(desc.pk_indices)} (the record's pk columns)",
                                 index_columns)
        if kind not in ("table", "source") or definition is not None:
            _sql_field(desc, definition, str, "definition")
        connector = p.get("connector")
        if connector is not None or kind == "source":
            for key, value in _sql_field(desc, connector, dict, "connector").items():
                _sql_field(desc, value, str, f"connector.{key}")
        internal_ids = _sql_field(desc, p.get("internal_ids", []), list, "internal_ids")
        for i, tid in enumerate(internal_ids):
            if not 0 < _sql_field(desc, tid, int, f"internal_ids[{i}]") < CATALOG_TABLE_ID or tid == desc.table_id:
                raise _malformed(desc, f"internal_ids[{i}]", f"a table id in 1..{CATALOG_TABLE_ID - 1} other than "
                                                             "the relation's", tid)
        depends_on = _sql_field(desc, p.get("depends_on", []), list, "depends_on")
        for i, name in enumerate(depends_on):
            _sql_field(desc, name, str, f"depends_on[{i}]")
        defaults = p.get("defaults")
        if defaults is not None:
            if len(_sql_field(desc, defaults, list, "defaults")) != n_visible:
                raise _malformed(desc, "defaults", f"one entry per visible column ({n_visible})", defaults)
            for i, text in enumerate(defaults):
                if text is not None:
                    _sql_field(desc, text, str, f"defaults[{i}]")
            defaults = list(defaults)
        typmods = p.get("typmods")
        if typmods is not None:
            if len(_sql_field(desc, typmods, list, "typmods")) != n_visible:
                raise _malformed(desc, "typmods", f"one entry per visible column ({n_visible})", typmods)
            for i, t in enumerate(typmods):
                varchar = isinstance(t, list) and len(t) == 1 and desc.columns[i][1].kind == TypeKind.VARCHAR and \
                    isinstance(t[0], int) and not isinstance(t[0], bool) and t[0] >= 1   # VARCHAR(n)
                if t is not None and not varchar and not (
                        isinstance(t, list) and len(t) == 2 and
                        all(isinstance(x, int) and not isinstance(x, bool) for x in t) and
                        check_typmod(*t) is None and desc.columns[i][1].kind == TypeKind.DECIMAL):
                    raise _malformed(desc, f"typmods[{i}]", "null, [precision, scale] of a NUMERIC column or "
                                                            "[length] of a VARCHAR one", t)
            typmods = [None if t is None else tuple(t) for t in typmods]
        not_null = p.get("not_null")
        if not_null is not None:
            if len(_sql_field(desc, not_null, list, "not_null")) != n_visible:
                raise _malformed(desc, "not_null", f"one entry per visible column ({n_visible})", not_null)
            for i, x in enumerate(not_null):
                _sql_field(desc, x, bool, f"not_null[{i}]")
            not_null = list(not_null)
        layout_epoch = _sql_field(desc, p.get("layout_epoch", 0), int, "layout_epoch")
        if not 0 <= layout_epoch < 1 << 64:
            raise _malformed(desc, "layout_epoch", "an epoch in [0, 2^64)", layout_epoch)
        scan_layouts = p.get("scan_layouts")
        if scan_layouts is not None:
            layouts = {}
            for t, cols in _sql_field(desc, scan_layouts, dict, "scan_layouts").items():
                out = []
                for i, item in enumerate(_sql_field(desc, cols, list, f"scan_layouts.{t}")):
                    if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], (str, type(None))):
                        raise _malformed(desc, f"scan_layouts.{t}[{i}]", "a [column name or null, type] pair", item)
                    try:
                        out.append((item[0], type_from_json(item[1])))
                    except ValueError as exc:   # relational.catalog's _Malformed
                        raise _malformed(desc, f"scan_layouts.{t}[{i}][1]", "a column type", item[1]) from exc
                if t not in depends_on:
                    raise _malformed(desc, "scan_layouts", "layouts of relations the MV reads", t)
                layouts[t] = out
            scan_layouts = layouts
        watermark = _watermark_field(desc, p.get("watermark"), kind, n_visible, internal_ids)
        return cls(kind, desc, n_visible, _sql_field(desc, p.get("row_id", False), bool, "row_id"), conflict,
                   _sql_field(desc, p.get("append_only", False), bool, "append_only"), definition,
                   list(internal_ids), list(depends_on), index_columns, connector, defaults, layout_epoch,
                   scan_layouts, typmods, not_null, watermark=watermark,
                   pushed_filters=_sql_field(desc, p.get("pushed_filters", False), bool, "pushed_filters"))


def _watermark_field(desc: TableDesc, watermark, kind: str, n_visible: int, internal_ids: list):
    """``properties.sql.watermark`` (``{"column", "expr"}``, docs/sql.md "Watermarks") as
    ``(column, expr text)``, or None when absent (every older record); its state table is the
    last of ``internal_ids``."""
    if watermark is None:
        return None
    _sql_field(desc, watermark, dict, "watermark")
    column = _sql_field(desc, watermark.get("column"), str, "watermark.column")
    text = _sql_field(desc, watermark.get("expr"), str, "watermark.expr")
    if kind not in ("table", "source") or not internal_ids:
        raise _malformed(desc, "watermark", "a watermark of a table or source whose state table id is the last "
                                            "of internal_ids", watermark)
    if column not in [c for c, _ in desc.columns[:n_visible]]:
        raise _malformed(desc, "watermark.column", "a visible column", column)
    return column, text


@dataclass
class Subscription:
    """A subscription (module docstring): its change log is table ``desc.table_id``; it holds
    every change of ``relation`` after ``start_epoch`` that is younger than ``retention_ms``."""

    desc: TableDesc
    relation: str
    retention_ms: int
    start_epoch: int

    kind = "subscription"
    internal_ids = ()

    @property
    def name(self) -> str:
        return self.desc.name

    @property
    def table_id(self) -> int:
        return self.desc.table_id

    def spec(self) -> ChangeLogSpec:
        return ChangeLogSpec(self.table_id, self.retention_ms, self.name)

    def to_desc(self) -> TableDesc:
        d = self.desc
        return TableDesc(d.table_id, d.name, d.columns, d.pk_indices, d.order_types, d.dist_key_indices,
                         d.value_indices, properties=subscription_properties(self.relation, self.retention_ms,
                                                                             self.start_epoch))

    @classmethod
    def from_desc(cls, desc: TableDesc) -> Subscription:
        p = desc.properties[SUBSCRIPTION_PROPERTY]
        if not isinstance(p, dict):
            raise _malformed(desc, "", "an object", p, SUBSCRIPTION_PROPERTY)
        relation = p.get("relation")
        if not isinstance(relation, str):
            raise _malformed(desc, "relation", "a string", relation, SUBSCRIPTION_PROPERTY)
        values = []
        for name in ("retention_ms", "start_epoch"):
            v = p.get(name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64:
                raise _malformed(desc, name, "an integer in [0, 2^64)", v, SUBSCRIPTION_PROPERTY)
            values.append(v)
        return cls(desc, relation, *values)


def _record(table_id: int) -> str:
    return record_name(KEY_PREFIX + table_id.to_bytes(4, "big"))


def _malformed(desc: TableDesc, field: str, expected, found, prop: str = "sql") -> CorruptionError:
    text = repr(found)
    return CorruptionError(f"invalid SQL catalog entry: properties.{prop}{'.' if field else ''}{field}",
                           object=_record(desc.table_id),
                           expected=expected, found=found if len(text) <= 80 else text[:77] + "...")


_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer", bool: "a boolean"}


def _sql_field(desc: TableDesc, value, kind: type, field: str):
    """``value`` if its JSON type is ``kind`` (a bool is no integer), else ``CorruptionError``."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _malformed(desc, field, _JSON_NAMES[kind], value)
    return value


class SqlCatalog:
    """Relations by name plus the id allocator (module docstring)."""

    def __init__(self, relations=(), next_table_id: int = 1, subscriptions=()):
        self.relations: dict = {r.name: r for r in relations}
        self.next_table_id = next_table_id
        self.subscriptions: dict = {s.name: s for s in subscriptions}

    def copy(self) -> SqlCatalog:
        return copy.deepcopy(self)

    # --- persistence ----------------------------------------------------------------------------

    @classmethod
    def load(cls, store, epoch: int) -> SqlCatalog:
        """The catalog at ``epoch``; ``CorruptionError`` for a record that does not decode or
        relations that contradict each other (module docstring)."""
        return cls.from_descs(Catalog(store).list(epoch))

    @classmethod
    def from_descs(cls, descs) -> SqlCatalog:
        """The catalog the table descriptions ``descs`` (a store's catalog records) hold."""
        relations, next_id, owners, subscriptions = [], 1, {}, []
        for desc in descs:
            if desc.table_id == META_TABLE_ID:
                found = desc.properties.get("next_table_id", 1)
                if isinstance(found, bool) or not isinstance(found, int) or not 0 < found <= CATALOG_TABLE_ID:
                    raise CorruptionError("invalid SQL catalog meta record: properties.next_table_id",
                                          object=_record(META_TABLE_ID), expected=f"an integer in 1..{CATALOG_TABLE_ID}",
                                          found=found if len(repr(found)) <= 80 else repr(found)[:77] + "...")
                next_id = max(next_id, found)
            elif "sql" in desc.properties:
                rel = Relation.from_desc(desc)
                for tid in [rel.table_id] + rel.internal_ids:
                    if tid in owners:
                        raise _malformed(desc, "internal_ids", f"ids no other relation uses ({owners[tid]} uses "
                                                               f"{tid})", rel.internal_ids)
                    owners[tid] = rel.name
                relations.append(rel)
                next_id = max(next_id, rel.table_id + 1, *(i + 1 for i in rel.internal_ids))
            elif SUBSCRIPTION_PROPERTY in desc.properties:
                if desc.table_id in owners:
                    raise _malformed(desc, "", f"a table id no other record uses ({owners[desc.table_id]} uses it)",
                                     desc.table_id, SUBSCRIPTION_PROPERTY)
                owners[desc.table_id] = desc.name
                subscriptions.append(Subscription.from_desc(desc))
                next_id = max(next_id, desc.table_id + 1)
            else:   # a table recorded outside SQL (a bulk load): its id is taken too
                if desc.table_id in owners:
                    raise CorruptionError(f"table id {desc.table_id} has two records: {owners[desc.table_id]!r} "
                                          f"and {desc.name!r}", object=_record(desc.table_id),
                                          expected="one owner per table id", found=desc.name)
                owners[desc.table_id] = desc.name
                next_id = max(next_id, desc.table_id + 1)
        relations.sort(key=lambda r: r.table_id)
        names = {}
        for rel in relations:
            if rel.name in names:
                raise CorruptionError(f"two SQL relations are named {rel.name!r}", object=_record(rel.table_id),
                                      expected=f"a name other than table {names[rel.name]}'s", found=rel.name)
            names[rel.name] = rel.table_id
        for rel in relations:
            missing = [n for n in rel.depends_on if n not in names or n == rel.name]
            if missing:
                raise _malformed(rel.desc, "depends_on", "names of other relations in the catalog", missing)
        kinds = {rel.name: rel.kind for rel in relations}
        for rel in relations:
            if rel.kind == "index" and (len(rel.depends_on) != 1 or kinds[rel.depends_on[0]] == "index"):
                raise _malformed(rel.desc, "depends_on", "the index's one table or MV", rel.depends_on)
        seen = set()
        for sub in subscriptions:
            if sub.name in seen:
                raise CorruptionError(f"two subscriptions are named {sub.name!r}", object=_record(sub.table_id),
                                      expected="one record per subscription name", found=sub.name)
            seen.add(sub.name)
            if sub.relation not in names:
                raise _malformed(sub.desc, "relation", "the name of a relation in the catalog", sub.relation,
                                 SUBSCRIPTION_PROPERTY)
        return cls(relations, next_id, subscriptions)

    def meta_desc(self) -> TableDesc:
        return allocator_desc(self.next_table_id)   # the format bulk loads share

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
            what = {"table": "table", "mv": "materialized view", "index": "index"}.get(kind, "relation")
            raise CatalogError(f"{what} {name!r} does not exist")
        return rel

    def add(self, rel: Relation) -> None:
        if rel.name in self.relations:
            raise CatalogError(f"relation {rel.name!r} already exists")
        self.relations[rel.name] = rel

    def remove(self, name: str) -> Relation:
        """Drop ``name`` and, for a table or MV, its indexes (as Postgres does); a CatalogError
        when an MV or a subscription reads it."""
        dependents = [d for d in self.dependents(name) if self.relations[d].kind != "index"]
        if dependents:
            raise CatalogError(f"cannot drop {name!r}: materialized view {dependents[0]!r} depends on it")
        subs = self.subscriptions_of(name)
        if subs:
            raise CatalogError(f"cannot drop {name!r}: subscription {subs[0].name!r} depends on it "
                               f"(DROP SUBSCRIPTION first)")
        for index in self.indexes_of(name):
            self.relations.pop(index.name)
        return self.relations.pop(name)

    def subscriptions_of(self, name: str) -> list:
        """The subscriptions of relation ``name``, by log table id."""
        return sorted((s for s in self.subscriptions.values() if s.relation == name), key=lambda s: s.table_id)

    def change_logs_of(self, name: str) -> list:
        """The ``ChangeLogSpec``\\ s relation ``name``'s Materialize writes (one per subscription)."""
        return [s.spec() for s in self.subscriptions_of(name)]

    def dependents(self, name: str) -> list:
        return [r.name for r in self.ordered() if name in r.depends_on]

    def ordered(self) -> list:
        """Relations in creation (id) order: every relation after those it reads."""
        return sorted(self.relations.values(), key=lambda r: r.table_id)

    def tables(self) -> list:
        return [r for r in self.ordered() if r.kind == "table"]

    def mvs(self) -> list:
        return [r for r in self.ordered() if r.kind == "mv"]

    def indexes(self) -> list:
        return [r for r in self.ordered() if r.kind == "index"]

    def indexes_of(self, name: str) -> list:
        """The indexes on relation ``name``, oldest first."""
        return [r for r in self.ordered() if r.kind == "index" and r.depends_on == [name]]
