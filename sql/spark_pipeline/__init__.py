"""The Spark runtime of the streaming pipeline (DESIGN.md section 9b): the SQL catalog's tables
and MVs maintained by Spark micro-batches over Hummock state, one epoch per batch.

- :mod:`~sql.spark_pipeline.fragments`: plans cut into fragments, edges and stages;
- :mod:`~sql.spark_pipeline.task`: what a Spark task runs (one stage's fragments, one partition);
- :mod:`~sql.spark_pipeline.driver`: :class:`SparkRuntime`, the driver (batches, the one commit);
- :mod:`~sql.spark_pipeline.pickling`: plans travel to the workers pickled.

Users reach it through ``sql.connect(url, runtime="spark", spark=session)`` (docs/spark.md).
pyspark is imported only where Spark is used; the in-process runtime never imports this package.
"""
