"""Nexmark q0-q8 as SQL MVs: moved to :mod:`sql.nexmark_queries` (the demo,
``hummock demo``, uses it and ``sql/`` imports nothing of ``bench/``); every name, private ones
too, is re-exported here so ``bench.nexmark.queries`` keeps working."""

from sql import nexmark_queries as _impl

globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__")})
