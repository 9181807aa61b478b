"""Compaction (DESIGN.md section 6): merging SSTs, keeping what pinned readers can see.

So far: :mod:`hummock.compaction.core`, the algorithm both runners (in-process and PySpark) will
share. The picker, the runners and their wiring into ``HummockStorage`` arrive with the rest of
the compaction issue.
"""
