"""Nexmark q0-q8 as MVs (bench/nexmark/queries.py) fed through the bulk INSERT path
(bench/nexmark/feed.py): each query that runs today maintains exactly what its batch
recomputation returns at the same epoch, whatever the batch and FLUSH cuts. All nine are in
``EXPECTED_TO_WORK`` (queries.py); a query added there without support would be a strict xfail
until it runs."""

import pytest

import sql
from bench.nexmark import feed
from bench.nexmark.__main__ import main as bench_main
from bench.nexmark.queries import EXPECTED_TO_WORK, QUERIES, create_tables_sql, resolve

EVENTS = 6_000


def _params() -> list:
    """One param per query (a list: pytest 10 refuses a generator); those not expected to work
    are strict xfails."""
    return [pytest.param(q, id=name, marks=() if name in EXPECTED_TO_WORK else pytest.mark.xfail(
        strict=True, raises=sql.SqlError, reason=f"needs {q.needs}")) for name, q in QUERIES.items()]


@pytest.mark.parametrize("query", _params())
def test_mv_equals_its_batch_recomputation(query):
    with sql.connect(":memory:", barrier_interval_ms=0) as conn:
        feed.setup(conn, [query])
        stats = feed.feed(conn, EVENTS, batch_size=1_000, flush_every=2_000, tables=query.reads)
        assert stats.events == EVENTS and stats.flushes == 3
        ok, maintained, recomputed = feed.check(conn, query)
        assert ok, (maintained.slice(0, 5).to_pylist(), recomputed.slice(0, 5).to_pylist())
        assert maintained.num_rows, "a query whose MV stays empty on 6,000 events checks nothing"


def test_the_result_does_not_depend_on_batch_or_flush_cuts():
    q4 = QUERIES["q4"]
    results = []
    for batch, flush_every in ((6_000, 6_000), (700, 1_500)):
        with sql.connect(":memory:", barrier_interval_ms=0) as conn:
            feed.setup(conn, [q4])
            feed.feed(conn, EVENTS, batch_size=batch, flush_every=flush_every, tables=q4.reads)
            results.append(feed.check(conn, q4)[1])
    assert results[0] == results[1] and len(results[0]) == 5


def test_check_finds_an_mv_that_differs_from_its_query():
    import dataclasses
    q1 = QUERIES["q1"]
    with sql.connect(":memory:", barrier_interval_ms=0) as conn:
        feed.setup(conn, [q1])
        feed.feed(conn, 2_000, tables=q1.reads)
        assert feed.check(conn, q1)[0]
        for other in ("SELECT auction, bidder, 0.9081 * price AS price, date_time FROM bid",
                      "SELECT auction, bidder, 0.908 * price AS price, date_time FROM bid WHERE auction <> 1000"):
            ok, maintained, recomputed = feed.check(conn, dataclasses.replace(q1, select=other))
            assert not ok and maintained.num_rows == 1_840


def test_feed_fills_only_the_tables_asked_for():
    with sql.connect(":memory:", barrier_interval_ms=0) as conn:
        feed.setup(conn)
        stats = feed.feed(conn, 5_000, tables=("person", "bid"), pregenerate=True)
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("person", "auction", "bid")}
    assert counts == {"person": 100, "auction": 0, "bid": 4_600} == {t: stats.rows[t] for t in counts}


def test_tables_and_resolve():
    assert [s.split()[2] for s in create_tables_sql()] == ["person", "auction", "bid"]
    assert [q.name for q in resolve("all")] == [f"q{i}" for i in range(9)]
    assert [q.name for q in resolve(["q3", "q0"])] == ["q0", "q3"]
    with pytest.raises(ValueError, match="q9"):
        resolve(["q9"])


def test_the_benchmark_prints_rates_and_a_checked_json_line(capsys):
    import json
    assert bench_main(["--query", "q0", "q2", "q5", "--events", "3000", "--flush-every", "1000"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    line = json.loads(lines[-1])
    assert line["bench"] == "nexmark" and line["checked"] is True and line["events"] == 3000
    ran = {"q0", "q2"} | ({"q5"} & set(EXPECTED_TO_WORK))
    assert set(line["events_per_s"]) == ran and all(v > 0 for v in line["events_per_s"].values())
    assert set(line["fed_events_per_s"]) == ran and all(v > 0 for v in line["fed_events_per_s"].values())
    assert set(line["fed_per_cpu_s"]) == ran and all(v > 0 for v in line["fed_per_cpu_s"].values())
    assert all(0 < r["cpu_seconds"] for r in line["results"] if "fed_rows" in r)
    fed = {r["query"]: r["fed_rows"] for r in line["results"] if "fed_rows" in r}
    assert 0 < fed["q0"] < 3000   # q0 reads bids only: the persons and auctions are not fed
    assert ("q5" in line["unsupported"]) == ("q5" not in EXPECTED_TO_WORK)
    assert any(s.startswith("  q0:") and "MV = batch" in s for s in lines)


@pytest.mark.parametrize("query", _params())
def test_mv_over_push_sources_equals_the_batch_query_over_tables(query):
    """bench.nexmark --push: the same events into push sources (nothing stored) and into tables;
    the MV over the sources equals the query run in batch over the tables."""
    with sql.connect(":memory:", barrier_interval_ms=0) as conn, \
            sql.connect(":memory:", barrier_interval_ms=0) as tables:
        feed.setup(conn, [query], push=True)
        assert {conn.db.catalog.get(t).kind for t in ("person", "auction", "bid")} == {"source"}
        feed.setup(tables)
        for c in (conn, tables):
            feed.feed(c, EVENTS, batch_size=1_000, flush_every=2_000, tables=query.reads)
        ok, maintained, recomputed = feed.check_against(conn, tables, query)
        assert ok, (maintained.slice(0, 5).to_pylist(), recomputed.slice(0, 5).to_pylist())
        assert maintained.num_rows


def test_the_benchmark_over_push_sources_checks_against_tables(capsys):
    import json
    assert bench_main(["--query", "q0", "q3", "--events", "3000", "--flush-every", "1000", "--push"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["relations"] == "push" and line["checked"] is True and set(line["events_per_s"]) == {"q0", "q3"}
