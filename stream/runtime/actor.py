"""An actor: a chain of executors (headed by a Receiver/Merge or a source) whose output goes
through its dispatchers to downstream channels (seed 002, "Actors").

``run()`` pulls the chain's messages, dispatches each one, and reports every barrier to the
barrier loop after dispatching it -- by then every executor of the chain has committed its
state tables for that barrier. A Stop barrier naming the actor ends it after it was passed on;
ending closes the actor's output channels, so downstream receivers end too. An error
propagates out of ``run()`` (the runtime fails the graph); the output channels are closed
without waiting.

Actors share no mutable state: they talk only through channels, and each executor owns its
state tables (the store is the one shared service, and it is thread-safe), so a later version
can put fragments into several processes.

Callers: :mod:`stream.runtime.runtime`.
"""

from __future__ import annotations

from stream.message import Barrier


class Actor:
    """One actor (module docstring). ``collect(actor_id, barrier)`` is the barrier loop's."""

    def __init__(self, actor_id: int, executor, collect):
        self.actor_id = actor_id
        self.executor = executor
        self.dispatchers: list = []
        self._collect = collect

    def __repr__(self) -> str:
        return f"Actor({self.actor_id}: {self.executor.identity})"

    async def run(self) -> None:
        dispatchers = self.dispatchers
        ok = False
        try:
            async for msg in self.executor.execute():
                for d in dispatchers:
                    await d.dispatch(msg)
                if type(msg) is Barrier:
                    self._collect(self.actor_id, msg)
                    if msg.is_stop(self.actor_id):
                        break
            ok = True
        finally:
            for d in dispatchers:
                if ok:
                    await d.close()
                else:
                    d.close_nowait()
