"""Messages of a stream: chunks, barriers and watermarks (DESIGN.md section 8).

- :class:`~stream.chunk.StreamChunk`: data (stream/chunk.py).
- :class:`Barrier`: cuts the stream into epochs. Everything before a barrier with
  ``curr_epoch = E`` belongs to its ``prev_epoch``; after it, to ``E``. On every barrier each
  stateful executor commits its state tables (``table.commit(barrier.curr_epoch)``: the
  MemTable is written at ``prev_epoch``) before passing it on; when every actor has passed a
  barrier with ``checkpoint=True`` the runtime checkpoints the store at ``prev_epoch``.
  ``mutation`` changes the graph at that point (stop actors, add downstreams, pause, resume).
- :class:`Watermark`: no row with ``column`` below ``value`` follows in this stream (event
  time); executors may clean state below it and pass it on.

All three are immutable. Epochs are ``hummock.key.new_epoch()`` values: ``prev_epoch <
curr_epoch`` always. Callers: executors, the runtime, tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stream.chunk import StreamChunk
from stream.errors import BarrierError


@dataclass(frozen=True)
class Stop:
    """The actors in ``actor_ids`` stop after passing this barrier (DROP, shutdown)."""
    actor_ids: frozenset = field(default_factory=frozenset)


@dataclass(frozen=True)
class Add:
    """New downstream outputs start receiving after this barrier: ``outputs`` maps an
    upstream actor id to the dispatcher outputs it adds (MV on MV)."""
    outputs: dict = field(default_factory=dict)

    def __hash__(self) -> int:
        return id(self)


@dataclass(frozen=True)
class Pause:
    """Sources stop emitting data (barriers still flow) until a :class:`Resume`."""


@dataclass(frozen=True)
class Resume:
    """Sources emit data again."""


@dataclass(frozen=True)
class Barrier:
    """An epoch boundary (module docstring). ``checkpoint``: the store is checkpointed at
    ``prev_epoch`` once every actor passed it; otherwise the epoch's writes stay uncommitted
    until a later checkpoint barrier commits them together."""
    prev_epoch: int
    curr_epoch: int
    checkpoint: bool = True
    mutation: object = None

    def __post_init__(self):
        if not self.prev_epoch < self.curr_epoch:
            raise BarrierError(f"a barrier needs prev_epoch < curr_epoch, got {self.prev_epoch} >= {self.curr_epoch}")

    def is_stop(self, actor_id: int) -> bool:
        return isinstance(self.mutation, Stop) and actor_id in self.mutation.actor_ids

    def __repr__(self) -> str:
        mutation = f", {self.mutation!r}" if self.mutation is not None else ""
        kind = "checkpoint" if self.checkpoint else "barrier"
        return f"Barrier({kind} {self.prev_epoch} -> {self.curr_epoch}{mutation})"


@dataclass(frozen=True)
class Watermark:
    """No later row of this stream has ``column`` (an index) below ``value``."""
    column: int
    value: object


Message = StreamChunk | Barrier | Watermark
__all__ = ["Add", "Barrier", "Message", "Pause", "Resume", "Stop", "StreamChunk", "Watermark"]
