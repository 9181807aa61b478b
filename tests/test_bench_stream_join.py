"""bench.stream_join on a tiny input: both ways (the runtime graph and the HashJoin alone) run for
the 1:1 and the 1:n workload, the JSON line carries a CPU rate (best and median) for each with the
machine's conditions, and the direct input splits each chunk as the workload's Filter and
Project do."""

import json

from bench import stream_join


def test_the_bench_prints_cpu_rates_of_both_ways(capsys):
    workloads = ["hash_join_1to1", "hash_join_1ton"]
    stream_join.main(["--chunks", "2", "--repeats", "1", "--workloads", ",".join(workloads),
                      "--ways", "runtime,direct", "--compactor", "none"])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["bench"] == "stream_join" and line["chunks"] == 2
    assert sorted(line["cpu_rows_per_s"]) == sorted(workloads)
    for figures in line["cpu_rows_per_s"].values():
        for way in ("runtime", "direct"):
            assert figures[way]["best"] >= figures[way]["median"] > 0
    assert "load" in line["machine"]["conditions"]


def test_the_side_chunks_are_the_filtered_and_projected_rows():
    from bench import stream as bs
    _, chunks = bs.make_chunks(2)
    lschema, rschema, pairs = stream_join.side_chunks("hash_join_1ton", chunks)
    assert list(lschema.names) == ["id", "k", "a"] and list(rschema.names) == ["id", "k", "b"]
    ids = chunks[1].columns[0].to_pylist()
    left, right = pairs[1]
    assert left.columns[0].to_pylist() == [i for i in ids if i % 11 == 0]
    assert right.columns[0].to_pylist() == [i for i in ids if i % 11]
    assert right.columns[1].to_pylist() == [i // 11 for i in ids if i % 11]
    b = dict(zip(ids, chunks[1].columns[2].to_pylist()))
    assert right.columns[2].to_pylist() == [b[i] for i in ids if i % 11]
