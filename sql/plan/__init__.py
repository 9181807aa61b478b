"""Logical plan nodes (:mod:`sql.plan.nodes`), the rewrite rules (:mod:`sql.plan.rules`) and
EXPLAIN text (:mod:`sql.plan.explain`). Stream planning (an MV's storage table, internal
state table ids in plan order) lives with the builder in :mod:`sql.build`."""
