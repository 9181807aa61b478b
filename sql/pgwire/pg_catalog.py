"""Enough of ``pg_catalog`` and ``information_schema`` for psql and psycopg (docs/pgwire.md).

Job: answer the catalog queries clients send -- psql's ``\\d``, ``\\dt``, ``\\dm``, ``\\di``,
``\\dv``, ``\\dn``, ``\\l``, ``\\d NAME`` (its relation lookup, the relation's attributes,
indexes and the many sections Hummock has nothing for; a source is relkind ``f``, a foreign
table whose server is its connector), psycopg's type introspection
(``TypeInfo.fetch``), ``version()``, ``current_schema()`` and friends -- from the database's
SQL catalog, without running them through the engine (which has no regex operators, regclass
casts or system tables). Three tiers, tried in order:

1. the known query shapes of psql 12-18 and psycopg 3, recognised by their text;
2. a small evaluator for single-table ``SELECT`` s over the emulated views (``pg_class``,
   ``pg_namespace``, ``pg_attribute``, ``pg_type``, ``pg_database``, ``pg_tables``,
   ``pg_matviews``, ``pg_views``, ``pg_indexes``, ``information_schema.tables`` /
   ``columns`` / ``schemata``): column lists, ``*``, ``WHERE`` of ``=``, ``<>``, ``IN``,
   ``LIKE``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``, ``ORDER BY`` and ``LIMIT``;
3. a query that reads a catalog that is empty here (constraints other than primary keys,
   policies, triggers, publications, inheritance, statistics ...) gets no rows -- psql joins
   these to pg_class for its ``\\d`` footers, so no row of them means no footer.

Anything else naming a system catalog is ``UnsupportedError`` naming the catalogs it read:
never a made-up answer. One schema, ``public``; relation OIDs are ``16384 + table_id``
(stable across restarts); every value is text (catalog answers go out in text format).

Callers: :mod:`sql.pgwire.server` (before a statement reaches the engine).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hummock import __version__
from stream.numeric_typmod import pg_typmod, type_text

from sql.errors import UnsupportedError
from sql.pgwire import types as PT

OID_BASE = 16384
PG_VERSION = "16.0"
PG_VERSION_NUM = "160000"


@dataclass
class Answer:
    """A catalog answer: ``columns`` as ``(name, type oid)``, ``rows`` of text (None: NULL)."""

    columns: list
    rows: list = field(default_factory=list)

    @property
    def tag(self) -> str:
        return f"SELECT {len(self.rows)}"


@dataclass
class Context:
    """What a catalog answer may show of the session: its catalog, user, database, settings."""

    catalog: object
    user: str
    database: str
    settings: dict
    pid: int


def version_text() -> str:
    return f"PostgreSQL {PG_VERSION} (Hummock {__version__}, a streaming database speaking the Postgres protocol)"


_WORDS = re.compile(r"\bpg_[a-z_]+\b|\binformation_schema\b|\bversion\s*\(|\bcurrent_schema\b|\bcurrent_database\s*\("
                    r"|\bcurrent_user\b|\bsession_user\b|\bcurrent_setting\s*\(|\bcurrent_schemas\s*\(|\bto_regtype\s*\(",
                    re.IGNORECASE)


def mentions_catalog(text: str) -> bool:
    return _WORDS.search(text) is not None


def answer(text: str, params, ctx: Context) -> Answer | None:
    """The answer to ``text`` if it is a catalog query (module docstring), else None."""
    if not mentions_catalog(text):
        return None
    for handler in _SHAPES:
        out = handler(text, params, ctx)
        if out is not None:
            return out
    return _evaluate(text, ctx, params or [])


# --- relations ---------------------------------------------------------------------------------------

#: relkind of each relation kind; a source is ``f`` (Postgres' foreign table: a relation whose rows
#: live outside the database), the one relkind psql both lists in ``\\d`` and describes in full
#: (RisingWave's ``s`` is listed by no psql command); its connector is the "server"
_KIND = {"table": "r", "mv": "m", "index": "i", "source": "f"}
_KIND_NAME = {"r": "table", "m": "materialized view", "i": "index", "v": "view", "f": "source"}


def _relations(ctx: Context) -> list:
    return [r for r in ctx.catalog.ordered() if r.kind in _KIND]


def _oid(rel) -> int:
    return OID_BASE + rel.table_id


def _by_oid(ctx: Context, oid: int):
    for r in _relations(ctx):
        if _oid(r) == oid:
            return r
    return None


def _pk_names(rel) -> list:
    cols = rel.columns
    return [cols[i][0] for i in rel.pk_indices]


def _index_columns(index) -> list:
    cols = index.columns
    return [cols[i][0] for i in index.pk_indices[:max(index.index_columns, 1)]]


def _base_of(rel) -> str | None:
    return rel.depends_on[0] if rel.kind == "index" and rel.depends_on else None


def _name_filter(text: str, column: str):
    """psql's ``column OPERATOR(pg_catalog.~) '^(pattern)$'`` (or ``~``) as a compiled regex."""
    m = re.search(re.escape(column) + r"\s+(?:OPERATOR\(pg_catalog\.~\)|~)\s+'((?:[^']|'')*)'", text)
    if m is None:
        return None
    try:
        return re.compile(m.group(1).replace("''", "'"))
    except re.error:
        return re.compile(re.escape(m.group(1)))


def _aliases(select_list: str) -> list:
    return re.findall(r'\bas\s+"([^"]+)"', select_list, re.IGNORECASE)


def _psql_list(text, params, ctx):
    """psql's ``\\d``, ``\\dt``, ``\\dm``, ``\\di``, ``\\dv`` (and their ``+`` forms)."""
    if "pg_get_userbyid(c.relowner)" not in text or "FROM pg_catalog.pg_class c" not in text:
        return None
    m = re.search(r"c\.relkind IN \(([^)]*)\)", text)
    if m is None:
        return None
    kinds = set(re.findall(r"'(\w)'", m.group(1)))
    names = _aliases(text[:text.index("FROM pg_catalog.pg_class c")])
    pattern = _name_filter(text, "c.relname")
    rows = []
    for rel in _relations(ctx):
        kind = _KIND[rel.kind]
        if kind not in kinds or (pattern is not None and not pattern.search(rel.name)):
            continue
        values = {"Schema": "public", "Name": rel.name, "Type": _KIND_NAME[kind], "Owner": ctx.user,
                  "Table": _base_of(rel), "Persistence": "permanent",
                  "Access method": _access_method(kind), "Size": "0 bytes"}
        rows.append(tuple(values.get(n) for n in names))
    rows.sort(key=lambda r: (r[0] or "", r[1] or ""))
    return Answer([(n, PT.TEXT_OID) for n in names], rows)


def _access_method(kind: str) -> str | None:
    """pg_am's name for a relkind: btree indexes, heap tables and MVs, none for a source (as
    Postgres has none for a foreign table)."""
    return {"i": "btree", "f": None}.get(kind, "heap")


def _psql_lookup(text, params, ctx):
    """psql's ``\\d NAME`` first query: the relations whose name matches the pattern."""
    if not re.match(r"\s*SELECT c\.oid,\s*n\.nspname,\s*c\.relname\s+FROM pg_catalog\.pg_class c", text):
        return None
    pattern = _name_filter(text, "c.relname")
    schema = _name_filter(text, "n.nspname")
    if schema is not None and not schema.search("public"):
        return Answer([("oid", PT.OID_OID), ("nspname", PT.NAME_OID), ("relname", PT.NAME_OID)])
    rows = [(str(_oid(r)), "public", r.name) for r in _relations(ctx) if pattern is None or pattern.search(r.name)]
    return Answer([("oid", PT.OID_OID), ("nspname", PT.NAME_OID), ("relname", PT.NAME_OID)], sorted(rows, key=lambda r: r[2]))


def _oid_in(text: str, prefix: str) -> int | None:
    m = re.search(re.escape(prefix) + r"\s*=\s*'(\d+)'", text)
    return int(m.group(1)) if m else None


def _psql_table_info(text, params, ctx):
    if not text.lstrip().startswith("SELECT c.relchecks, c.relkind"):
        return None
    rel = _by_oid(ctx, _oid_in(text, "WHERE c.oid") or -1)
    names = ["relchecks", "relkind", "relhasindex", "relhasrules", "relhastriggers", "relrowsecurity",
             "relforcerowsecurity", "relhasoids", "relispartition", "reloptions", "reltablespace", "reloftype",
             "relpersistence", "relreplident", "amname"]
    if rel is None:
        return Answer([(n, PT.TEXT_OID) for n in names])
    has_index = bool(rel.kind == "table" and rel.user_pk) or bool(ctx.catalog.indexes_of(rel.name))
    kind = _KIND[rel.kind]
    row = ("0", kind, "t" if has_index else "f", "f", "f", "f", "f", "f", "f", "", "0", "", "p", "d",
           _access_method(kind))
    return Answer([(n, PT.TEXT_OID) for n in names], [row])


def _typmod(rel, i: int):
    """A table column's ``(precision, scale)`` of ``NUMERIC(p, s)`` (sql/column_checks.py), or None."""
    return rel.typmod_of(i) if rel.kind == "table" else None


def _pg_typmod(typmod) -> int:
    """``atttypmod``: -1 without one, ``n + 4`` for VARCHAR(n), Postgres' packing for NUMERIC(p, s)."""
    if not typmod:
        return -1
    return typmod[0] + 4 if len(typmod) == 1 else pg_typmod(*typmod)


def _not_null(rel, i: int) -> bool:
    return rel.kind == "table" and bool(rel.not_null and rel.not_null[i])


def _type_text(rel, i: int, dtype) -> str:
    """``format_type(atttypid, atttypmod)``: ``numeric(5,2)`` for a column with a typmod."""
    typmod = _typmod(rel, i)
    if typmod and len(typmod) == 1:   # VARCHAR(n)
        return f"character varying({typmod[0]})"
    return type_text(*typmod) if typmod else PT.format_type(dtype)


def _psql_attributes(text, params, ctx):
    if "FROM pg_catalog.pg_attribute a" not in text or not re.match(r"\s*SELECT a\.attname,\s*pg_catalog\.format_type",
                                                                    text):
        return None
    rel = _by_oid(ctx, _oid_in(text, "a.attrelid") or -1)
    if "AS is_key" in text:   # \\d INDEX: its key columns
        rows = [] if rel is None or rel.kind != "index" else [
            (name, PT.format_type(dtype), "yes", name) for name, dtype in rel.columns if name in _index_columns(rel)]
        return Answer([(n, PT.TEXT_OID) for n in ("attname", "format_type", "is_key", "indexdef")], rows)
    names = ["attname", "format_type", "default", "attnotnull", "attcollation", "attidentity", "attgenerated"]
    select = text[:text.find("FROM pg_catalog.pg_attribute a")]
    extras = [name for marker, name in _ATTR_EXTRAS if marker in select]   # per relkind and \\d+ (psql)
    names += extras
    if "pg_get_indexdef" in text.split("FROM")[0]:   # \d INDEX: the index's key column definitions
        names.append("indexdef")
    rows = []
    if rel is not None:
        pk = set(_pk_names(rel)) if rel.kind == "table" and rel.user_pk else set()
        visible = rel.visible_columns if rel.kind != "index" else [c for c in rel.columns
                                                                   if c[0] in _index_columns(rel)]
        for i, (name, dtype) in enumerate(visible):
            default = rel.default_of(i) if rel.kind == "table" else None   # pg_attrdef's text (sql/defaults.py)
            row = [name, _type_text(rel, i, dtype), default, "t" if name in pk or _not_null(rel, i) else "f", None,
                   "", ""]
            row += [_attr_extra(extra, dtype) for extra in extras]
            if "indexdef" in names:
                row.append(name)
            rows.append(tuple(row[:len(names)]))
    return Answer([(n, PT.TEXT_OID) for n in names], rows)


#: the columns psql adds to its ``\\d`` attribute query after ``attgenerated``, in its order, each
#: when its marker is in the select list: FDW options for a foreign table (a source), then with
#: ``\\d+`` the storage, the compression (tables and MVs only), the statistics target, the comment
_ATTR_EXTRAS = (("AS attfdwoptions", "attfdwoptions"), ("a.attstorage", "attstorage"),
                ("a.attcompression", "attcompression"), ("attstattarget", "attstattarget"),
                ("col_description", "col_description"))


def _attr_extra(name: str, dtype) -> str | None:
    if name == "attstorage":
        return "p" if PT.type_size(dtype) > 0 else "x"
    return "" if name in ("attfdwoptions", "attcompression") else None


def _connector_options(rel) -> tuple:
    """A source's ``(connector, its other WITH options)``: the foreign table's server and options."""
    options = dict(rel.connector or {})
    return options.pop("connector", ""), options


def _server_oid(connector: str) -> int:
    """The OID of a connector's foreign server: fixed per connector (stream/sources/connector.py's
    order), below the relations' ``OID_BASE``."""
    from stream.sources.connector import CONNECTORS

    return OID_BASE - 100 + (CONNECTORS.index(connector) if connector in CONNECTORS else len(CONNECTORS))


def _text_array(items: list) -> str:
    """Postgres' ``text[]`` output: ``{a,b}``, an element quoted when empty, ``NULL`` or holding
    braces, commas, quotes, backslashes or white space."""
    def quote(v: str) -> str:
        if v == "" or v.upper() == "NULL" or re.search(r'[{},"\\\s]', v):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return v
    return "{" + ",".join(quote(v) for v in items) + "}"


def _psql_foreign_table(text, params, ctx):
    """psql's ``\\d SOURCE`` footer: the foreign table's server and options -- the source's
    connector and its other WITH options (psql needs exactly one row, else it stops describing)."""
    if "FROM pg_catalog.pg_foreign_table f" not in text or "pg_catalog.pg_foreign_server s" not in text:
        return None
    rel = _by_oid(ctx, _oid_in(text, "f.ftrelid") or -1)
    cols = [("srvname", PT.NAME_OID), ("array_to_string", PT.TEXT_OID)]
    if rel is None or rel.kind != "source":
        return Answer(cols)
    server, options = _connector_options(rel)
    return Answer(cols, [(server, ", ".join(f"{_quote_ident(k)} {_quote_literal(v)}" for k, v in options.items()))])


def _quote_ident(name: str) -> str:
    """``pg_catalog.quote_ident``: bare when a plain lower-case identifier, else double-quoted."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) else '"' + name.replace('"', '""') + '"'


def _quote_literal(value) -> str:
    """``pg_catalog.quote_literal`` of a text value (``E'...'`` when it holds a backslash)."""
    text = str(value).replace("'", "''")
    return "E'" + text.replace("\\", "\\\\") + "'" if "\\" in text else f"'{text}'"


def _psql_indexes(text, params, ctx):
    if "pg_catalog.pg_index i" not in text or not text.lstrip().startswith("SELECT c2.relname, i.indisprimary"):
        return None
    rel = _by_oid(ctx, _oid_in(text, "WHERE c.oid") or -1)
    names = ["relname", "indisprimary", "indisunique", "indisclustered", "indisvalid", "pg_get_indexdef",
             "pg_get_constraintdef", "contype", "condeferrable", "condeferred", "indisreplident", "reltablespace",
             "conperiod"]
    rows = []
    if rel is not None:
        if rel.kind == "table" and rel.user_pk:
            cols = ", ".join(_pk_names(rel))
            rows.append((f"{rel.name}_pkey", "t", "t", "f", "t",
                         f"CREATE UNIQUE INDEX {rel.name}_pkey ON public.{rel.name} USING btree ({cols})",
                         f"PRIMARY KEY ({cols})", "p", "f", "f", "f", "0", "f"))
        for index in sorted(ctx.catalog.indexes_of(rel.name), key=lambda r: r.name):
            cols = ", ".join(_index_columns(index))
            rows.append((index.name, "f", "f", "f", "t",
                         f"CREATE INDEX {index.name} ON public.{rel.name} USING btree ({cols})",
                         None, None, None, None, "f", "0", None))
    return Answer([(n, PT.TEXT_OID) for n in names], [r[:len(names)] for r in rows])


def _psql_index_info(text, params, ctx):
    """psql's ``\\d INDEX`` second query: the index's flags, access method and table."""
    if not text.lstrip().startswith("SELECT i.indisunique, i.indisprimary") or "pg_catalog.pg_index i" not in text:
        return None
    rel = _by_oid(ctx, _oid_in(text, "AND c.oid") or -1)
    names = ["indisunique", "indisprimary", "indisclustered", "indisvalid", "condeferrable", "condeferred",
             "indisreplident"] + (["indnullsnotdistinct"] if "indnullsnotdistinct" in text else []) + \
        ["amname", "relname", "pg_get_expr"]
    rows = []
    if rel is not None and rel.kind == "index":
        rows.append(tuple(["f", "f", "f", "t", "f", "f", "f"] + (["f"] if len(names) == 11 else [])
                          + ["btree", _base_of(rel), None]))
    return Answer([(n, PT.TEXT_OID) for n in names], rows)


def _psql_viewdef(text, params, ctx):
    m = re.search(r"pg_get_viewdef\('?(\d+)'?", text)
    if m is None or "FROM" in text.upper().split("PG_GET_VIEWDEF")[1][:40]:
        return None
    rel = _by_oid(ctx, int(m.group(1)))
    return Answer([("pg_get_viewdef", PT.TEXT_OID)], [((rel.definition if rel is not None else None),)])


def _psql_schemas(text, params, ctx):
    if "FROM pg_catalog.pg_namespace n" not in text or "pg_get_userbyid(n.nspowner)" not in text:
        return None
    names = _aliases(text[:text.index("FROM pg_catalog.pg_namespace n")])
    values = {"Name": "public", "Owner": ctx.user}
    return Answer([(n, PT.TEXT_OID) for n in names], [tuple(values.get(n) for n in names)])


def _psql_databases(text, params, ctx):
    if "FROM pg_catalog.pg_database d" not in text or "pg_get_userbyid(d.datdba)" not in text:
        return None
    names = _aliases(text[:text.index("FROM pg_catalog.pg_database d")])
    values = {"Name": ctx.database, "Owner": ctx.user, "Encoding": "UTF8", "Locale Provider": "libc",
              "Collate": "C", "Ctype": "C"}
    return Answer([(n, PT.TEXT_OID) for n in names], [tuple(values.get(n) for n in names)])


def _psycopg_typeinfo(text, params, ctx):
    """psycopg's ``TypeInfo.fetch``: ``... FROM pg_type t WHERE t.oid = to_regtype($1)``."""
    if not re.search(r"FROM pg_type t\s+WHERE t\.oid = (?:to_regtype|\$1::regtype)", text):
        return None
    cols = [("name", PT.NAME_OID), ("oid", PT.OID_OID), ("array_oid", PT.OID_OID), ("regtype", PT.TEXT_OID),
            ("delimiter", PT.CHAR_OID)]
    name = params[0] if params else None
    m = re.search(r"to_regtype\('((?:[^']|'')*)'\)", text)
    if name is None and m is not None:
        name = m.group(1).replace("''", "'")
    row = PT.lookup_type(str(name)) if name is not None else None
    if row is None:
        return Answer(cols)
    oid, typname, _, arr = row
    return Answer(cols, [(typname, str(oid), str(arr), _regtype(oid, typname), ",")])


def _regtype(oid: int, typname: str) -> str:
    for kind, entry in PT.PG_TYPES.items():
        if entry[0] == oid:
            return entry[3]
        if entry[4] == oid:
            return entry[3] + "[]"
    return typname


_FUNCS = {
    "version": lambda ctx, arg: version_text(),
    "current_schema": lambda ctx, arg: "public",
    "current_database": lambda ctx, arg: ctx.database,
    "current_user": lambda ctx, arg: ctx.user,
    "session_user": lambda ctx, arg: ctx.user,
    "user": lambda ctx, arg: ctx.user,
    "current_catalog": lambda ctx, arg: ctx.database,
    "pg_backend_pid": lambda ctx, arg: str(ctx.pid),
    "current_setting": lambda ctx, arg: ctx.settings.get((arg or "").lower()),
    "current_schemas": lambda ctx, arg: "{public}" if (arg or "").lower() in ("false", "f") else "{pg_catalog,public}",
    "pg_is_in_recovery": lambda ctx, arg: "f",
}
_FUNC_ITEM = re.compile(r"\s*(?:pg_catalog\.)?(\w+)\s*(?:\(\s*(?:'((?:[^']|'')*)'|(\w+))?\s*\))?"
                        r"(?:\s+(?:as\s+)?(\"[^\"]+\"|\w+))?\s*$", re.IGNORECASE)


def _functions(text, params, ctx):
    """``SELECT version()``, ``current_schema()``, ``current_setting('x')`` ... (a list of them)."""
    m = re.fullmatch(r"\s*select\s+(.*?)\s*;?\s*", text, re.IGNORECASE | re.DOTALL)
    if m is None or re.search(r"\bfrom\b", m.group(1), re.IGNORECASE):
        return None
    cols, row = [], []
    for item in _split_commas(m.group(1)):
        f = _FUNC_ITEM.fullmatch(item)
        if f is None or f.group(1).lower() not in _FUNCS:
            return None
        name = f.group(1).lower()
        if name in ("version", "current_database", "current_schema", "pg_backend_pid", "current_setting",
                    "current_schemas", "pg_is_in_recovery") and "(" not in item:
            return None
        arg = (f.group(2) or "").replace("''", "'") if f.group(2) is not None else f.group(3)
        alias = f.group(4)
        cols.append(((alias.strip('"') if alias else name), 23 if name == "pg_backend_pid" else PT.TEXT_OID))
        row.append(_FUNCS[name](ctx, arg))
    return Answer(cols, [tuple(row)])


def _split_commas(s: str) -> list:
    out, depth, quoted, at = [], 0, False, 0
    for i, c in enumerate(s):
        if c == "'":
            quoted = not quoted
        elif not quoted and c == "(":
            depth += 1
        elif not quoted and c == ")":
            depth -= 1
        elif not quoted and depth == 0 and c == ",":
            out.append(s[at:i])
            at = i + 1
    out.append(s[at:])
    return out


def _psql_types(text, params, ctx):
    """psql's ``\\dT``: user-defined types -- Hummock has none (the built-ins live in pg_catalog,
    which ``\\dT`` leaves out)."""
    if "FROM pg_catalog.pg_type t" not in text or "pg_catalog.format_type(t.oid, NULL)" not in text:
        return None
    names = _aliases(text[:text.index("FROM pg_catalog.pg_type t")])
    return Answer([(n, PT.TEXT_OID) for n in names])


_SHAPES = (_psql_types, _functions, _psql_list, _psql_lookup, _psql_table_info, _psql_attributes, _psql_indexes,
           _psql_index_info, _psql_viewdef, _psql_foreign_table,
           _psql_schemas, _psql_databases, _psycopg_typeinfo)


# --- tier 2 and 3: single-table SELECTs over emulated views ----------------------------------------------

#: catalogs that hold nothing for Hummock: a query reading only these gets no rows
EMPTY_CATALOGS = frozenset({
    "pg_constraint", "pg_policy", "pg_policies", "pg_trigger", "pg_rewrite", "pg_inherits", "pg_publication",
    "pg_publication_rel", "pg_publication_namespace", "pg_statistic_ext", "pg_attrdef", "pg_description",
    "pg_depend", "pg_event_trigger", "pg_partitioned_table",
    "pg_sequence", "pg_sequences", "pg_extension", "pg_enum", "pg_range", "pg_collation", "pg_am",
    "pg_roles", "pg_user", "pg_proc", "pg_operator", "pg_cast", "pg_prepared_statements", "pg_stat_activity",
    "pg_locks", "pg_shdescription", "pg_tablespace", "pg_auth_members", "pg_init_privs", "pg_seclabel",
    "pg_subscription", "pg_aggregate", "pg_opclass", "pg_language", "pg_conversion", "pg_trigger",
    "pg_get_keywords", "pg_available_extensions", "pg_partition_ancestors", "generate_series", "unnest"})


#: information_schema.tables.table_type per relation kind (a source as Postgres' foreign table)
_TABLE_TYPE = {"table": "BASE TABLE", "mv": "MATERIALIZED VIEW", "source": "FOREIGN"}


def _views(ctx: Context) -> dict:
    """name -> (columns, rows) of the emulated catalog views (module docstring), values as text."""
    rels = _relations(ctx)
    pg_class = (["oid", "relname", "relnamespace", "relkind", "relowner", "relhasindex", "relpersistence",
                 "relnatts", "reltuples", "relispartition", "relam"],
                [(str(_oid(r)), r.name, "2200", _KIND[r.kind], "10",
                  "t" if (r.kind == "table" and r.user_pk) or ctx.catalog.indexes_of(r.name) else "f", "p",
                  str(len(r.visible_columns)), "-1", "f", {"index": "403", "source": "0"}.get(r.kind, "2"))
                 for r in rels])
    attrs = []
    columns = []
    for r in rels:
        pk = set(_pk_names(r)) if r.kind == "table" and r.user_pk else set()
        for n, (name, dtype) in enumerate(r.visible_columns, start=1):
            required = name in pk or _not_null(r, n - 1)
            typmod = _typmod(r, n - 1)
            attrs.append((str(_oid(r)), name, str(PT.type_oid(dtype)), str(n), "t" if required else "f", "f",
                          str(_pg_typmod(typmod)), str(PT.type_size(dtype)), "f"))
            if r.kind != "index":
                columns.append((ctx.database, "public", r.name, name, str(n), None, "NO" if required else "YES",
                                PT.format_type(dtype), PT.PG_TYPES.get(dtype.kind, (0, "text"))[1]))
    types = [(str(oid), name, "11", str(size), "b", ",", str(arr), "0")
             for oid, name, size, arr in PT.all_types()]
    return {
        "pg_class": pg_class,
        "pg_namespace": (["oid", "nspname", "nspowner"],
                         [("11", "pg_catalog", "10"), ("2200", "public", "10"),
                          ("13000", "information_schema", "10")]),
        "pg_attribute": (["attrelid", "attname", "atttypid", "attnum", "attnotnull", "attisdropped", "atttypmod",
                          "attlen", "atthasdef"], attrs),
        "pg_type": (["oid", "typname", "typnamespace", "typlen", "typtype", "typdelim", "typarray", "typelem"],
                    types),
        "pg_database": (["oid", "datname", "datdba", "encoding", "datcollate", "datctype", "datallowconn"],
                        [("16383", ctx.database, "10", "6", "C", "C", "t")]),
        "pg_tables": (["schemaname", "tablename", "tableowner", "tablespace", "hasindexes", "hasrules",
                       "hastriggers", "rowsecurity"],
                      [("public", r.name, ctx.user, None, "t" if r.user_pk else "f", "f", "f", "f")
                       for r in rels if r.kind == "table"]),
        "pg_matviews": (["schemaname", "matviewname", "matviewowner", "tablespace", "hasindexes", "ispopulated",
                         "definition"],
                        [("public", r.name, ctx.user, None, "f", "t", r.definition) for r in rels if r.kind == "mv"]),
        "pg_views": (["schemaname", "viewname", "viewowner", "definition"], []),
        "pg_indexes": (["schemaname", "tablename", "indexname", "tablespace", "indexdef"],
                       [("public", _base_of(r), r.name, None,
                         f"CREATE INDEX {r.name} ON public.{_base_of(r)} USING btree ({', '.join(_index_columns(r))})")
                        for r in rels if r.kind == "index"]),
        "pg_settings": (["name", "setting"], sorted((k, v) for k, v in ctx.settings.items())),
        # sources as foreign tables (relkind f): one server per connector in use, the WITH options
        # (but the connector) as the table's options, text[] of key=value as Postgres stores them
        "pg_foreign_server": (["oid", "srvname", "srvowner", "srvfdw", "srvtype", "srvversion", "srvoptions"],
                              [(str(_server_oid(n)), n, "10", "0", None, None, None)
                               for n in sorted({_connector_options(r)[0] for r in rels if r.kind == "source"})]),
        "pg_foreign_table": (["ftrelid", "ftserver", "ftoptions"],
                             [(str(_oid(r)), str(_server_oid(_connector_options(r)[0])),
                               _text_array([f"{k}={v}" for k, v in _connector_options(r)[1].items()]))
                              for r in rels if r.kind == "source"]),
        "information_schema.tables": (["table_catalog", "table_schema", "table_name", "table_type"],
                                      [(ctx.database, "public", r.name, _TABLE_TYPE[r.kind])
                                       for r in rels if r.kind != "index"]),
        "information_schema.columns": (["table_catalog", "table_schema", "table_name", "column_name",
                                        "ordinal_position", "column_default", "is_nullable", "data_type",
                                        "udt_name"], columns),
        "information_schema.schemata": (["catalog_name", "schema_name", "schema_owner"],
                                        [(ctx.database, "public", ctx.user)]),
    }


def _evaluate(text: str, ctx: Context, params: list = ()) -> Answer:
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(text, read="postgres")
    except Exception:   # sqlglot raises several types; any of them: not a query we can read
        tree = None
    tables = [] if tree is None else list(tree.find_all(exp.Table))
    names = {_table_name(t) for t in tables} - {""}
    if tree is not None and any(n.split(".")[-1] in EMPTY_CATALOGS for n in names):
        return Answer([(_column_name(e, i), PT.TEXT_OID) for i, e in enumerate(tree.expressions)]
                      if isinstance(tree, exp.Select) else [("?column?", PT.TEXT_OID)])
    views = _views(ctx)
    if isinstance(tree, exp.Select) and len(tables) == 1 and not tree.args.get("joins") \
            and _table_name(tables[0]) in views and not tree.args.get("group"):
        out = _run_select(tree, tables[0], views[_table_name(tables[0])], params)
        if out is not None:
            return out
    shown = ", ".join(sorted(names)) or "the system catalogs"
    raise UnsupportedError(f"this catalog query is not supported by Hummock's pgwire server (it reads {shown}); "
                           "supported: psql's \\d commands, single-table SELECTs of pg_class, pg_namespace, "
                           "pg_attribute, pg_type, pg_tables, pg_matviews, pg_indexes, pg_foreign_table, "
                           "pg_foreign_server, information_schema.tables/columns/schemata (docs/pgwire.md)")


def _table_name(t) -> str:
    db = t.args.get("db")
    schema = db.name.lower() if db is not None else ""
    name = t.name.lower()
    return f"information_schema.{name}" if schema == "information_schema" else name


def _column_name(e, i) -> str:
    name = e.alias_or_name
    return name if name else "?column?"


def _param_text(value) -> str | None:
    """A bound parameter ($n) as the catalog's text: booleans as ``t``/``f``, NULL as None."""
    if value is None or isinstance(value, str):
        return value
    return ("t" if value else "f") if isinstance(value, bool) else str(value)


def _run_select(tree, table, view, params: list = ()) -> Answer | None:
    from sqlglot import exp

    columns, rows = view
    alias = table.alias_or_name.lower()
    index = {c: i for i, c in enumerate(columns)}

    def value(node, row):
        if isinstance(node, exp.Column):
            if node.table and node.table.lower() not in (alias, table.name.lower()):
                raise _Unsupported
            i = index.get(node.name.lower())
            if i is None:
                raise _Unsupported
            return row[i]
        if isinstance(node, exp.Literal):
            return node.this
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Parameter) and isinstance(node.this, exp.Literal) and node.this.this.isdigit():
            n = int(node.this.this)   # $n of an extended-protocol query (psycopg binds this way)
            if not 1 <= n <= len(params):
                raise _Unsupported
            return _param_text(params[n - 1])
        if isinstance(node, exp.Boolean):
            return "t" if node.this else "f"
        if isinstance(node, exp.Cast):
            return value(node.this, row)
        if isinstance(node, exp.Paren):
            return value(node.this, row)
        raise _Unsupported

    def truth(node, row) -> bool:
        if isinstance(node, exp.And):
            return truth(node.left, row) and truth(node.right, row)
        if isinstance(node, exp.Or):
            return truth(node.left, row) or truth(node.right, row)
        if isinstance(node, exp.Not):
            return not truth(node.this, row)
        if isinstance(node, exp.Paren):
            return truth(node.this, row)
        if isinstance(node, exp.Is):
            return value(node.this, row) is None
        if isinstance(node, (exp.EQ, exp.NEQ)):
            a, b = value(node.left, row), value(node.right, row)
            if a is None or b is None:
                return False
            return (a == b) == isinstance(node, exp.EQ)
        if isinstance(node, exp.In):
            a = value(node.this, row)
            return a is not None and a in [value(e, row) for e in node.expressions]
        if isinstance(node, (exp.Like, exp.ILike)):
            a, pattern = value(node.this, row), value(node.expression, row)
            if a is None or pattern is None:
                return False
            regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
            return re.fullmatch(regex, a, re.IGNORECASE if isinstance(node, exp.ILike) else 0) is not None
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        raise _Unsupported

    try:
        where = tree.args.get("where")
        kept = [r for r in rows if where is None or truth(where.this, r)]
        out_cols, getters = [], []
        for i, e in enumerate(tree.expressions):
            if isinstance(e, exp.Star):
                for c in columns:
                    out_cols.append(c)
                    getters.append(lambda r, j=index[c]: r[j])
                continue
            node = e.this if isinstance(e, exp.Alias) else e
            out_cols.append(_column_name(e, i))
            getters.append(lambda r, node=node: value(node, r))
        result = [tuple(g(r) for g in getters) for r in kept]
        order = tree.args.get("order")
        if order is not None:
            for key in reversed(order.expressions):
                node = key.this
                if isinstance(node, exp.Literal) and node.is_int:
                    pos = int(node.this) - 1
                    fn = (lambda r, pos=pos: r[pos])
                else:   # a column of the view: sort by its value in the source row
                    src = {id(r2): r for r, r2 in zip(kept, result)}
                    fn = (lambda r, node=node, src=src: value(node, src[id(r)]))
                result.sort(key=lambda r: (_sort_key(fn(r))), reverse=bool(key.args.get("desc")))
        limit = tree.args.get("limit")
        if limit is not None:
            result = result[:int(limit.expression.this)]
    except (_Unsupported, KeyError, ValueError, AttributeError):
        return None
    return Answer([(c, PT.TEXT_OID) for c in out_cols], result)


def _sort_key(v):
    if v is None:
        return (1, 0, "")
    try:
        return (0, int(v), "")
    except ValueError:
        return (0, 0, v)


class _Unsupported(Exception):
    """A node the tier-2 evaluator does not handle (the query then falls to tier 3 or an error)."""
