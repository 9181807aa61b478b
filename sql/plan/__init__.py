"""Logical plan nodes (:mod:`sql.plan.nodes`), the rewrite rules (:mod:`sql.plan.rules`), stream
planning (:mod:`sql.plan.stream`: an MV's storage table and internal state table ids) and
EXPLAIN text (:mod:`sql.plan.explain`)."""
