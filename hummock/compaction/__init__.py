"""Compaction (DESIGN.md section 6): merging SSTs, keeping what pinned readers can see.

- :mod:`~hummock.compaction.picker`: which SSTs to compact next (leveled, dynamic level sizes,
  intra-L0 tiers, trivial moves) -- pure functions of a version;
- :mod:`~hummock.compaction.core`: the one merge both runners share (native
  ``native/_compact.pyx``, twin ``_compact_py``);
- :mod:`~hummock.compaction.manager`: runs tasks for a store -- in a background thread
  (``compactor="local"``) or as Spark jobs (:mod:`~hummock.compaction.spark`, with
  :mod:`~hummock.compaction.splits` cutting a task into key ranges) -- and applies each result
  as one version delta. docs/compaction.md explains all of it.
"""
