"""bench.sql_ingest on a tiny input: both ways run, their MVs agree (the bench refuses to print
figures otherwise), and the JSON line carries both rates and their ratio per query."""

import json

from bench import sql_ingest


def test_the_bench_prints_both_ways_and_their_ratio(capsys):
    sql_ingest.main(["--rows", "20000", "--repeats", "1", "--queries", "qa"])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["bench"] == "sql_ingest" and line["rows"] == 20000
    cond = line["conditions"]
    assert len(cond["load_avg_1m"]) == 2 and isinstance(cond["pure_python"], bool)
    assert bool(cond["twins_used"]) or not cond["pure_python"]
    for q in ("qa",):
        figures = line["events_per_s"][q]
        assert figures["sql_events_per_s"] > 0 and figures["stream_events_per_s"] > 0
        assert figures["ratio_cpu"] > 0 and figures["ratio_wall"] > 0


def test_the_stream_way_builds_the_planners_executors():
    batches = sql_ingest.make_batches(20000)
    _, _, sql_rows = sql_ingest.run_sql("q2", batches)
    _, _, stream_rows = sql_ingest.run_stream("q2", batches)
    assert sorted(sql_rows) == sorted(stream_rows) and sql_rows
