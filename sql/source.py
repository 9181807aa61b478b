"""Sources and tables with a connector (docs/sql.md "Sources"): ``CREATE SOURCE name (cols) WITH
(connector = ...)`` and ``CREATE TABLE name (cols) WITH (connector = ...)``.

Job: read a CREATE's ``WITH (...)`` options into a ``{key: text}`` dict, check them against the
connector (:func:`stream.sources.connector.make_connector`: an unknown connector is an
``UnsupportedError``, an unknown or malformed option a ``BindError``, each naming it and listing
what is known -- never ignored), and turn the new relation into a source (kind ``"source"``) or
a table fed by the connector: its options go to ``Relation.connector`` (``properties.sql.connector``
in the catalog record) and a fresh table id for the connector's offset goes to ``internal_ids``.

A source stores no rows of its own: MVs read the rows its connector emits (each barrier the next
batch; docs/sql.md); a batch query reading it directly is refused (:func:`refuse_source_scans`),
as is DML into it -- except INSERT (and COPY FROM, ``insert_arrow``) into a source with the
``push`` connector, whose rows come from DML only (:func:`takes_inserts`; it has no offset table).
A table with a connector stores its rows as any table (and takes DML too).

Invariants: a source has no primary key (its hidden ``_row_id`` is the connector's row ordinal);
WITH options without a ``connector`` are refused.

Callers: :mod:`sql.statements` (CREATE TABLE / SOURCE, batch SELECT), :mod:`sql.build`.
"""

from __future__ import annotations

from sqlglot import exp

from stream.sources.connector import ConnectorError, make_connector

from sql.errors import BindError, UnsupportedError, error_at


def with_options(node) -> dict | None:
    """The ``WITH (key = value, ...)`` options of a CREATE (None when it has none)."""
    props = node.args.get("properties")
    items = [p for p in (props.expressions if props is not None else []) if type(p) is exp.Property]
    if not items:
        return None
    out = {}
    for p in items:
        key = _key(p.this)
        value = p.args.get("value")
        text = value.this if isinstance(value, exp.Literal) else (value.name if value is not None else "")
        if key in out:
            raise error_at(BindError, f"option {key!r} given twice", p)
        out[key] = str(text)
    return out


def _key(node) -> str:
    if isinstance(node, exp.Literal):
        return node.this
    if isinstance(node, exp.Dot):
        return f"{_key(node.this)}.{_key(node.expression)}"
    if isinstance(node, exp.Identifier) and node.quoted:
        return node.this
    return node.name.lower()


def refuse_with_options(node, stmt, what: str) -> None:
    """``what`` (CREATE TABLE ... AS query, CREATE MATERIALIZED VIEW) takes no WITH options and
    no SOURCE: refused by name rather than ignored."""
    if stmt.options.get("source"):
        raise error_at(UnsupportedError, "CREATE SOURCE ... AS query is not supported (a source's rows come "
                                         "from its connector: CREATE SOURCE s (cols) WITH (connector = ...))", node)
    options = with_options(node)
    if options is not None:
        raise error_at(UnsupportedError, f"WITH ({', '.join(options)}) on {what} is not supported (connectors "
                                         "feed CREATE SOURCE and CREATE TABLE with columns)", node)


def attach_connector(db, new, rel, node, stmt) -> None:
    """Make the new relation ``rel`` (a table built by CREATE TABLE / SOURCE, not yet added to
    the catalog copy ``new``) a source or a connector-fed table (module docstring); nothing
    when the CREATE has no WITH options."""
    options = with_options(node)
    source = bool(stmt.options.get("source"))
    if options is None:
        if source:
            raise error_at(BindError, "CREATE SOURCE needs WITH (connector = '...') (connectors: datagen, nexmark, "
                                      "posix_fs, push)", node)
        return
    if "connector" not in options:
        raise error_at(BindError, f"WITH options ({', '.join(options)}) need a connector: WITH (connector = "
                                  "'datagen' | 'nexmark' | 'posix_fs' | 'push', ...)", node)
    if source and rel.user_pk:
        raise error_at(UnsupportedError, "a source has no primary key (its rows are appended; declare a TABLE "
                                         "with the connector to keep rows by key)", node)
    if getattr(db, "runtime", "in_process") == "spark":
        raise error_at(UnsupportedError, "connectors run in the in-process runtime only, not on Spark", node)
    options["connector"] = options["connector"].lower()
    check_options(options, rel.columns, rel.n_visible if rel.row_id else None, node)
    if options["connector"] == "push" and not source:
        raise error_at(UnsupportedError, "connector 'push' feeds a SOURCE (CREATE SOURCE s (cols) WITH (connector = "
                                         "'push')): a table takes INSERT as it is", node)
    rel.connector = options
    rel.internal_ids = [] if options["connector"] == "push" else [new.allocate_id()]   # push: no offset
    if source:
        rel.kind = "source"


def is_push(rel) -> bool:
    """Whether ``rel`` is a source with the ``push`` connector (its rows come from DML)."""
    return rel.kind == "source" and rel.connector is not None and rel.connector.get("connector") == "push"


def kind_name(rel) -> str:
    """What DML refuses to write into, named (a source's rows come from its connector only; a
    push source takes INSERTs but keeps no rows to update or delete)."""
    if is_push(rel):
        return "push source (it stores no rows)"
    return {"source": "source (its connector writes it)", "index": "index"}.get(rel.kind, "materialized view")


def takes_inserts(rel) -> bool:
    """Whether INSERT, COPY FROM and ``insert_arrow`` may write into ``rel``: a table, or a push
    source (module docstring)."""
    return rel.kind == "table" or is_push(rel)


def check_options(options: dict, columns, row_id_index, node=None):
    """The connector of ``options`` for these columns; its refusals as SQL errors."""
    try:
        return make_connector(options, columns, row_id_index)
    except ConnectorError as exc:
        cls = UnsupportedError if exc.what == "connector" else BindError
        if node is not None:
            raise error_at(cls, str(exc), node) from None
        raise cls(str(exc)) from None


def refuse_source_scans(plan) -> None:
    """A batch query reading a source directly: ``UnsupportedError`` naming it (a source keeps
    no rows; an MV over it, or a table with the connector, does)."""
    from sql.plan import nodes as P
    stack = [plan]
    while stack:
        n = stack.pop()
        if isinstance(n, P.Scan) and n.relation.kind == "source":
            keep = "an APPEND ONLY table" if is_push(n.relation) else "a TABLE with its connector"
            raise UnsupportedError(f"{n.relation.name} is a source: it stores no rows to query (create a "
                                   f"materialized view over it, or {keep} to keep the rows)")
        stack.extend(n.inputs)


def connector_source(builder, rel, src):
    """The :class:`~stream.sources.connector.ConnectorSource` of relation ``rel`` over its table
    source ``src`` (sql/build.py), its offset in table ``rel.internal_ids[0]``."""
    from relational.state_table import StateTable
    from stream.sources.connector import OFFSET_COLUMNS, ConnectorSource
    from stream.sources.files import FileSource, PosixFs
    from hummock.errors import CorruptionError
    wanted = 1 + (getattr(rel, "watermark", None) is not None)   # a watermark's state table comes last
    if len(rel.internal_ids) != wanted:
        raise CorruptionError(f"{rel.kind} {rel.name}: a connector needs one internal table (its offset), "
                              f"{len(rel.internal_ids) - wanted + 1} stored", object=rel.name)
    connector = check_options(dict(rel.connector), rel.columns, rel.n_visible if rel.row_id else None)
    if isinstance(connector, PosixFs):   # the files read, not a number (stream/sources/files.py)
        table = StateTable(builder.store, rel.internal_ids[0], connector.state_columns, [0], name=f"{rel.name}_files")
        return FileSource(src.executor, connector, table)
    table = StateTable(builder.store, rel.internal_ids[0], OFFSET_COLUMNS, [0], name=f"{rel.name}_offset")
    return ConnectorSource(src.executor, connector, table)
