"""Nexmark, the standard streaming benchmark: a deterministic event generator (``generator.py``),
the three table schemas (``schema.py``), q0-q8 as SQL MVs (``queries.py``), the feeder that
streams events into a SQL database (``feed.py``), and the benchmark (``python -m bench.nexmark``,
``__main__.py``): events/s per query, each MV checked against its batch recomputation."""
