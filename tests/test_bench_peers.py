"""bench.peers (issue 30 item 7) at tiny sizes: every engine's answer to q1, q2, qa and qt passes
the pandas reference check, the check catches a wrong answer, and without Bytewax the bench
says so and still succeeds. Only results are asserted, never timings."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pandas", reason="bench.peers checks against pandas (the bench / spark extra)")

from bench import peers  # noqa: E402

TINY = ["--rows", "2000", "--batch", "500", "--rounds", "1", "--no-warmup"]


def _line(out: str) -> dict:
    return json.loads(next(line for line in out.splitlines() if line.startswith('{"bench": "peers"')))


@pytest.mark.parametrize("engine", peers.ENGINES)
def test_each_engine_answers_every_query_as_pandas_does(engine, capsys):
    if engine == "bytewax" and peers.bytewax_version() is None:
        pytest.skip("bytewax is not installed (pip install -e '.[bench]')")
    assert peers.main([*TINY, "--engines", engine]) == 0
    line = _line(capsys.readouterr().out)
    assert line["checked"] is True
    assert set(line["events_per_s"]) == {engine}
    assert set(line["events_per_s"][engine]) == set(peers.QUERIES)
    assert line["rows"] == 2000 and "conditions" in line["machine"]
    if engine in peers.BATCH_TIMED:   # 4 batches of 500 rows a query, one round
        for stats in line["batch_ms"][engine].values():
            assert 0 < stats["p50"] <= stats["p90"] <= stats["p99"] <= stats["max"]
            assert stats["p50"] <= stats["max"] and stats["mean"] > 0
    else:
        assert engine not in line["batch_ms"]


def test_batch_percentiles():
    assert peers.batch_percentiles([]) == {}
    stats = peers.batch_percentiles([0.001 * i for i in range(1, 101)])   # 1..100 ms
    assert stats == {"p50": 50.5, "p90": 91.0, "p99": 100.0, "max": 100.0, "mean": 50.5}


@pytest.mark.parametrize("query", sorted(peers.QUERIES))
def test_the_check_catches_a_wrong_answer(query):
    batches = peers.rebatch(peers.make_batches(2000), 500)
    feed = peers.Feed(batches, ["hummock_stream"])
    try:
        rows = peers.run_hummock_stream(query, feed)[2]
    finally:
        feed.close()
    assert rows   # q2 keeps ~8 of these rows (seeded)
    ref = peers.reference(query, batches)
    peers.check("hummock_stream", query, rows, ref)
    wrong = list(rows)
    first = list(wrong[0])
    first[-1 if query in ("qa", "qt") else 1] += 1   # one value off by one: max / price / bidder
    wrong[0] = tuple(first)
    with pytest.raises(peers.CheckError, match=query):
        peers.check("hummock_stream", query, wrong, ref)
    with pytest.raises(peers.CheckError):
        peers.check("hummock_stream", query, rows[1:], ref)   # a row missing


def test_without_bytewax_the_bench_says_so_and_succeeds(monkeypatch, capsys):
    monkeypatch.setattr(peers, "bytewax_version", lambda: None)
    assert peers.main([*TINY, "--engines", "hummock_stream,bytewax", "--queries", "q2"]) == 0
    out = capsys.readouterr()
    line = _line(out.out)
    assert set(line["events_per_s"]) == {"hummock_stream"} and line["bytewax"] is None
    assert line["ratio_hummock_sql_bytewax"] is None
    assert "bytewax is not installed" in out.err and any("bytewax" in n for n in line["notes"])
