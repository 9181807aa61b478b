"""The feeder of Nexmark events into a SQL database: moved to :mod:`sql.nexmark_feed` (the demo,
``hummock demo``, uses it and ``sql/`` imports nothing of ``bench/``); every name, private ones
too, is re-exported here so ``bench.nexmark.feed`` keeps working."""

from sql import nexmark_feed as _impl

globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__")})
