"""Child driver of tests/test_spark_pipeline_crash.py: feeds a JSON file stream into table ``t``
of the database at PATH through the Spark runtime (``Connection.feed``, trigger availableNow,
one file per micro-batch), then prints one JSON line with what the store holds and exits.

Usage: ``python spark_pipeline_child.py PATH SOURCE_DIR CHECKPOINT_DIR``. The database's tables
and MVs exist already (the parent creates them in-process, so no DDL batch counts towards a
kill point). Its own SparkSession is ``local[2,3]``: a failed task is retried (up to 3 attempts).

Crash knobs (environment):
- ``HUMMOCK_KILL_POINT=pipeline.before_commit:N`` / ``pipeline.after_commit:N`` (hummock/killpoints.py):
  the driver SIGKILLs itself at the N-th batch's commit;
- ``HUMMOCK_TEST_FAIL_TASK=STAGE:PARTITION`` with ``HUMMOCK_TEST_MARKS=DIR``: the first attempt
  of that stage task fails after doing its whole work (its SSTs are built and uploaded), in
  every batch, leaving a file in DIR; Spark retries it;
- ``HUMMOCK_PIPELINE_FAIL_TASK=STAGE:PARTITION`` (the pipeline's own hook, task.py): the first
  attempt of that stage task fails before it starts; with ``HUMMOCK_TEST_MARKS`` each such
  failure leaves a file in DIR;
- ``HUMMOCK_TEST_KILL_DRIVER=STAGE:N`` with ``HUMMOCK_TEST_MARKS=DIR``: the N-th task of stage
  STAGE (counted across batches by files in DIR) SIGKILLs the driver while its stage runs.

The ``HUMMOCK_TEST_*`` knobs are a subclass of the driver's stage function installed in its place (the
pipeline has no such hook of its own); being defined in ``__main__``, it travels to the workers
by value (cloudpickle). tests/ must not be on ``sys.path`` (tests/sql/ would shadow the ``sql``
package), so the script takes its own folder off it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

PIPELINE_FAIL_ENV = "HUMMOCK_PIPELINE_FAIL_TASK"   # sql/spark_pipeline/task.py's own hook
FAIL_ENV, KILL_ENV, MARKS_ENV, PID_ENV = ("HUMMOCK_TEST_FAIL_TASK", "HUMMOCK_TEST_KILL_DRIVER", "HUMMOCK_TEST_MARKS",
                                          "HUMMOCK_TEST_DRIVER_PID")


def _pair(value: str) -> tuple:
    a, _, b = value.partition(":")
    return int(a), int(b)


def _hooked(run_stage_task):
    """``run_stage_task`` with the crash knobs of the module docstring."""

    def hooked(plan, ctx, stage, partition, attempt, records):
        kill = os.environ.get(KILL_ENV)
        if kill:
            target, n = _pair(kill)
            if stage == target:
                marks = os.environ[MARKS_ENV]
                with open(os.path.join(marks, f"{time.time_ns()}-{os.getpid()}-{partition}"), "w"):
                    pass
                if len(os.listdir(marks)) == n:
                    os.kill(int(os.environ[PID_ENV]), signal.SIGKILL)
                    time.sleep(60)   # the driver is gone; so is this task soon
        if os.environ.get(PIPELINE_FAIL_ENV) == f"{stage}:{partition}" and attempt == 0:
            with open(os.path.join(os.environ[MARKS_ENV], f"fail-{time.time_ns()}-{partition}"), "w"):
                pass   # the pipeline's own hook fails this attempt (before any work)
        out = list(run_stage_task(plan, ctx, stage, partition, attempt, records))   # SSTs built, uploaded
        fail = os.environ.get(FAIL_ENV)
        if fail and (stage, partition) == _pair(fail) and attempt == 0:
            with open(os.path.join(os.environ[MARKS_ENV], f"fail-{time.time_ns()}-{partition}"), "w"):
                pass
            raise RuntimeError(f"injected failure of stage {stage} partition {partition}, attempt 0")
        yield from out

    hooked.hooked = True
    return hooked


def _hooked_stage_fn():
    from sql.spark_pipeline.driver import _StageFn

    class HookedStageFn(_StageFn):
        """The driver's stage body, the ``run_stage_task`` its code calls wrapped by
        :func:`_hooked` (in the worker process that runs it). Its base travels by value (the
        driver module's name now points here), so the wrap goes into the globals of the
        base's own ``__call__``."""

        def __call__(self, *args):
            base = super().__call__
            names = base.__func__.__globals__
            if not getattr(names["run_stage_task"], "hooked", False):
                names["run_stage_task"] = _hooked(names["run_stage_task"])
            return base(*args)

    return HookedStageFn


def main(path: str, source: str, checkpoint: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ[PID_ENV] = str(os.getpid())   # the workers inherit it
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2,3]").appName("hummock-pipeline-child")
             .config("spark.api.mode", "classic").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.warehouse.dir", os.path.join(checkpoint, "..", "warehouse"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import sql
    from sql.spark_pipeline import driver

    if any(os.environ.get(v) for v in (FAIL_ENV, KILL_ENV, PIPELINE_FAIL_ENV)):
        driver._StageFn = _hooked_stage_fn()
    conn = sql.connect(path, barrier_interval_ms=0, runtime="spark", spark=spark, partitions=2)
    frame = spark.readStream.schema("k long, g long").option("maxFilesPerTrigger", 1).json(source)
    query = conn.feed("t", frame, checkpoint_location=checkpoint, trigger={"availableNow": True})
    query.awaitTermination()
    rows = conn.execute("SELECT count(*), count(DISTINCT k) FROM t").fetchall()[0]
    print(json.dumps({"rows": rows[0], "distinct": rows[1], "batches": conn.db.rt.batches}), flush=True)
    conn.close()
    spark.stop()


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    main(*sys.argv[1:4])
