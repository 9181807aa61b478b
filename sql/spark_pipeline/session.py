"""A SparkSession for the Spark runtime's own entry points (``hummock sql --spark MASTER``).

Spark's Python workers must run the driver's interpreter, where this package and its compiled
modules are installed: ``PYSPARK_PYTHON`` is set to ``sys.executable`` unless the user set it.
A ``local[...]`` master binds to the loopback address (``SPARK_LOCAL_IP``) unless set. Python
users pass their own session to ``sql.connect(url, runtime="spark", spark=session)`` and set
``PYSPARK_PYTHON`` themselves (docs/spark.md). Callers: :mod:`cli.shell`.
"""

from __future__ import annotations

import os
import sys


def spark_session(master: str, app_name: str = "hummock"):
    """``getOrCreate`` a session on ``master`` (module docstring)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.api.mode", "classic").config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session
