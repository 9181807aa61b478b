"""An actor: a chain of executors (headed by a Receiver/Merge or a source) whose output goes
through its dispatchers to downstream channels (seed 002, "Actors").

``run()`` pulls the chain's messages, dispatches each one, and reports every barrier to the
barrier loop after dispatching it -- by then every executor of the chain has committed its
state tables for that barrier. A Stop barrier naming the actor ends it after it was passed on;
ending closes the actor's output channels, so downstream receivers end too. An error
propagates out of ``run()`` (the runtime fails the graph); the output channels are closed
without waiting.

Data errors (stream/expr_errors.py: a value that fails an expression becomes NULL) raised
while the actor runs are counted into its ``data_errors`` (kind -> rows), read by
``StreamRuntime.data_errors``.

Actors share no mutable state: they talk only through channels, and each executor owns its
state tables (the store is the one shared service, and it is thread-safe), so a later version
can put fragments into several processes.

Callers: :mod:`stream.runtime.runtime`.
"""

from __future__ import annotations

from collections import Counter

from stream.expr_errors import count_into
from stream.message import Barrier


class Actor:
    """One actor (module docstring). ``collect(actor_id, barrier)`` is the barrier loop's."""

    def __init__(self, actor_id: int, executor, collect):
        self.actor_id = actor_id
        self.executor = executor
        self.dispatchers: list = []
        self._collect = collect
        self.data_errors: Counter = Counter()   # data errors set to NULL here, by kind

    def __repr__(self) -> str:
        return f"Actor({self.actor_id}: {self.executor.identity})"

    async def run(self) -> None:
        dispatchers = self.dispatchers
        ok = False
        try:
            count_into(self.data_errors)   # this task's context only
            await self._pump(dispatchers)
            ok = True
        finally:
            for d in dispatchers:
                if ok:
                    await d.close()
                else:
                    d.close_nowait()

    async def _pump(self, dispatchers) -> None:
        async for msg in self.executor.execute():
            for d in dispatchers:
                await d.dispatch(msg)
            if type(msg) is Barrier:
                self._collect(self.actor_id, msg)
                if msg.is_stop(self.actor_id):
                    break
