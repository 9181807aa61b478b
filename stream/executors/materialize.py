"""Materialize: writes a stream into the state table of a materialized view or a table, keyed
by its pk (seed 000: ``mv | table_id | pk | materialized value``), and passes the applied
changes downstream (MV on MV).

Conflict behaviours (``conflict``), for tables whose pk comes from the user:

- ``"no_check"`` (MVs; the input's stream key is the pk, so the stream is consistent): the chunk
  goes to ``StateTable.write_chunk`` as it is (ops, columns, visibility; no per-row Python);
  into a relaxed table (``consistent=False``, where an insert over a row replaces it) an update
  pair that keeps its pk is written as the insert of its new row (``_upserts``).
  With a strict state table (``consistent=True``) an insert of an existing pk or a delete of a
  missing one raises :class:`~stream.errors.InconsistentStreamError` naming this executor and
  the pk; the table's write is all or nothing, so none of the chunk's rows is applied and the
  committed state is untouched.
- ``"overwrite"`` (the default for tables with a pk; upsert): an insert of an existing pk
  replaces the row (emitted as U-/U+ of the old and new row); a delete removes whatever row the
  pk has (the stored row is emitted), a delete of a missing pk does nothing.
- ``"ignore"``: an insert of an existing pk is dropped; deletes as ``overwrite``.
- ``"do_update_if_not_null"``: an insert of an existing pk updates only the columns whose new
  value is not NULL; deletes as ``overwrite``.
With a conflict behaviour the chunk's pks are read in one ``get_rows`` call; a chunk of inserts
of distinct keys none of which exists is passed on as it is, otherwise the rows are
resolved in order in Python (one chunk may touch a pk several times); the resolved
changes -- consistent with the state by construction -- are written with one ``write_chunk``
and are this executor's output.

Change logs (``change_logs``: :class:`~relational.change_log.ChangeLogSpec`\\ s, one per
subscription of the relation): every change this executor applies (its output) is also
recorded in a :class:`~relational.change_log.ChangeLogWriter`, which writes the epoch's net
changes per pk into the log table at each barrier (at ``prev_epoch``, beside the state table's
commit) and advances the log's retention watermark. Nothing is recorded without a spec.

Callers: the planner (CREATE TABLE / CREATE MATERIALIZED VIEW; ``sql/build.py`` passes
``SqlCatalog.change_logs_of(name)``), the Spark pipeline's tasks (``sql/spark_pipeline/task.py``), tests.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.change_log import ChangeLogWriter
from relational.errors import InconsistentOpError
from relational.types import TypeKind
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk, StreamChunkBuilder
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import UnaryExecutor

CONFLICT_BEHAVIOURS = ("no_check", "overwrite", "ignore", "do_update_if_not_null")


class Materialize(UnaryExecutor):
    """Writes its input into ``table`` (a StateTable with the input's schema) and passes the
    applied changes on (module docstring)."""

    def __init__(self, input, table, conflict: str = "no_check", identity: str | None = None, change_logs=()):
        identity = identity or f"Materialize({table.name})"
        if conflict not in CONFLICT_BEHAVIOURS:
            raise ExecutorError(identity, f"conflict must be one of {CONFLICT_BEHAVIOURS}, got {conflict!r}")
        if list(table.types) != list(input.schema.types):
            raise ExecutorError(identity, f"the table's columns {table.types} do not match the input {input.schema!r}")
        pk = list(table.serde.pk_indices)
        super().__init__(input, stream_key=pk, identity=identity)
        self.table = table
        self.conflict = conflict
        self.pk_indices_ = pk
        self.change_logs = [ChangeLogWriter(table.store, spec, table.serde, lambda t=table: t.vnodes)
                            for spec in change_logs]

    def state_tables(self) -> list:
        return [self.table]

    def on_barrier(self, barrier):
        for log in self.change_logs:
            log.commit(barrier.prev_epoch)
        return None

    def _log(self, ops, columns, visibility=None) -> None:
        for log in self.change_logs:
            log.record(ops, columns, visibility)

    def on_chunk(self, chunk: StreamChunk):
        if self.conflict == "no_check":
            try:
                if self.table.consistent or chunk.visibility is not None:
                    self.table.write_chunk(chunk.ops, chunk.columns, chunk.visibility)
                else:
                    self.table.write_chunk(*_upserts(chunk.ops, chunk.columns, self.pk_indices_))
            except InconsistentOpError as exc:
                raise InconsistentStreamError(self.identity, exc.reason, exc.pk) from exc
            self.table.try_flush()   # spill a large epoch inside it (bounded memory)
            if self.change_logs:
                self._log(chunk.ops, chunk.columns, chunk.visibility)
            return chunk
        out = self._resolve(chunk)
        if out is None:
            return None
        try:
            self.table.write_chunk(out.ops, out.columns)
        except InconsistentOpError as exc:   # only if the table changed under us: a bug
            raise InconsistentStreamError(self.identity, exc.reason, exc.pk) from exc
        self.table.try_flush()
        if self.change_logs:
            self._log(out.ops, out.columns)
        return out

    def _resolve(self, chunk: StreamChunk) -> StreamChunk | None:
        """The changes that apply ``chunk`` to the table under the conflict behaviour."""
        pk = self.pk_indices_
        if chunk.visibility is None and len(chunk.ops) and bool((chunk.ops == INSERT).all()) and \
                all(_exact_key_type(chunk.columns[i].type) and self.schema.types[i].kind != TypeKind.DECIMAL
                    for i in pk):   # a NUMERIC is Arrow text: neither its value nor its equality
            # the bulk-load case (a DML batch of new keys): one read shows no key exists and no
            # key repeats, so the changes are the chunk itself -- no per-row Python
            keys = list(zip(*[chunk.columns[i].to_pylist() for i in pk]))
            if len(set(keys)) == len(keys):
                current = self.table.get_rows(keys)
                if all(c is None for c in current):
                    return chunk
        rows = chunk.rows()
        if not rows:
            return None
        keys = [tuple(row[i] for i in pk) for _, row in rows]
        distinct = list(dict.fromkeys(keys))
        current = dict(zip(distinct, self.table.get_rows(distinct)))   # one batched read
        builder = StreamChunkBuilder(self.schema, 2 * len(rows) + 3)   # never fills: one chunk out
        for (op, row), key in zip(rows, keys):
            cur = current[key]
            if op == INSERT or op == UPDATE_INSERT:
                if cur is None:
                    builder.append(INSERT, row)
                    current[key] = row
                    continue
                if self.conflict == "ignore":
                    continue
                new = row if self.conflict == "overwrite" else tuple(
                    c if n is None else n for n, c in zip(row, cur))
                if new != cur:
                    builder.append_update(cur, new)
                    current[key] = new
            elif op == DELETE or op == UPDATE_DELETE:
                if cur is not None:
                    builder.append(DELETE, cur)
                    current[key] = None
        return builder.take()


def _upserts(ops, columns, pk) -> tuple:
    """``(ops, columns)`` to write into a relaxed table (where an insert over a row replaces
    it) for the changes ``ops``/``columns``: each update pair whose U- and U+ have the same pk
    (compared as Arrow values of exact key types, so equal means one encoded key) is written as
    the insert of its U+ row -- half the rows to encode, and a chunk without other deletes is
    an all-insert run (no merge per record). Other pairs and rows are written as they are."""
    minus = np.flatnonzero(ops == UPDATE_DELETE)
    if not len(minus) or not pk or not all(_exact_key_type(columns[i].type) for i in pk):
        return ops, columns
    minus = minus[minus + 1 < len(ops)]
    minus = minus[ops[minus + 1] == UPDATE_INSERT]   # pairs: a U- right before its U+
    if not len(minus):
        return ops, columns
    plus = minus + 1
    a, b = pa.array(minus), pa.array(plus)
    same = np.ones(len(minus), np.bool_)
    for i in pk:
        x, y = columns[i].take(a), columns[i].take(b)
        eq = pc.fill_null(pc.equal(x, y), False).to_numpy(zero_copy_only=False)
        if x.null_count or y.null_count:   # NULL pk values: one key when both are NULL
            eq |= (x.is_null().to_numpy(zero_copy_only=False) & y.is_null().to_numpy(zero_copy_only=False))
        same &= eq
    if not same.any():
        return ops, columns
    keep = np.ones(len(ops), np.bool_)
    keep[minus[same]] = False
    new_ops = ops.copy()
    new_ops[plus[same]] = INSERT
    at = np.flatnonzero(keep)
    idx = pa.array(at)
    return new_ops[at], [c.take(idx) for c in columns]


def _exact_key_type(arrow_type) -> bool:
    """Whether Python equality of this column's values is its key equality (no NaN, no -0.0,
    no Decimal scale), so a ``set`` of them finds every repeated pk."""
    return (pa.types.is_integer(arrow_type) or pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type)
            or pa.types.is_boolean(arrow_type) or pa.types.is_date(arrow_type)
            or pa.types.is_large_string(arrow_type))
