"""The executor interface: what every streaming operator implements (docs/streaming.md).

An executor is one loop over messages (STYLE.md 16; RisingWave's ``Executor::execute``):
``execute()`` is an async generator that pulls its input(s) and yields
:class:`~stream.chunk.StreamChunk`, :class:`~stream.message.Barrier` and
:class:`~stream.message.Watermark` messages. Every executor states

- ``schema`` (:class:`~stream.schema.Schema`): the columns of every chunk it yields;
- ``stream_key``: column indices that identify a row of its output (RisingWave's stream key /
  ``pk_indices``): inserts and deletes of one key alternate, and an update pair keeps the key;
- ``identity``: a short name for errors and logs (``"Materialize(mv_orders #7)"``);
- ``inputs``: the executors it reads.

Single-input operators subclass :class:`UnaryExecutor` and write only the per-message work:

- ``on_chunk(chunk)`` returns ``None``, a chunk, or an iterable of messages to emit;
- ``on_barrier(barrier)`` (optional) returns messages to emit *before* the barrier (an
  aggregation flushes its changed groups here) and writes the epoch's last state;
- ``on_watermark(watermark)`` (optional, default: pass it on);
- ``state_tables()`` (optional): the :class:`~relational.state_table.StateTable`\\ s it owns.

The base loop does the epoch bookkeeping the same way for everyone. The first message of every
stream is a barrier (the runtime's initial barrier, ``prev_epoch`` = the store's
``max_committed_epoch``): on it each state table gets ``init_epoch(barrier.curr_epoch)`` --
reads then see exactly the committed state -- and ``on_init(barrier)`` runs (load caches).
On every later barrier: ``on_barrier``'s messages are yielded, then every state table
``commit(barrier.curr_epoch)`` (the MemTable goes to the store at ``prev_epoch``), then
``on_vnodes_changed`` if the barrier's mutation rescales this executor, then the barrier is
yielded. An executor never calls ``store.checkpoint``: the runtime does, once every actor has
passed a checkpoint barrier.

Multi-input operators (Union, joins) implement ``execute()`` themselves on top of
:func:`stream.align.align_barriers`, which yields ``(input index, message)`` and one aligned
barrier per epoch, and may reuse :meth:`Executor.handle_barrier` for the bookkeeping.

Errors: an executor raises a :class:`~stream.errors.StreamError` naming its identity
(:class:`~stream.errors.InconsistentStreamError` for a key that breaks strict mode). The
actor stops and the runtime reports it; nothing committed is affected.
Executors are not thread-safe and hold no state shared with other executors.
"""

from __future__ import annotations

from stream.cache import MemoryBudget, StateCache, default_budget
from stream.chunk import StreamChunk
from stream.errors import BarrierError, ExecutorError
from stream.message import Barrier, Watermark
from stream.schema import Schema


class Executor:
    """Base of all executors (module docstring)."""

    def __init__(self, inputs, schema: Schema, stream_key, identity: str | None = None):
        self.inputs = tuple(inputs)
        self.schema = schema if isinstance(schema, Schema) else Schema(schema)
        self.stream_key = list(stream_key or ())
        self.identity = identity or type(self).__name__
        self._epoch: int | None = None   # curr_epoch of the last barrier seen

    def __repr__(self) -> str:
        return f"<{self.identity} {self.schema!r} key={self.stream_key}>"

    @property
    def pk_indices(self) -> list:
        return self.stream_key

    async def execute(self):
        """Yield this executor's output messages (module docstring)."""
        raise NotImplementedError
        yield   # pragma: no cover  (an async generator)

    # --- hooks ---------------------------------------------------------------------------------

    def state_tables(self) -> list:
        """The state tables this executor owns (committed on every barrier)."""
        return []

    def caches(self) -> list:
        """The :class:`~stream.cache.StateCache`\\ s this executor holds: found among its
        attributes, in containers of them (a dict of caches) and one level inside helper
        objects that are not executors (a join's sides), never inside a ``MemoryBudget`` (which
        lists every cache charged to it, other executors' too). Override when a cache hides
        deeper."""
        found, seen = [], set()

        def visit(value, depth):
            if id(value) in seen:
                return
            seen.add(id(value))
            if isinstance(value, StateCache):
                found.append(value)
            elif isinstance(value, dict):
                for v in list(value.values()):
                    if isinstance(v, StateCache):
                        visit(v, depth)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    if isinstance(v, StateCache):
                        visit(v, depth)
            elif depth and hasattr(value, "__dict__") and not isinstance(value, (Executor, MemoryBudget, type)):
                for v in list(vars(value).values()):
                    visit(v, depth - 1)
        for value in list(vars(self).values()):
            if not isinstance(value, Executor):
                visit(value, 1)
        return found

    def use_budget(self, budget) -> bool:
        """Charge this executor's caches to ``budget`` when it was built without a budget of
        its own (its ``budget`` is the process-wide ``default_budget()``): the runtime calls
        this for every executor of an actor, so a runtime's caches share its budget. An
        executor given ``budget=`` keeps it. Returns whether the caches moved."""
        mine = getattr(self, "budget", None)
        if mine is None or mine is budget or mine is not default_budget():
            return False
        for cache in self.caches():
            if cache.budget is mine:
                budget.adopt(cache)
        self.budget = budget
        return True

    def on_init(self, barrier: Barrier) -> None:
        """After the first barrier initialized the state tables (recovery: load caches)."""

    def on_barrier(self, barrier: Barrier):
        """Messages to emit before ``barrier`` (flush pending output; write the epoch's last
        state). Called for every barrier after the first."""
        return None

    def on_vnodes_changed(self, barrier: Barrier) -> None:
        """The barrier's mutation gives this executor new vnodes (rescaling); the state tables
        were committed, so ``update_vnode_bitmap`` may be called. Default: nothing."""

    # --- the shared barrier bookkeeping ---------------------------------------------------------

    def handle_barrier(self, barrier: Barrier) -> list:
        """The epoch bookkeeping of the module docstring; returns the messages to yield
        (``on_barrier``'s, then the barrier)."""
        if self._epoch is None:
            for table in self.state_tables():
                table.init_epoch(barrier.curr_epoch)
            self._epoch = barrier.curr_epoch
            self.on_init(barrier)
            return [barrier]
        if barrier.prev_epoch != self._epoch:
            raise BarrierError(f"{self.identity}: barrier {barrier!r} does not follow epoch {self._epoch}")
        out = _as_messages(self.on_barrier(barrier))
        for table in self.state_tables():
            table.commit(barrier.curr_epoch)
        self._epoch = barrier.curr_epoch
        self.on_vnodes_changed(barrier)
        out.append(barrier)
        return out

    @property
    def epoch(self) -> int | None:
        """The epoch this executor is in (``curr_epoch`` of the last barrier), None before the first."""
        return self._epoch


def _as_messages(out) -> list:
    if out is None:
        return []
    if type(out) is StreamChunk:
        return [out]
    return list(out)


class UnaryExecutor(Executor):
    """An executor with one input; subclasses implement ``on_chunk`` (module docstring)."""

    def __init__(self, input: Executor, schema=None, stream_key=None, identity: str | None = None):
        super().__init__([input], schema if schema is not None else input.schema,
                         stream_key if stream_key is not None else input.stream_key, identity)
        self.input = input

    def on_chunk(self, chunk: StreamChunk):
        raise NotImplementedError

    def on_watermark(self, watermark: Watermark):
        return watermark

    async def execute(self):
        first = True
        async for msg in self.input.execute():
            kind = type(msg)
            if first and kind is not Barrier:
                raise ExecutorError(self.identity, f"the first message must be a barrier, got {msg!r}")
            first = False
            if kind is StreamChunk:
                out = self.on_chunk(msg)
                if out is None:
                    continue
                if type(out) is StreamChunk:
                    yield out
                else:
                    for m in out:
                        yield m
            elif kind is Barrier:
                for m in self.handle_barrier(msg):
                    yield m
            else:
                out = self.on_watermark(msg)
                if out is not None:
                    yield out


class Checked(UnaryExecutor):
    """Passes its input through, validating every chunk against the input's schema and stream
    key (:meth:`StreamChunk.validate`) and every barrier's epoch order. For tests and debugging:
    put one after any executor to catch a broken chunk where it is made."""

    def __init__(self, input: Executor):
        super().__init__(input, identity=f"Checked({input.identity})")

    def on_chunk(self, chunk: StreamChunk):
        if chunk.schema != self.schema:
            raise ExecutorError(self.input.identity, f"yielded a chunk of {chunk.schema!r}, declared {self.schema!r}")
        try:
            chunk.validate(self.stream_key)
        except Exception as exc:
            raise ExecutorError(self.input.identity, f"yielded an invalid chunk: {exc}") from exc
        return chunk
