"""bench.stream_agg on a tiny input: both ways (the runtime graph and the HashAgg alone) run for
a retractable workload and an append-only one over a projected key, and the JSON line carries a CPU rate
for each, with the machine's conditions."""

import json

from bench import stream_agg


def test_the_bench_prints_cpu_rates_of_both_ways(capsys):
    workloads = ["hash_agg_1k_retractable", "hash_agg_10k"]
    stream_agg.main(["--chunks", "2", "--repeats", "1", "--workloads", ",".join(workloads),
                     "--compactor", "none"])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["bench"] == "stream_agg" and line["chunks"] == 2
    assert sorted(line["cpu_rows_per_s"]) == sorted(workloads)
    for figures in line["cpu_rows_per_s"].values():
        assert figures["runtime"] > 0 and figures["direct"] > 0
    assert "load" in line["machine"]["conditions"]


def test_the_direct_input_computes_the_projected_group_key():
    from bench import stream as bs
    _, chunks = bs.make_chunks(2)
    schema, out, key, b = stream_agg.direct_input("hash_agg_10k", chunks)
    assert list(schema.names) == ["g", "id", "b"] and key == [0] and b == 2
    ids = chunks[1].columns[0].to_pylist()
    assert out[1].columns[0].to_pylist() == [i % 10_000 for i in ids]
    assert out[1].columns[2].equals(chunks[1].columns[2])


def test_per_group_builds_the_hash_aggs_without_the_columnar_state(capsys):
    try:
        stream_agg.main(["--chunks", "2", "--repeats", "1", "--workloads", "hash_agg_10k", "--ways", "direct",
                         "--compactor", "none", "--per-group"])
        line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert line["columnar"] is False and line["cpu_rows_per_s"]["hash_agg_10k"]["direct"] > 0
    finally:
        stream_agg.COLUMNAR["on"] = True
