"""The ``hummock`` command line, run as a subprocess (``python -m cli``) the way a user runs
it: help and version, ``inspect`` on stores the tests write (levels, an SST decoded through the
catalog, the manifest, ``verify`` finding damage and naming the object), ``compact`` on a local
store, ``bench``, and the demo. The subprocess inherits ``HUMMOCK_PURE_PYTHON``, so the suite's
pure run covers the twins too."""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.key import new_epoch
from relational import StateTable
from relational.catalog import Catalog, TableDesc
from relational.types import DataType
from cli import verify as cli_verify
from cli.common import open_objects

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCHEMA = [("id", DataType.BIGINT), ("name", DataType.VARCHAR)]
TABLE_ID, RAW_TABLE_ID = 7, 9


def hummock(*args, check_rc=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "cli", *map(str, args)], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=300)
    if check_rc is not None:
        assert out.returncode == check_rc, (out.returncode, out.stdout, out.stderr)
    return out


def hummock_json(*args):
    return json.loads(hummock(*args, "--json", check_rc=0).stdout)


# Several command lines in one subprocess: each runs through cli.main as ``python -m cli`` runs it
# (its own stdout and stderr, its exit code: main's return value, a SystemExit's code, or 1 and the
# traceback for an uncaught exception), one after another. The interpreter and the command modules
# are imported once (about a second each time on a quiet machine, several under load) instead of
# once per command line. Only for command lines with nothing done in between (the test checks after).
_EACH = """\
import contextlib, io, json, sys, traceback
from cli.main import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) or exc.code is None else 1
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            rc = 1
    results.append([0 if rc is None else rc, out.getvalue(), err.getvalue()])
sys.stdout.write(json.dumps(results))
"""


def hummock_each(*invocations, check_rc=None) -> list:
    """``hummock(*args)`` for each argument list, all in one subprocess (see ``_EACH``)."""
    argvs = [[str(a) for a in args] for args in invocations]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _EACH, json.dumps(argvs)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)
    outs = [subprocess.CompletedProcess(["hummock", *argv], rc, stdout, stderr)
            for argv, (rc, stdout, stderr) in zip(argvs, json.loads(done.stdout))]
    if check_rc is not None:
        for out in outs:
            assert out.returncode == check_rc, (out.args, out.returncode, out.stdout, out.stderr)
    return outs


def write_store(path, rounds: int = 3, rows: int = 100) -> dict:
    """A store with one catalogued table (ids 0..rounds*rows, id 5 deleted in the last round),
    one uncatalogued raw KV pair, one L0 sub-level per commit; returns the table's rows."""
    model = {}
    target = path if not isinstance(path, (str, pathlib.Path)) else str(path)
    with HummockStorage.open(target, StorageOptions(compactor="none")) as db:
        table = StateTable(db, TABLE_ID, SCHEMA, pk_indices=[0], dist_key_indices=[0])
        table.init_epoch(new_epoch())
        Catalog(db).put(TableDesc(TABLE_ID, "people", tuple(SCHEMA), (0,), dist_key_indices=(0,)), table.epoch)
        for r in range(rounds):
            for i in range(r * rows, (r + 1) * rows):
                table.insert((i, f"n{i}"))
                model[i] = f"n{i}"
            if r == rounds - 1 and r > 0:
                table.delete((5, "n5"))
                del model[5]
            epoch = table.epoch
            table.commit(new_epoch())
            db.checkpoint(epoch)
        db.ingest_batch(RAW_TABLE_ID, [(b"raw", b"\x00\x01")], table.epoch)
        db.checkpoint(table.epoch)
    return model


def read_table(path) -> dict:
    with HummockStorage.open(str(path), read_only=True) as db:
        from relational import StorageTable
        reader = StorageTable(db, TABLE_ID, SCHEMA, pk_indices=[0], dist_key_indices=[0])
        return {r["id"]: r["name"] for b in reader.batch_iter(db.max_committed_epoch) for r in b.to_pylist()}


def files_of(path) -> dict:
    """Every file under ``path`` but reader leases (a read-only open's pin) -> its bytes."""
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in pathlib.Path(path).rglob("*")
            if p.is_file() and "leases" not in p.parts}


def flip_byte(path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "db"
    write_store(path)
    return path


# --- help, version, demo ---------------------------------------------------------------------

def test_help_lists_every_subcommand_and_each_has_help():
    out = hummock("--help", check_rc=0).stdout
    for name in ("demo", "sql", "run", "inspect", "compact", "bench"):
        assert name in out
    for sub in hummock_each(["inspect", "--help"], ["inspect", "x", "levels", "--help"], ["inspect", "x", "sst", "--help"],
                            ["inspect", "x", "manifest", "--help"], ["inspect", "x", "verify", "--help"],
                            ["compact", "--help"], ["demo", "--help"], ["sql", "--help"], ["run", "--help"],
                            check_rc=0):
        assert sub.stdout.startswith("usage: hummock"), sub.args


def test_top_level_help_imports_no_command_module_and_matches_their_help():
    """``hummock --help`` lists each command by the one-line help in cli/main.py (equal to the
    help its module registers) without importing any command module, the store or SQL layers
    (nor the ``hummock`` package for its version: ``--version`` alone reads it)."""
    code = ("import contextlib, io, sys\nfrom cli import main as cli\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    cli.main(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hummock', 'relational', 'stream', 'sql')\n"
            "             or m.startswith('cli.') and m != 'cli.main'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    import argparse

    from cli import main as cli
    for name, module, help_text in cli.SUBCOMMANDS:
        full = cli.build_parser(load={name})
        action = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
        registered = next(c.help for c in action._choices_actions if c.dest == name)
        assert " ".join(registered.split()) == help_text, name


def test_version_flag():
    out = hummock("--version", check_rc=0)
    assert out.stdout.startswith("hummock ")


def test_bad_usage_exits_2():
    assert [out.returncode for out in hummock_each(["inspect"], ["inspect", "/nowhere", "nonsense"])] == [2, 2]


def test_demo_streams_nexmark_into_mvs_compacts_and_passes_its_self_check(tmp_path):
    """README's first command, on 20,000 events: Spark compaction when Java is here (the default),
    else the in-process runner, said so; every MV equals its batch recomputation."""
    from cli.demo import java_available
    out = hummock("demo", tmp_path / "db", "--events", "20000", "--rate", "8000")
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    wall_rate = int(text.split("streamed 20,000 events in ")[1].split("(")[1].split(" events/s")[0].replace(",", ""))
    assert wall_rate <= 8_400                                              # --rate caps the stream
    for mv in ("nexmark_q1", "nexmark_q2", "nexmark_q3", "nexmark_q4"):
        assert f"  {mv}: " in text and f"  {mv}: " in text.split("self-check at committed epoch")[1]
    assert "streamed 20,000 events" in text and "      20,000 events" in text
    runner = "Spark (local[*])" if java_available() else "in-process"
    assert f"compaction pass ({runner})" in text and "after 0 L0 sub-levels" in text
    assert ("Java was not found" in text) == (not java_available())
    assert text.rstrip().endswith("self-check passed") and "FAILED" not in text
    assert "Traceback" not in out.stderr
    assert hummock("inspect", tmp_path / "db", "verify").returncode == 0    # the store it leaves is sound
    again = hummock("demo", tmp_path / "db", "--events", "1000", "--compactor", "local")
    assert again.returncode == 3 and "already holds person" in again.stderr and "Traceback" not in again.stderr


def test_demo_live_figures_read_counter_mvs_instead_of_scanning_every_mv(tmp_path):
    """After each FLUSH the live figures read each MV's one-row ``count(*)`` counter MV (kept from
    the MV's change stream), never a full ``SELECT count(*)`` of the MV, and the counts are exact."""
    import io
    import sql
    from cli.demo import _row_counters
    from cli.demo_live import LiveFigures
    from sql import nexmark_feed as feed
    from sql.nexmark_queries import QUERIES
    queries = [QUERIES["q1"], QUERIES["q2"]]
    with sql.connect(str(tmp_path / "db"), barrier_interval_ms=0, compactor="local") as conn:
        feed.setup(conn, queries)
        counters = _row_counters(conn, queries)
        assert counters == {"nexmark_q1": "nexmark_q1__rows", "nexmark_q2": "nexmark_q2__rows"}
        live = LiveFigures(conn, queries, 3_000, io.StringIO(), counters)
        executed, seen = [], []
        execute = conn.execute

        def spy(statement, *args, **kwargs):
            executed.append(statement)
            return execute(statement, *args, **kwargs)

        def on_flush(stats):
            conn.execute = spy
            try:
                rows = live.figures(stats)["rows"]
            finally:
                del conn.execute
            seen.append((rows, {q.mv: execute(f"SELECT count(*) FROM {q.mv}").fetchone()[0] for q in queries}))

        feed.feed(conn, 3_000, batch_size=1_000, flush_every=1_000, tables=("bid",), on_flush=on_flush)
    assert len(seen) == 3 and seen[-1][1]["nexmark_q1"] > 0
    assert all(figures == truth for figures, truth in seen)
    assert executed and not any("count(*)" in s for s in executed), executed


def test_demo_runs_against_s3(s3_server, monkeypatch):
    from s3_server import CREDENTIALS, REGION
    objects = s3_server.new_store()
    try:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["access_key_id"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["secret_access_key"])
        url = f"s3://{objects.bucket}/{objects.prefix}?endpoint={s3_server.endpoint_url}&region={REGION}"
        out = hummock("demo", url, "--events", "5000", "--compactor", "local")
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"database: {url}; compaction: in-process" in out.stdout
        assert out.stdout.rstrip().endswith("self-check passed")
        assert hummock_json("inspect", url, "verify")["ok"]
    finally:
        objects.close()
        s3_server.drop_bucket(objects.bucket)


# --- inspect levels / sst / manifest -----------------------------------------------------------

def test_inspect_levels_shows_every_sst_of_the_version(store):
    as_json, as_text = hummock_each(["inspect", store, "levels", "--json"], ["inspect", store, "levels", "--ssts"],
                                    check_rc=0)
    report = json.loads(as_json.stdout)
    with HummockStorage.open(str(store), read_only=True) as db:
        version = db.version()
    assert report["version_id"] == version.id
    assert report["level_ssts"] == list(version.level_counts())
    assert report["level_bytes"] == list(version.level_sizes())
    assert sorted(s["sst"] for s in report["ssts"]) == sorted(version.sst_ids())
    assert [g["level"] for g in report["groups"][:4]] == [f"L0.{s.sub_level_id}" for s in version.l0]
    text = as_text.stdout
    assert "L0." in text and "L6" in text and f"{TABLE_ID}:" in text


def test_inspect_sst_decodes_entries_through_the_catalog(store):
    levels = hummock_json("inspect", store, "levels")
    by_tables = {tuple(s["tables"]): s["sst"] for s in levels["ssts"]}
    first = by_tables[(TABLE_ID, 0xFFFFFFFF)]          # the first commit: rows and the catalog record
    with_tombstones = [s["sst"] for s in levels["ssts"] if s["tombstones"]]
    full, raw, unknown, text, *tombstoned = hummock_each(
        ["inspect", store, "sst", first, "--limit", "-1", "--json"],
        ["inspect", store, "sst", first, "--raw", "--limit", "3", "--json"],
        ["inspect", store, "sst", by_tables[(RAW_TABLE_ID,)], "--json"],
        ["inspect", store, "sst", first],
        *(["inspect", store, "sst", sst, "--limit", "-1", "--json"] for sst in with_tombstones), check_rc=0)
    report = json.loads(full.stdout)
    assert report["key_count"] == len(report["entries"]) == 101
    assert report["tables"] == {str(TABLE_ID): "people", str(0xFFFFFFFF): "(catalog)"}
    rows = [e for e in report["entries"] if e["table_id"] == TABLE_ID]
    assert len(rows) == 100 and all(e["kind"] == "put" for e in rows)
    for e in rows:
        pk = int(e["key"].split("pk=(")[1].rstrip(")"))
        assert e["value"] == f"id={pk}, name='n{pk}'"
    [record] = [e for e in report["entries"] if e["table_id"] == 0xFFFFFFFF]
    assert record["key"] == f"table/{TABLE_ID}" and record["value"].startswith("people(id BIGINT")
    assert sum(b["stored_len"] for b in report["blocks"]) < report["file_size"]

    raw = json.loads(raw.stdout)
    assert len(raw["entries"]) == 3 and all("pk=" not in e["key"] for e in raw["entries"])

    deletes = [e for out in tombstoned for e in json.loads(out.stdout)["entries"] if e["kind"] == "delete"]
    assert len(deletes) == 1 and deletes[0]["key"].endswith("pk=(5)") and deletes[0].get("value") is None

    unknown = json.loads(unknown.stdout)
    assert unknown["entries"] == [dict(unknown["entries"][0], key=b"raw".hex(), value="0001")]
    text = text.stdout
    assert "people" in text and "name='n" in text and "compression" in text


def test_inspect_sst_of_an_unknown_id_is_an_error(store):
    out = hummock("inspect", store, "sst", "999999")
    assert out.returncode == 3 and "no SST 999999" in out.stderr


def test_inspect_manifest_lists_the_version_history(store):
    as_json, as_text = hummock_each(["inspect", store, "manifest", "--json"], ["inspect", store, "manifest"],
                                    check_rc=0)
    report = json.loads(as_json.stdout)
    deltas = [o for o in report["objects"] if o["type"] == "delta"]
    assert [o["id"] for o in deltas] == list(range(1, report["version_id"] + 1))
    commits = [o for o in deltas if o["kind"] == "commit"]
    assert len(commits) == 4 and all(len(o["added"]) == 1 for o in commits)
    assert commits[-1]["max_committed_epoch"] == report["max_committed_epoch"]
    assert "commit epoch" in as_text.stdout


def test_inspect_on_a_missing_store_fails_cleanly(tmp_path):
    out = hummock("inspect", tmp_path / "absent", "levels")
    assert out.returncode == 3 and "Traceback" not in out.stderr and out.stderr.startswith("hummock: error")


def test_inspect_reads_a_store_on_s3(s3_server, monkeypatch):
    from s3_server import CREDENTIALS, REGION
    objects = s3_server.new_store()
    try:
        write_store(objects, rounds=2, rows=10)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["access_key_id"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["secret_access_key"])
        url = f"s3://{objects.bucket}/{objects.prefix}?endpoint={s3_server.endpoint_url}&region={REGION}"
        levels, report = (json.loads(out.stdout) for out in
                          hummock_each(["inspect", url, "levels", "--json"], ["inspect", url, "verify", "--json"],
                                       check_rc=0))
        assert sum(levels["level_ssts"]) == 3
        assert report["ok"] and report["ssts"] == 3 and report["keys"] == 1 + 20 + 1 + 1
        sst = hummock_json("inspect", url, "sst", levels["ssts"][-1]["sst"])
        assert sst["tables"] == {str(TABLE_ID): "people", str(0xFFFFFFFF): "(catalog)"}
    finally:
        objects.close()
        s3_server.drop_bucket(objects.bucket)


# --- inspect verify ------------------------------------------------------------------------------

def test_verify_passes_on_a_sound_store_and_modifies_nothing(store):
    before = files_of(store)
    out, as_json = hummock_each(["inspect", store, "verify"], ["inspect", store, "verify", "--json"], check_rc=0)
    assert "0 problem(s): store is consistent" in out.stdout
    report = json.loads(as_json.stdout)
    assert report["ok"] and report["ssts"] == 4 and report["keys"] == 303 and report["catalog_records"] == 1
    assert files_of(store) == before
    assert not list((store / "leases").glob("*")) if (store / "leases").exists() else True


def _sst_paths(store) -> list:
    return sorted((store / "sst").glob("*.sst"))


@pytest.mark.parametrize("where", ["first block", "meta", "footer"])
def test_verify_names_a_corrupted_sst_and_exits_1(store, where):
    victim = _sst_paths(store)[1]
    size = victim.stat().st_size
    flip_byte(victim, {"first block": 10, "meta": size - 40, "footer": size - 5}[where])
    out, as_json = hummock_each(["inspect", store, "verify"], ["inspect", store, "verify", "--json"])
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"CORRUPT sst/{victim.name}" in out.stdout and "store is CORRUPT" in out.stdout
    report = json.loads(as_json.stdout)
    assert [p["object"] for p in report["problems"]] == [f"sst/{victim.name}"]


def test_verify_finds_a_truncated_and_a_missing_sst(store):
    first, second = _sst_paths(store)[:2]
    first.write_bytes(first.read_bytes()[:-1])
    second.unlink()
    out = hummock("inspect", store, "verify")
    assert out.returncode == 1
    assert f"CORRUPT sst/{first.name}" in out.stdout and "size differs" in out.stdout
    assert f"CORRUPT sst/{second.name}: SST referenced by the version is missing" in out.stdout


def test_verify_names_a_corrupted_manifest_delta(store):
    delta = sorted((store / "manifest").glob("delta-*"))[2]
    flip_byte(delta, 30)
    out, listing = hummock_each(["inspect", store, "verify"], ["inspect", store, "manifest"])
    assert out.returncode == 1 and f"CORRUPT manifest/{delta.name}" in out.stdout
    assert listing.returncode == 1 and "CORRUPT" in listing.stdout


def test_verify_checks_meta_and_version_records_against_the_entries(store):
    """Damage with valid checksums: a version record that disagrees with its SST."""
    with HummockStorage.open(str(store), read_only=True) as db, open_objects(str(store)) as objects:
        info = db.version().all_ssts()[0]
        for field, value in (("key_count", info.key_count + 1), ("max_epoch", info.max_epoch + 1),
                             ("table_ids", (1,)), ("tombstone_count", 3)):
            report = cli_verify.VerifyReport()
            cli_verify.verify_sst(objects, dataclasses.replace(info, **{field: value}), report)
            [(obj, message)] = report.problems
            assert obj == info.object_path and f"{field} in the version differs" in message
        sound = cli_verify.VerifyReport()
        cli_verify.verify_sst(objects, info, sound)
        assert sound.ok and sound.keys == info.key_count



@pytest.mark.parametrize("change, what", [
    (lambda obj: dict(obj, columns=[["id", {"kind": "BIGINT"}], ["name", {"kind": 8}]]), "columns[0][1].kind"),
    (lambda obj: dict(obj, pk_indices="id"), "pk_indices"),
    (lambda obj: dict(obj, properties={"sql": {"kind": "view", "n_visible": 2}}), "properties.sql.kind"),
], ids=["type name", "pk shape", "sql kind"])
def test_verify_reports_a_checksum_valid_catalog_record_with_malformed_content(store, change, what):
    """Issue 25: content damage under a valid checksum is corruption, named with its field."""
    import struct

    import xxhash
    with HummockStorage.open(str(store), StorageOptions(compactor="none")) as db:
        obj = change(Catalog(db).get(TABLE_ID, db.max_committed_epoch).to_json())
        payload = json.dumps(obj).encode()
        record = struct.pack("<8sIIQ", b"HUMKTBL1", 1, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload
        epoch = new_epoch()
        db.ingest_batch(0xFFFFFFFF, [(b"table/" + TABLE_ID.to_bytes(4, "big"), record)], epoch)
        db.checkpoint(epoch)
    out, as_json = hummock_each(["inspect", store, "verify"], ["inspect", store, "verify", "--json"])
    assert out.returncode == 1, out.stdout + out.stderr
    name = "catalog record b'table/\\x00\\x00\\x00\\x07' (table 4294967295)"
    assert f"CORRUPT {name}:" in out.stdout and what in out.stdout and "store is CORRUPT" in out.stdout
    report = json.loads(as_json.stdout)
    assert [p["object"] for p in report["problems"]] == [name]


# --- compact -----------------------------------------------------------------------------------

def test_compact_runs_what_is_due_then_everything(tmp_path):
    path = tmp_path / "db"
    model = write_store(path, rounds=13, rows=20)   # 14 commits: past the L0 trigger (12 sub-levels)
    before = files_of(path)
    due = hummock_json("compact", path)
    assert due["tasks"] >= 1 and due["before"]["l0_sub_levels"] == 14
    assert due["after"]["l0_sub_levels"] < 12
    assert read_table(path) == model
    full = hummock_json("compact", path, "--full")
    assert full["after"]["l0_sub_levels"] == 0
    assert sum(full["after"]["level_ssts"][:-1]) == 0 and full["after"]["level_ssts"][-1] >= 1
    assert read_table(path) == model
    assert hummock_json("compact", path, "--full")["tasks"] == 0   # nothing left
    assert files_of(path) != before
    hummock("inspect", path, "verify", check_rc=0)
    text = hummock("compact", path, check_rc=0).stdout
    assert "0 compaction task(s) applied in-process" in text


def test_compact_refuses_a_store_another_process_writes(tmp_path):
    path = tmp_path / "db"
    write_store(path, rounds=1, rows=5)
    with HummockStorage.open(str(path), StorageOptions(compactor="none")):
        out = hummock("compact", path)
    assert out.returncode == 3 and "ConcurrentWriterError" in out.stderr


# --- bench -------------------------------------------------------------------------------------

def test_bench_help_lists_the_benchmarks_and_unknown_names_fail():
    listing, bad = hummock_each(["bench", "--help"], ["bench", "no_such_bench"])
    assert listing.returncode == 0
    out = listing.stdout
    for name in ("kv", "compaction", "state_table", "nexmark.generator"):
        assert f"  {name} " in out
    assert "harness" not in out
    assert bad.returncode == 2 and "unknown benchmark" in bad.stderr



def test_bench_runs_a_benchmark_with_its_arguments():
    out = hummock("bench", "nexmark.generator", "--events", "20000", "--batch", "5000", check_rc=0).stdout
    line = json.loads(out.strip().splitlines()[-1])
    assert line["bench"] == "nexmark_generator" and line["events"] == 20000


# --- issue 25: bad arguments, absent stores and far epochs: a message and the exit code --------

@pytest.mark.parametrize("args", [["sst", "-1"], ["sst", str(2**64)], ["sst", "x"], ["sst", "1", "--limit", "-2"]])
def test_inspect_sst_with_an_id_or_limit_out_of_range_is_bad_usage(store, args):
    out = hummock("inspect", store, *args)
    assert out.returncode == 2 and "error: argument" in out.stderr and "Traceback" not in out.stderr


def test_compact_on_a_path_without_a_store_is_exit_3_and_creates_nothing(tmp_path):
    out = hummock("compact", tmp_path / "absent")
    assert out.returncode == 3 and "does not exist" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "absent").exists()
    (tmp_path / "empty").mkdir()
    out = hummock("compact", tmp_path / "empty")
    assert out.returncode == 3 and "no store at" in out.stderr and "Traceback" not in out.stderr
    assert list((tmp_path / "empty").iterdir()) == []


def test_epochs_beyond_the_datetime_range_are_shown_not_raised(tmp_path):
    from cli.common import epoch_text
    far = 2**64 - 2**20   # year ~10946: datetime cannot hold it
    assert epoch_text(far) == f"{far} (time out of range)" and epoch_text(-3) == "-3 (time out of range)"
    path = tmp_path / "db"
    with HummockStorage.open(str(path), StorageOptions(compactor="none")) as db:
        db.ingest_batch(RAW_TABLE_ID, [(b"k", b"v")], far)
        db.checkpoint(far)
    whats = (["levels", "--ssts"], ["manifest"], ["sst", "1"], ["verify"])
    outs = dict(zip(map(tuple, whats), hummock_each(*(["inspect", path, *what] for what in whats))))
    for what, out in outs.items():
        assert out.returncode == 0 and "Traceback" not in out.stderr, (what, out.stderr)
    assert f"{far} (time out of range)" in outs[("manifest",)].stdout
    assert f"epochs {far} (time out of range)" in outs[("sst", "1")].stdout
