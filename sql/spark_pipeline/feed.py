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
batch ids start again at 0: a batch id below the recorded one is refused with ``StreamError``,
never skipped silently -- Spark replays at most the last batch).

:func:`insert_frame` is the static counterpart (``conn.insert_dataframe``): one batch of a
DataFrame's rows through the table and its MVs, read by Spark's tasks (no row passes through
the driver) -- a load that MVs see, where a bulk load (``df.write.format("hummock")``) into a
table MVs read is refused.

Callers: :meth:`sql.session.Connection.feed` and ``insert_dataframe``.
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


def insert_frame(db, table: str, frame) -> int:
    """Insert a (static) Spark DataFrame's rows into ``table`` and through every MV reading it, as
    one micro-batch committed at once (module docstring); returns the committed epoch."""
    if db.runtime != "spark":
        raise SqlError("insert_dataframe() needs a connection opened with runtime='spark'; in-process, use "
                       "insert_arrow(table, df.toArrow())")
    rel = db.catalog.get(table.lower())
    if rel is None or rel.kind != "table":
        raise CatalogError(f"table {table!r} does not exist" if rel is None else f"{table!r} is not a table")
    if getattr(frame, "isStreaming", False):
        raise SqlError("insert_dataframe() takes a static DataFrame; feed() takes a streaming one")
    with db.lock:
        db.check()
        return db.rt.run_batch({rel.name: frame})
