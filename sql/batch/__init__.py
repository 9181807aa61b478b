"""Batch execution of a logical plan over one pinned snapshot (:mod:`sql.batch.execute`)."""
