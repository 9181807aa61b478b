"""Child process of tests/test_stream_kill.py: runs the stream graph of tests/stream_graphs.py
on a local store forever -- random consistent changes into both base tables, a barrier after
every write (every third one a checkpoint) -- until the parent kills it with SIGKILL.

Usage: ``python stream_kill_writer.py PATH SEED``. Resumes from the store's committed state
(it reads the base tables at ``max_committed_epoch`` as its model). Prints ``committed <epoch>``
(flushed) after each checkpoint, so the parent knows when epochs have landed.
"""

import random
import sys

from hummock import HummockStorage
from stream.chunk import StreamChunk
from stream_graphs import BASE, OPTIONS, bases_of, build, changes, read_all


def main(path: str, seed: int) -> None:
    rng = random.Random(seed)
    store = HummockStorage.open(path, OPTIONS)
    model = bases_of(read_all(store, store.max_committed_epoch)) if store.max_committed_epoch else ({}, {})
    rt, *sources = build(store)
    rt.start()
    n = 0
    while True:
        side = rng.randrange(2)
        items = [(rng.randrange(30), (rng.choice([None, rng.randrange(-20, 20)]),
                                      rng.choice([None, "x", "yy"]))) for _ in range(rng.randrange(1, 40))]
        rt.write(sources[side], StreamChunk.from_rows(BASE, changes(model[side], items)))
        n += 1
        barrier = rt.barrier(checkpoint=n % 3 == 0)
        if barrier.checkpoint:
            print(f"committed {barrier.prev_epoch}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
