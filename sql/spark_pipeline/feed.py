"""Feeding a table from a Spark streaming DataFrame: one micro-batch = one epoch, exactly once.

``conn.feed("bid", spark.readStream...load(), checkpoint_location=DIR)`` (a connection opened
with ``runtime="spark"``) starts a Structured Streaming query whose ``foreachBatch`` hands
micro-batch ``b`` to the database's :class:`~sql.spark_pipeline.driver.SparkRuntime`: the rows
go into the table and through every MV that reads it, committed in one version delta together
with the progress record ``(query_name, b)``. Spark replays the batches after its last commit
log entry when the query restarts; a batch the store already recorded is skipped, so a driver
killed after the store's commit but before Spark's log counts no row twice, and one killed
before the commit publishes nothing and redoes the batch.

``query_name`` (default ``feed/<table>``) names the progress record: two feeds into one table
need two names; a feed restarted with a new checkpoint location must get a new name too (its
batch ids start again at 0).

Callers: :meth:`sql.session.Connection.feed`.
"""

from __future__ import annotations

from sql.errors import CatalogError, SqlError


def start_feed(db, table: str, frame, *, checkpoint_location: str, query_name: str | None = None,
               trigger: dict | None = None):
    """Start the streaming query (module docstring); returns its ``StreamingQuery``."""
    if db.runtime != "spark":
        raise SqlError("feed() needs a connection opened with runtime='spark' (sql.connect(url, runtime='spark', "
                       "spark=session))")
    rel = db.catalog.get(table.lower())
    if rel is None or rel.kind != "table":
        raise CatalogError(f"table {table!r} does not exist" if rel is None else f"{table!r} is not a table")
    if not getattr(frame, "isStreaming", False):
        raise SqlError("feed() takes a streaming DataFrame (spark.readStream...); load a static one with "
                       "df.write.format('hummock') or insert_arrow")
    name = query_name or f"feed/{rel.name}"

    def on_batch(batch_frame, batch_id):
        with db.lock:
            db.check()
            db.rt.run_batch({rel.name: batch_frame}, batch_id, name)

    writer = frame.writeStream.foreachBatch(on_batch).option("checkpointLocation", checkpoint_location)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
