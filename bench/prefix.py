"""Benchmark ``prefix``: a join-style probe for an absent key prefix over 20 overlapping SSTs.

Layout: table keys ``vnode (2 bytes) || join key (8) || row id (4)``, prefix length 10 (vnode +
join key). ``--sub-levels`` commits (default 20), each writing one row for every even join key,
so every commit is one L0 sub-level covering the whole key range (compaction off): a probe
meets every SST. Probes ask for odd join keys (absent). Reported per engine/setting: the
median time of one probe (``iter(prefix=p)`` then its first ``next``; median of ``--repeats``
runs of ``--probes`` probes) and the data blocks read per probe (block cache lookups; for
RocksDB its data-block cache hit + miss tickers).

Rows: ``hummock`` with the prefix declared (``set_table_options``), ``hummock-undeclared``
(no prefix filter: every SST opens a block), ``rocksdict`` (RocksDB with a fixed 14-byte prefix
extractor -- the 4-byte table id of hummock's user key plus the same 10 bytes --, a 10-bit
bloom holding prefixes and whole keys, ``prefix_same_as_start`` seeks, auto compaction off and
20 flushed L0 files), and ``state_table`` (the same probe through ``StateTable.iter_with_prefix``
with ``prefix_len_hint=1``, relational decoding included). Target (issue 11): an absent-prefix
probe <= 2 us over 20 SSTs, no block read.

Run: ``PYTHONPATH=$PWD python -m bench.prefix [--prefixes N --sub-levels S --probes P]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time

from bench.harness import report

TABLE = 1
PREFIX_LEN = 10


def table_key(join_key: int, row: int, vnode: int = 7) -> bytes:
    return vnode.to_bytes(2, "big") + join_key.to_bytes(8, "big") + row.to_bytes(4, "big")


def probe_prefixes(n: int, count: int) -> list[bytes]:
    return [table_key(2 * (i % n) + 1, 0)[:PREFIX_LEN] for i in range(count)]


def median_us(fn, probes: int, repeats: int) -> float:
    fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) / probes * 1e6


def hummock_rows(root: str, n: int, sub_levels: int, probes: list[bytes], repeats: int) -> list[dict]:
    from hummock import HummockStorage, StorageOptions

    out = []
    for declared in (True, False):
        with HummockStorage.open(f"{root}/hummock-{declared}", StorageOptions(compactor="none")) as store:
            if declared:
                store.set_table_options(TABLE, prefix_len=PREFIX_LEN)
            epoch = 1 << 16
            for sub in range(sub_levels):
                store.ingest_batch(TABLE, [(table_key(2 * k, sub), b"v" * 16) for k in range(n)], epoch)
                store.checkpoint(epoch)
                epoch += 1 << 16
            assert len(store.version().l0) == sub_levels
            read, it = epoch - (1 << 16), store.iter

            def run():
                for p in probes:
                    next(it(TABLE, read, prefix=p), None)
            before = store.stats()["block_cache"]
            run()
            after = store.stats()["block_cache"]
            blocks = (after["hits"] + after["misses"] - before["hits"] - before["misses"]) / len(probes)
            us = median_us(run, len(probes), repeats)
            present = table_key(2 * (n // 2), 0)[:PREFIX_LEN]
            hits = len(list(it(TABLE, read, prefix=present)))
            assert hits == sub_levels
            out.append({"engine": "hummock" if declared else "hummock-undeclared", "probe_us": us,
                        "blocks_per_probe": blocks, "ssts": sub_levels})
    return out


def _ticker(stats: str, name: str) -> int:
    found = re.search(rf"{re.escape(name)} COUNT : (\d+)", stats)
    return int(found.group(1)) if found else 0


def rocksdict_row(root: str, n: int, sub_levels: int, probes: list[bytes], repeats: int) -> dict:
    from rocksdict import BlockBasedOptions, Options, Rdict, ReadOptions, SliceTransform, WriteBatch

    opts = Options(raw_mode=True)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    opts.set_block_based_table_factory(table)
    opts.set_prefix_extractor(SliceTransform.create_fixed_prefix(4 + PREFIX_LEN))
    opts.create_if_missing(True)
    opts.set_disable_auto_compactions(True)
    opts.set_level_zero_file_num_compaction_trigger(1000)
    opts.set_level_zero_slowdown_writes_trigger(1000)
    opts.set_level_zero_stop_writes_trigger(1000)
    opts.enable_statistics()
    db = Rdict(f"{root}/rocksdict", opts, column_families={"default": opts})
    try:
        tid = TABLE.to_bytes(4, "big")
        for sub in range(sub_levels):
            wb = WriteBatch(raw_mode=True)
            for k in range(n):
                wb.put(tid + table_key(2 * k, sub), b"v" * 16)
            db.write(wb)
            db.flush()
        files = int(db.property_value("rocksdb.num-files-at-level0"))
        assert files == sub_levels, files
        read_opts = ReadOptions()
        read_opts.set_prefix_same_as_start(True)
        full = [tid + p for p in probes]

        def run():
            for p in full:
                it = db.iter(read_opts)
                it.seek(p)
                if it.valid():
                    it.key(), it.value()

        def data_blocks():
            text = opts.get_statistics()
            return _ticker(text, "rocksdb.block.cache.data.hit") + _ticker(text, "rocksdb.block.cache.data.miss")
        before = data_blocks()
        run()
        blocks = (data_blocks() - before) / len(probes)
        us = median_us(run, len(probes), repeats)
        return {"engine": "rocksdict", "probe_us": us, "blocks_per_probe": blocks, "ssts": files}
    finally:
        db.close()


def state_table_row(root: str, n: int, sub_levels: int, probe_count: int, repeats: int) -> dict:
    from hummock import HummockStorage, StorageOptions
    from hummock.key import new_epoch
    from relational.state_table import StateTable
    from relational.types import DataType as T

    with HummockStorage.open(f"{root}/state-table", StorageOptions(compactor="none")) as store:
        table = StateTable(store, TABLE, [T.BIGINT, T.INT, T.VARCHAR], [0, 1], dist_key_indices=[0],
                           consistent=False, prefix_len_hint=1)
        table.init_epoch(new_epoch())
        for sub in range(sub_levels):
            for k in range(n):
                table.insert((2 * k, sub, "v"))
            written = table.epoch
            table.commit(new_epoch())
            store.checkpoint(written)
        keys = [(2 * (i % n) + 1,) for i in range(probe_count)]
        scan = table.iter_with_prefix

        def run():
            for k in keys:
                next(scan(k), None)
        before = store.stats()["block_cache"]
        run()
        after = store.stats()["block_cache"]
        blocks = (after["hits"] + after["misses"] - before["hits"] - before["misses"]) / probe_count
        return {"engine": "state_table", "probe_us": median_us(run, probe_count, repeats),
                "blocks_per_probe": blocks, "ssts": len(store.version().l0)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefixes", type=int, default=2000, help="present join keys (rows per commit)")
    parser.add_argument("--sub-levels", type=int, default=20, help="commits = L0 sub-levels = SSTs a probe meets")
    parser.add_argument("--probes", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-rocksdict", action="store_true")
    args = parser.parse_args(argv)
    probes = probe_prefixes(args.prefixes, args.probes)
    with tempfile.TemporaryDirectory() as root:
        rows = hummock_rows(root, args.prefixes, args.sub_levels, probes, args.repeats)
        if not args.no_rocksdict:
            rows.append(rocksdict_row(root, args.prefixes, args.sub_levels, probes, args.repeats))
        rows.append(state_table_row(root, args.prefixes, args.sub_levels, args.probes // 4, args.repeats))
    report("prefix", rows, ["engine", "ssts", "probe_us", "blocks_per_probe"])


if __name__ == "__main__":
    main()
