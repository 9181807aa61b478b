"""Entry point of a compaction worker process: ``python -m hummock.compaction.worker``.

Started by :mod:`hummock.compaction.pool`; serves pickled key-range splits on stdin until it
closes (the protocol is ``pool._serve``'s). A module of its own so that running it as
``__main__`` does not execute ``pool`` a second time.
"""

from hummock.compaction.pool import _serve

if __name__ == "__main__":
    _serve()
