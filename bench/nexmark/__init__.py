"""Nexmark, the standard streaming benchmark: a deterministic event generator (``generator.py``)
and the three table schemas (``schema.py``). The queries q0-q8 as SQL MVs join once the SQL
frontend lands (issue 14)."""
