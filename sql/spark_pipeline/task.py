"""What runs inside a Spark task of the pipeline: one stage's fragments over one partition.

A stage task (:func:`run_stage_task`) gets the rows routed to its partition -- records
``(partition, (edge id, payload))``, each payload one Arrow IPC stream of a change chunk
(:func:`encode_chunk`) -- and a :class:`BatchContext` (the pinned version's bytes, the epochs,
its slice of reserved SST ids). It opens a :class:`~hummock.task_store.TaskStore` (reads at
the pinned version plus its own writes at the batch's epoch ``e``), then runs each fragment of
its stage that has input rows (or must run: a new MV's singleton fragments, on partition 0) as
the in-process runtime would run that piece of the graph for one epoch: the fragment's
executors (``sql.build.build_plan``) over :class:`EdgeSource` heads that yield
``Barrier(e*, e)``, the partition's chunks, then ``Barrier(e, e + 1)`` -- so every state table
reads the committed state at ``e*`` and writes its changes at ``e``. A fragment's output goes
to the fragments of the same stage that read it (local edges) or, routed by the edge's
distribution to its partition, out of the task as records ``("b", partition, edge id,
payload)``. Last, the task builds its writes into SSTs under its id slice and yields ``("m",
TaskOutput bytes)`` for the driver's one commit.

Invariants: a task writes only the state tables of its stage's fragments and only keys routed
to its partition; it publishes nothing (the driver commits or vacuum removes its SSTs); the
same records in give the same rows out (row ids are assigned before the first exchange, in
stage 0, by :func:`table_chunks`).

Callers: :mod:`sql.spark_pipeline.driver` (the functions it ships to Spark) and tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hummock.compaction.remote import open_cached_store
from hummock.errors import HummockError
from hummock.task_store import TaskStore
from relational.state_table import StateTable
from relational.storage_table import StorageTable
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.executor import Executor
from stream.expr_errors import count_into
from stream.executors import Dml, Materialize
from stream.message import Barrier
from stream.runtime import gc_policy
from stream.runtime.dispatch import split_by_vnode, vnode_mapping
from stream.schema import Schema

from sql.build import build_plan
from sql.plan import nodes as P
from sql.spark_pipeline import pickling  # noqa: F401  (plans hold interval literals)
from sql.spark_pipeline.exchange import INLINE_BYTES, fetch
from sql.spark_pipeline.fragments import SINGLE, EdgeScan

EPOCH_STEP = 1 << 16
#: crash tests: ``stage:partition`` makes that task's first attempt raise (Spark retries it)
FAIL_TASK_ENV = "HUMMOCK_PIPELINE_FAIL_TASK"
DRIVER_GENERATOR = 1023   # the row id generator of rows the driver routes (stage 0 on Spark: 0..N-1)


class PipelineTaskError(HummockError):
    """A task of the Spark pipeline could not run its fragments (the batch fails as a whole)."""


@dataclass(frozen=True)
class BatchContext:
    """Everything a task needs besides its rows (pickled into every task of one batch)."""
    store: object               # hummock.compaction.remote.StoreDescription
    options: object             # StorageOptions
    version: bytes              # the pinned version (encode_version)
    prev_epoch: int             # e*: the committed epoch the tasks read
    epoch: int                  # e: the batch's epoch
    partitions: int             # N
    first_sst_id: int           # the batch's reserved ids: [first, first + count)
    ids_per_task: int
    attempts: int
    forced: frozenset = frozenset()   # relations whose singleton fragments run without input
    backfill_edges: dict = None       # edge id -> TableDesc: the leaf reads that relation's snapshot
    inline_bytes: int | None = INLINE_BYTES   # larger payloads go through exchange files (exchange.py)

    def sst_ids(self, stage: int, partition: int, attempt: int) -> range:
        if attempt >= self.attempts:
            raise PipelineTaskError(f"task attempt {attempt} of stage {stage} partition {partition}: only "
                                    f"{self.attempts} attempts have reserved SST ids")
        slot = (stage * self.partitions + partition) * self.attempts + attempt
        start = self.first_sst_id + slot * self.ids_per_task
        return range(start, start + self.ids_per_task)


# --- chunks on the wire ---------------------------------------------------------------------------

_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")   # less to shuffle and to copy JVM <-> Python


def encode_chunk(chunk: StreamChunk) -> bytes:
    """One Arrow IPC stream (LZ4-compressed buffers): an ``int8`` op column then the chunk's
    columns (visible rows)."""
    chunk = chunk.compact()
    arrays = [pa.array(chunk.ops, pa.int8())] + list(chunk.columns)
    batch = pa.RecordBatch.from_arrays(arrays, names=["__op"] + [f"c{i}" for i in range(len(chunk.columns))])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_IPC_OPTIONS) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def decode_chunks(payload: bytes, schema: Schema) -> list:
    out = []
    with pa.ipc.open_stream(payload) as reader:
        for batch in reader:
            ops = batch.column(0).to_numpy(zero_copy_only=False).astype(np.int8)
            out.append(StreamChunk(ops, batch.columns[1:], schema))
    return out


def route(chunks, dist, partitions: int) -> dict:
    """``{partition: [chunk]}``: the rows of ``chunks`` routed by ``dist`` (an update pair whose
    halves go to different partitions becomes a delete and an insert)."""
    out = defaultdict(list)
    if dist.kind == SINGLE:
        out[0] = [c for c in chunks if c.cardinality]
        return out
    mapping = vnode_mapping(partitions)
    for chunk in chunks:
        for p, part in enumerate(split_by_vnode(chunk, list(dist.cols), mapping, partitions)):
            if part is not None:
                out[p].append(part)
    return out


BLOB_ROWS = 32768   # rows per record on the wire: records stay a few MB (Spark holds each in one JVM row)


def blob_chunks(chunks, dist, partitions: int, edge_id: int):
    """``(partition, edge id, chunk)`` of ``chunks`` routed by ``dist``, each chunk at most about
    ``BLOB_ROWS`` rows, in order: what :func:`blobs` encodes."""
    for p, parts in route(chunks, dist, partitions).items():
        group, rows = [], 0
        for part in parts:
            group.append(part)
            rows += len(part)
            if rows >= BLOB_ROWS:
                yield p, edge_id, StreamChunk.concat(group) if len(group) > 1 else group[0]
                group, rows = [], 0
        if group:
            yield p, edge_id, StreamChunk.concat(group) if len(group) > 1 else group[0]


def blobs(chunks, dist, partitions: int, edge_id: int):
    """``("b", partition, edge id, payload)`` records of ``chunks`` routed by ``dist``, at most
    about ``BLOB_ROWS`` rows each, in order."""
    for p, edge, chunk in blob_chunks(chunks, dist, partitions, edge_id):
        yield "b", p, edge, encode_chunk(chunk)


# --- a table's input rows: stage 0 ----------------------------------------------------------------

def table_chunks(rel, batch: pa.RecordBatch, generator: int, epoch: int) -> list:
    """Insert chunks of ``rel``'s full schema from an Arrow batch of its visible columns (by
    name, cast safely; a missing column is NULL; ``_row_id`` assigned here by a Dml with row id
    ``generator`` starting at ``epoch``: ids exist before the first exchange). An optional
    ``__op`` int8 column gives each row's op (inserts by default)."""
    schema = Schema(list(rel.desc.columns))
    names = batch.schema.names
    n = batch.num_rows
    columns = []
    for i, (name, dtype) in enumerate(rel.visible_columns):
        atype = schema.arrow_types[i]
        if name in names:
            column = batch.column(names.index(name))
            if column.type != atype:
                try:
                    column = pc.cast(column, atype, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise PipelineTaskError(f"table {rel.name}: column {name} of type {column.type} does not fit "
                                            f"{dtype.sql_name()}: {exc}") from None
        else:
            column = pa.nulls(n, atype)
        columns.append(column)
    if rel.row_id:
        columns.append(pa.nulls(n, pa.int64()))
    ops = (batch.column(names.index("__op")).to_numpy(zero_copy_only=False).astype(np.int8)
           if "__op" in names else np.full(n, INSERT, np.int8))
    return fill_row_ids(rel, [StreamChunk(ops, columns, schema)], generator, epoch)


def fill_row_ids(rel, chunks, generator: int, epoch: int) -> list:
    """``chunks`` conformed to ``rel``'s schema by its Dml, NULL row ids filled (``generator``)."""
    schema = Schema(list(rel.desc.columns))
    dml = Dml(EdgeSource(schema, rel.pk_indices, [], ()), schema, rel.pk_indices,
              row_id_index=len(rel.desc.columns) - 1 if rel.row_id else None, generator=generator)
    dml.on_init(Barrier(epoch - EPOCH_STEP if epoch > EPOCH_STEP else 0, epoch, checkpoint=False))
    out = []
    for chunk in chunks:
        got = dml.on_chunk(chunk)
        if got is None:
            continue
        out += [got] if type(got) is StreamChunk else [m for m in got if type(m) is StreamChunk]
    return out


# --- running fragments ----------------------------------------------------------------------------

class EdgeSource(Executor):
    """A fragment's head in a task: the first barrier, the partition's chunks of one edge, the
    closing barrier (module docstring)."""

    def __init__(self, schema, stream_key, chunks, barriers):
        super().__init__([], schema, stream_key, "EdgeSource")
        self.chunks, self.barriers = chunks, barriers

    async def execute(self):
        yield self.barriers[0]
        for chunk in self.chunks:
            yield chunk
        yield self.barriers[1]


class TaskBuilder:
    """What :func:`sql.build.build_plan` needs from a builder, over a task's inputs."""

    def __init__(self, store, inputs: dict, barriers):
        self.store, self.inputs, self.barriers = store, inputs, barriers

    def head(self, relation, backfill: bool):
        schema = Schema(list(relation.columns))
        return EdgeSource(schema, relation.pk_indices, self.inputs.get(relation.edge_id, []), self.barriers)

    def state_table(self, desc, consistent: bool) -> StateTable:
        return StateTable(self.store, desc.table_id, desc.columns, desc.pk_indices, desc.order_types,
                          desc.dist_key_indices, desc.value_indices, name=desc.name, consistent=consistent)


def fragment_executor(frag, builder: TaskBuilder):
    """The executor chain of ``frag`` (its plan, topped by its relation's Materialize)."""
    ids = {id(n): n._state_ids for n in P.walk(frag.plan) if getattr(n, "_state_ids", None) is not None}
    root = build_plan(frag.plan, builder, ids, False)
    rel = frag.materialize
    if rel is None:
        return root
    if rel.kind == "table":
        schema = Schema(list(rel.desc.columns))
        dml = Dml(root, schema, rel.pk_indices, row_id_index=len(rel.desc.columns) - 1 if rel.row_id else None)
        conflict = rel.conflict if rel.user_pk else "no_check"
        return Materialize(dml, builder.state_table(rel.desc, False), conflict, change_logs=frag.change_logs)
    return Materialize(root, builder.state_table(rel.desc, False), "no_check", change_logs=frag.change_logs)


def run_fragment(frag, builder: TaskBuilder, errors: Counter | None = None) -> list:
    """Run ``frag`` for one epoch; its output chunks. Data errors (values set to NULL) are
    counted into ``errors`` (kind -> rows)."""
    root = fragment_executor(frag, builder)
    out = []

    async def drive():
        count_into(errors)
        async for msg in root.execute():
            if type(msg) is StreamChunk and msg.cardinality:
                out.append(msg)
    asyncio.run(drive())
    return out


class _ReadsAt:
    """A store's reads at one epoch, shaped as ``HummockStorage.snapshot``'s (what
    ``StorageTable`` scans through); the task store is pinned already."""

    def __init__(self, store, epoch: int):
        self.store, self.epoch = store, epoch

    def snapshot(self, epoch: int):
        return _ReadsAt(self.store, epoch)

    @property
    def max_committed_epoch(self) -> int:
        return self.store.max_committed_epoch

    @property
    def min_readable_epoch(self) -> int:
        return self.store.min_readable_epoch

    def get(self, table_id, key):
        return self.store.get(table_id, key, self.epoch)

    def multi_get(self, table_id, keys):
        return self.store.multi_get(table_id, keys, self.epoch)

    def iter(self, table_id, start=None, end=None, *, prefix=None, reverse=False):
        return self.store.iter(table_id, self.epoch, start, end, prefix=prefix, reverse=reverse)

    def release(self) -> None:
        pass


def snapshot_chunks(store, desc, epoch: int, schema: Schema) -> list:
    """A relation's rows at ``epoch`` as insert chunks (a new MV's backfill input)."""
    table = StorageTable.from_desc(_ReadsAt(store, epoch), desc)
    return [StreamChunk(np.full(b.num_rows, INSERT, np.int8), list(b.columns), schema)
            for b in table.batch_iter(epoch, batch_size=4096) if b.num_rows]


def edge_key(plan, edge_id: int) -> list:
    """The stream key of the rows on an edge (its consumer's leaf)."""
    for frag in (plan.fragments[plan.edges[edge_id].consumer],):
        for node in P.walk(frag.plan):
            if isinstance(node, EdgeScan) and node.relation.edge_id == edge_id:
                return list(node.relation.pk_indices)
    raise PipelineTaskError(f"edge {edge_id} has no leaf in its consumer fragment")


def net_changes(chunks, key) -> tuple:
    """One producer's changes as ``(deletes, inserts)``: per stream key (columns ``key``), the
    row before the batch (its first change is a delete) and the row after it (its last change
    is an insert); a key inserted then deleted within the batch is in neither."""
    chunk = StreamChunk.concat(chunks).compact() if len(chunks) > 1 else chunks[0].compact()
    ops = chunk.ops
    columns = [chunk.columns[k] for k in key]
    if columns and len(ops) and all(_groupable(c.type) for c in columns):
        first, last = _first_and_last_by_arrow(columns, len(ops))
    else:
        first, last = _first_and_last_by_rows(columns, len(ops))
    gone = np.sort(first[np.isin(ops[first], (DELETE, UPDATE_DELETE))]).astype(np.int64)
    came = np.sort(last[np.isin(ops[last], (INSERT, UPDATE_INSERT))]).astype(np.int64)

    def take(idx, op):
        if not len(idx):
            return []
        at = pa.array(idx)
        return [StreamChunk(np.full(len(idx), op, np.int8), [c.take(at) for c in chunk.columns], chunk.schema)]
    return take(gone, DELETE), take(came, INSERT)


def _groupable(atype) -> bool:
    """Key columns Arrow's hash grouping compares exactly as Python's ``==`` on their values
    (no floats: -0.0/NaN; no nested or interval values)."""
    return (pa.types.is_integer(atype) or pa.types.is_boolean(atype) or pa.types.is_string(atype)
            or pa.types.is_large_string(atype) or pa.types.is_binary(atype) or pa.types.is_large_binary(atype)
            or pa.types.is_timestamp(atype) or pa.types.is_date(atype) or pa.types.is_time(atype))


def _first_and_last_by_arrow(columns, n: int) -> tuple:
    """``(first, last)``: numpy arrays of each distinct key's first and last row index (NULLs
    one key, as in the row path's tuples), by Arrow's hash group-by."""
    names = [f"k{i}" for i in range(len(columns))]
    table = pa.Table.from_arrays(list(columns) + [pa.array(np.arange(n, dtype=np.int64))], names=names + ["i"])
    grouped = table.group_by(names, use_threads=False).aggregate([("i", "min"), ("i", "max")])
    return (grouped.column("i_min").to_numpy().astype(np.int64, copy=False),
            grouped.column("i_max").to_numpy().astype(np.int64, copy=False))


def _first_and_last_by_rows(columns, n: int) -> tuple:
    """What :func:`_first_and_last_by_arrow` computes, with a dict of Python key tuples (any type)."""
    keys = list(zip(*[c.to_pylist() for c in columns])) if columns else [()] * n
    first, last = {}, {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
        last[k] = i
    return np.array(list(first.values()), np.int64), np.array(list(last.values()), np.int64)


def deletes_first(per_producer, key) -> list:
    """The chunks one partition gets on an exchange, from several producer tasks in no particular
    order, as one exact sequence: each producer's changes netted per stream key, then every
    producer's deletes before any insert. (A row that moved between producers -- its routing
    key changed -- is deleted by one and inserted by another; the consumer must see the delete
    first. At ``e*`` one producer holds a key's old row and at ``e`` at most one its new row.)"""
    deletes, inserts = [], []
    for chunks in per_producer:
        if all((c.ops == INSERT).all() for c in chunks):
            inserts += chunks
            continue
        gone, came = net_changes(chunks, key)
        deletes += gone
        inserts += came
    return deletes + inserts


def edge_schemas(plan) -> dict:
    """``{edge id: Schema}`` of the rows on every edge (its consumer's leaf)."""
    out = {}
    for frag in plan.fragments:
        for node in P.walk(frag.plan):
            if isinstance(node, EdgeScan):
                out[node.relation.edge_id] = Schema(list(node.relation.columns))
    return out


def run_stage_task(plan, ctx: BatchContext, stage: int, partition: int, attempt: int, records):
    """The stage task of ``partition`` (module docstring); yields output records. While it runs,
    full garbage collections are rare, as in a running in-process graph (stream/runtime/gc_policy.py:
    a task's executors and inputs hold millions of objects)."""
    gc_policy.acquire()
    try:
        yield from _run_stage_task(plan, ctx, stage, partition, attempt, records)
    finally:
        gc_policy.release()


def _run_stage_task(plan, ctx: BatchContext, stage: int, partition: int, attempt: int, records):
    began = time.perf_counter()
    if os.environ.get(FAIL_TASK_ENV) == f"{stage}:{partition}" and attempt == 0:
        raise PipelineTaskError(f"injected failure of stage {stage} partition {partition} attempt 0 "
                                f"({FAIL_TASK_ENV}; crash tests: Spark retries the task)")
    schemas = edge_schemas(plan)
    inputs = defaultdict(list)
    exchanged = defaultdict(dict)   # edge -> {producer task: its chunks, in order}
    for edge_id, payload, src in records:
        chunks = decode_chunks(payload, schemas[edge_id])
        if plan.edges[edge_id].producer is None:
            inputs[edge_id].extend(chunks)
        else:
            exchanged[edge_id].setdefault(src, []).extend(chunks)
    for edge_id, per_producer in exchanged.items():
        inputs[edge_id].extend(deletes_first(per_producer.values(), edge_key(plan, edge_id)))
    read_s = time.perf_counter() - began
    store = TaskStore(open_cached_store(ctx.store), ctx.version, ctx.epoch, options=ctx.options)
    barriers = (Barrier(ctx.prev_epoch, ctx.epoch, checkpoint=False),
                Barrier(ctx.epoch, ctx.epoch + EPOCH_STEP, checkpoint=True))
    builder = TaskBuilder(store, inputs, barriers)
    for frag in plan.fragments_of_stage(stage):
        for e in frag.inputs:
            if ctx.backfill_edges and e in ctx.backfill_edges:
                snapshot = snapshot_chunks(store, ctx.backfill_edges[e], ctx.prev_epoch, schemas[e])
                inputs[e].extend(route(snapshot, plan.edges[e].dist, ctx.partitions).get(partition, []))
    ran = 0
    errors: dict = {}   # relation -> Counter of data errors
    for frag in plan.fragments_of_stage(stage):
        has_input = any(inputs.get(e) for e in frag.inputs)
        forced = frag.relation in ctx.forced and frag.dist is not None and frag.dist.kind == SINGLE \
            and partition == 0
        if not has_input and not forced:
            continue
        counter = errors.setdefault(frag.relation, Counter())
        out = run_fragment(frag, builder, counter)
        ran += 1
        for e in frag.outputs:
            edge = plan.edges[e]
            if edge.local:
                inputs[e].extend(out)
            else:
                yield from blobs(out, edge.dist, ctx.partitions, e)
    run_s = time.perf_counter() - began - read_s
    output = store.finish(ctx.sst_ids(stage, partition, attempt))
    rows_in = sum(c.cardinality for e, edge in plan.edges.items() if edge.producer is None for c in inputs.get(e, ()))
    total = time.perf_counter() - began
    errors_json = json.dumps({r: dict(c) for r, c in errors.items() if c}).encode()
    yield "m", partition, -1, (META.pack(ran, rows_in, total, read_s, run_s, total - read_s - run_s, len(errors_json))
                               + errors_json + output.to_bytes())


META = struct.Struct("<iqddddi")   # a task's meta record: fragments run, input rows, seconds (total, reading its
#                                 input, running fragments, building SSTs), the length of the data
#                                 errors' JSON; then that JSON and the TaskOutput


def read_meta(payload: bytes) -> tuple:
    """``(fragments run, input rows, (seconds total, read, run, finish), TaskOutput, {relation:
    {data error kind: rows}})`` of a meta record's payload."""
    from hummock.task_store import TaskOutput

    ran, rows, *seconds, errors_len = META.unpack_from(payload)
    errors = json.loads(payload[META.size:META.size + errors_len])
    return ran, rows, tuple(seconds), TaskOutput.from_bytes(payload[META.size + errors_len:]), errors


# --- records as Arrow (what the Spark stages exchange) -------------------------------------------

RECORD_FIELDS = [("k", pa.int8()), ("t", pa.int32()), ("key", pa.int32()), ("e", pa.int32()),
                 ("src", pa.int32()), ("payload", pa.binary())]
RECORD_SCHEMA = pa.schema(RECORD_FIELDS)
RECORD_DDL = "k byte, t int, key int, e int, src int, payload binary"   # the same, as Spark's schema string
KIND_BLOB, KIND_META, KIND_REF = 0, 1, 2   # a payload inline, a task's meta, a payload's exchange file
_KINDS = {"b": KIND_BLOB, "m": KIND_META, "r": KIND_REF}


def record_batch(records, keys, src: int = -1) -> pa.RecordBatch:
    """``("b"|"m"|"r", partition, edge, payload)`` records of producer ``src`` as one Arrow batch of
    RECORD_SCHEMA; ``keys[t]`` is the value Spark's hash partitioning sends to partition ``t``."""
    records = list(records)
    return pa.RecordBatch.from_arrays(
        [pa.array([_KINDS[r[0]] for r in records], pa.int8()),
         pa.array([r[1] for r in records], pa.int32()),
         pa.array([keys[r[1]] for r in records], pa.int32()),
         pa.array([r[2] for r in records], pa.int32()),
         pa.array([src] * len(records), pa.int32()),
         pa.array([r[3] for r in records], pa.binary())], schema=RECORD_SCHEMA)


def batch_records(batches, partition: int, object_store=None):
    """``(edge, payload, producer)`` of the Arrow record batches a stage task reads (a payload in
    an exchange file read from ``object_store``); every record must be routed to ``partition``
    (else the shuffle did not do what the driver planned: an error)."""
    for batch in batches:
        if not batch.num_rows:
            continue
        targets = batch.column(1).to_numpy(zero_copy_only=False)
        if (targets != partition).any():
            raise PipelineTaskError(f"a record for partition {int(targets[targets != partition][0])} reached "
                                    f"partition {partition}: Spark's hash partitioning differs from the plan")
        for kind, edge, src, payload in zip(batch.column(0).to_pylist(), batch.column(3).to_pylist(),
                                            batch.column(4).to_pylist(), batch.column(5).to_pylist()):
            if edge < 0:   # (edge -1: a no-op record that only makes the task run)
                continue
            if kind == KIND_REF:
                if object_store is None:
                    raise PipelineTaskError(f"a record of edge {edge} names an exchange file, but the task "
                                            f"has no object store to read it from")
                payload = fetch(object_store, payload)
            yield edge, payload, src
