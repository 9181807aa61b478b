"""Errors of the stream layer, all under :class:`hummock.errors.HummockError`.

- :class:`StreamError`: root of this layer's errors.
- :class:`InvalidChunkError` (``ValueError``): a chunk that breaks the chunk contract: columns of
  the wrong length or Arrow type, an unknown op, an update pair that is not adjacent (an
  update-delete not immediately followed by its update-insert), a visibility mask that splits a
  pair. Carries ``row`` (the chunk position, or None).
- :class:`ExpressionError` (``ValueError``): an expression that cannot be built (unknown
  function, operand types that do not fit) or that fails on data (integer overflow, a cast
  that does not fit). Carries ``expr`` (the node) and ``reason`` (the message without it).
- :class:`ExecutorError`: an executor refused its input; ``executor`` names it (its identity)
  and ``cause`` is the underlying error. :class:`InconsistentStreamError` (``ValueError``) is
  the strict-mode case: an insert of an existing key or a delete of a missing one; it carries
  ``pk``.
- :class:`BarrierError` (``ValueError``): barriers that do not line up (inputs of a fan-in that
  deliver different epochs, an epoch that does not grow).
- :class:`ActorFailedError`: an actor stopped with an error; the runtime raises it to whoever
  waits for a barrier. ``actor_id`` and ``__cause__`` tell which and why.
- :class:`CheckpointFailedError`: the store could not commit a checkpoint (``__cause__``); the
  graph fails as for an actor.

Callers: every module of ``stream``; ``sql`` catches them.
"""

from __future__ import annotations

from hummock.errors import HummockError


class StreamError(HummockError):
    """Root of the stream layer's errors."""


class InvalidChunkError(StreamError, ValueError):
    """A chunk that breaks its contract (module docstring); ``row`` is the chunk position."""

    def __init__(self, message: str, row: int | None = None):
        self.row = row
        super().__init__(message if row is None else f"{message} (row {row})")


class ExpressionError(StreamError, ValueError):
    """An expression that cannot be built or evaluated; ``expr`` is its text."""

    def __init__(self, message: str, expr=None):
        self.expr = expr
        self.reason = message   # the message without the expression's text
        super().__init__(message if expr is None else f"{message} in {expr}")


class ExecutorError(StreamError):
    """An executor refused its input. ``executor``: the executor's identity."""

    def __init__(self, executor: str, message: str):
        self.executor = executor
        super().__init__(f"{executor}: {message}")


class InconsistentStreamError(ExecutorError, ValueError):
    """Strict mode: a change that contradicts the executor's state (insert of an existing key,
    delete or update of a missing one, an old row that is not the stored row). ``pk`` names it."""

    def __init__(self, executor: str, reason: str, pk=None):
        self.reason = reason
        self.pk = pk
        super().__init__(executor, f"{reason}: pk={pk!r}")


class BarrierError(StreamError, ValueError):
    """Barriers that do not line up across the inputs of a fan-in, or epochs that do not grow."""


class ActorFailedError(StreamError):
    """An actor stopped with an error (``__cause__``); ``actor_id`` names it."""

    def __init__(self, actor_id: int, message: str):
        self.actor_id = actor_id
        super().__init__(f"actor {actor_id} failed: {message}")


class CheckpointFailedError(StreamError):
    """The store failed to commit a checkpoint (``__cause__``): the graph stops, as for an actor."""
