"""The Nexmark event generator's benchmark: events generated per second (one core).

The generator itself lives in the streaming layer, :mod:`stream.sources.nexmark` (the
``nexmark`` connector generates its rows); every name of it, private ones too (tests use them),
is re-exported here so ``bench.nexmark.generator`` keeps working. Run
``python -m bench.nexmark.generator --events 1000000`` for events/s.
"""

from __future__ import annotations

import argparse
import json
import time

from stream.sources import nexmark as _impl
from stream.sources.nexmark import NexmarkConfig, NexmarkEvents, NexmarkGenerator  # noqa: F401

globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__")})


# --- throughput ------------------------------------------------------------------------------------

def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark.generator",
                                     description="Nexmark events generated per second (one core).")
    parser.add_argument("--events", type=int, default=1_000_000, help="events to generate (default 1,000,000)")
    parser.add_argument("--batch", type=int, default=100_000, help="events per batch (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    generator = NexmarkGenerator(NexmarkConfig(seed=args.seed))
    generator.generate(0, min(args.batch, args.events))   # warm-up
    counts = [0, 0, 0]
    nbytes = 0
    started = time.perf_counter()
    for events in generator.batches(args.events, args.batch):
        for i, batch in enumerate(events):
            counts[i] += batch.num_rows
            nbytes += batch.nbytes
    seconds = time.perf_counter() - started
    rate = args.events / seconds
    print(f"{args.events:,} events ({counts[0]:,} persons, {counts[1]:,} auctions, {counts[2]:,} bids; "
          f"{nbytes / 2**20:,.1f} MiB of Arrow) in {seconds:.2f} s: {rate:,.0f} events/s "
          f"(batches of {args.batch:,})")
    from bench.harness import machine
    print(json.dumps({"bench": "nexmark_generator", "events": args.events, "batch": args.batch,
                      "seconds": round(seconds, 3), "events_per_s": round(rate), "arrow_bytes": nbytes,
                      "machine": machine()}, sort_keys=True))


if __name__ == "__main__":
    main()
