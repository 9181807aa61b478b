"""The stream runtime: channels, actors, dispatchers and the barrier loop (docs/streaming.md).

One asyncio event loop in one thread runs every actor; checkpoints run in a worker thread so
the actors go on with the next epoch meanwhile. :class:`StreamRuntime` is the entry point.
"""

from stream.runtime.runtime import StreamRuntime

__all__ = ["StreamRuntime"]
