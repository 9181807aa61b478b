"""Facts about the nodes of a parsed statement, computed once per node instead of once per bind.

Job: :func:`pg_text` is ``node.sql(dialect="postgres")``, the text the binder matches aggregate
calls, GROUP BY expressions, ORDER BY targets and windows by. sqlglot generates it from a deep
copy of the subtree (~0.1 ms for ``sum(x)``), and a GROUP BY query asked for each aggregate's
text up to three times per execution. :func:`freeze` marks the tree of a statement
:mod:`sql.parse` cached; on a node of a frozen tree the text is generated once and kept on the
node (its sqlglot ``meta``), so re-running a cached statement generates none.

Invariants (why a kept text is never stale):
- The text is a function of the node's subtree only (sqlglot generates it from a parentless
  copy), never of the catalog, the parameters' values (``$1`` stays ``$1``) or the session.
- A text is kept only on a node of a frozen tree: the parse cache's, which nobody mutates (a
  rewrite copies first: sql/bind/jsonb_select.py, regexp_rows.py, named_windows.py, ...).
- It is read back only while the node's subtree is unchanged: :func:`freeze` computes sqlglot's
  structural hash of every node, and sqlglot's mutators (``set``, ``append``, ``replace``, hence
  ``pop``) clear the cached hash of the changed node and of each ancestor. A kept text is read
  only while the node's ``_hash`` is still set.
- It is read back only by the node it was computed for. A deep copy (or a pickle) of a node
  gets None in place of a kept value (:class:`_Kept`), and each kept value carries
  ``id(node)``: a copy is another object alive beside its original, so its id differs. The
  frozen mark of a root is ``id(root)`` too: a copied root is not frozen.

Callers: :mod:`sql.parse` (``freeze``), the binders in :mod:`sql.bind` (``pg_text``).
"""

from __future__ import annotations

from sqlglot import exp

_FROZEN = "hummock_frozen"   # meta key on a frozen root: id(root)
_TEXT = "hummock_pg_text"    # meta key on a node: its Postgres text (a _Kept); other facts: kept()


def freeze(root) -> None:
    """Mark ``root``, the tree of a cached statement, as never mutated (module docstring), and
    compute every node's structural hash (the mark of an unchanged subtree)."""
    if not isinstance(root, exp.Expression):
        return
    hash(root)
    root.meta[_FROZEN] = id(root)


def frozen(node) -> bool:
    """Whether ``node`` belongs to a frozen tree and its subtree is unchanged since."""
    if node._hash is None:
        return False
    while node.parent is not None:
        node = node.parent
    return node.meta_get(_FROZEN) == id(node)


def kept(node, key: str, compute):
    """``compute(node)``, a function of ``node``'s subtree only, computed once per node of a
    frozen tree and kept in its ``meta`` under ``key`` (each time on any other node). An
    exception is never kept: it is raised again by the next call. The value may hold nodes
    of the subtree: a copy or a pickle of the node carries no kept value (:class:`_Kept`)."""
    got = node.meta_get(key)
    if got is not None and got.owner == id(node) and node._hash is not None:
        return got.value
    value = compute(node)
    if frozen(node):
        node.meta[key] = _Kept(id(node), value)
    return value


class _Kept:
    """A kept value in a node's ``meta``. sqlglot deep-copies ``meta`` with the node and its
    serde pickles it: both get None here, so a copy computes its own facts and the value's
    nodes are never copied or pickled along."""

    __slots__ = ("owner", "value")

    def __init__(self, owner: int, value):
        self.owner, self.value = owner, value

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return (_none, ())


def _none():
    return None


def pg_text(node) -> str:
    """``node.sql(dialect="postgres")``, generated once per node of a frozen tree."""
    return kept(node, _TEXT, _generate)


def _generate(node) -> str:
    return node.sql(dialect="postgres")
