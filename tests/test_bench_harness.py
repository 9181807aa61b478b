"""bench.harness records what every bench's figures depend on (issue 30 item 6): the build
(native or twins, setup.py's Cython directives and flags, the .so files), the allocator / glibc
/ BLAS environment, versions and the load; bench.report keeps that record out of its one-line
machine summary."""

from __future__ import annotations

import json
import os

from bench import harness, report
from hummock import _twins


def test_machine_carries_build_env_versions_and_load(monkeypatch):
    monkeypatch.setenv("MIMALLOC_ARENA_EAGER_COMMIT", "1")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv("UNRELATED_TO_FIGURES", "x")
    c = harness.machine()["conditions"]
    json.dumps(c)   # the JSON line takes it as is
    assert c["env"]["MIMALLOC_ARENA_EAGER_COMMIT"] == "1"
    assert c["env"]["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2" and c["env"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "UNRELATED_TO_FIGURES" not in c["env"]
    build = c["build"]
    assert build["cython_directives"]["boundscheck"] is True and build["cython_directives"]["language_level"] == "3"
    assert build["extra_compile_args"] == ["-O3"]
    expected = _twins.expected_native_modules()
    assert build["so_present"].endswith(f"/{len(expected)}")
    assert build["pure_python_forced"] is _twins.pure_python_forced()
    if _twins.pure_python_forced():
        assert build["native_loaded"] == []
    assert set(c["versions"]) >= {"python", "pyarrow", "numpy", "cython"} and c["versions"]["pyarrow"]
    load = c["load"]
    assert load["nproc"] == os.cpu_count() and load["nice"] == os.nice(0)
    assert isinstance(load["load_avg_1m_before"], float) and isinstance(load["load_avg_1m_after"], float)
    for point in ("probe_before", "probe_after"):
        assert 0 < load[point]["min_ns"] <= load[point]["median_ns"]
    fs = c["fs"]
    assert set(fs) == {"mount", "type", "device", "journal", "probe_before", "probe_after"}
    for point in ("probe_before", "probe_after"):
        assert fs[point]["create_us"] > 0 and fs[point]["durable_ms"] > 0


def test_fs_probe_measures_and_leaves_nothing_behind(tmp_path):
    result = harness.fs_probe(str(tmp_path), files=5, durable=2)
    assert result["create_us"] > 0 and result["durable_ms"] > 0
    assert list(tmp_path.iterdir()) == []
    assert harness.fs_probe(str(tmp_path / "missing")) == {"create_us": None, "durable_ms": None}


def test_run_dirs_outlive_their_run_and_go_at_exit(tmp_path, monkeypatch):
    registered = []
    monkeypatch.setattr(harness.atexit, "register", registered.append)
    monkeypatch.setattr(harness, "_run_dirs", [])
    monkeypatch.setattr(harness.tempfile, "tempdir", str(tmp_path))
    with harness.run_dir("run-a-") as a:
        with open(os.path.join(a, "f"), "w") as f:
            f.write("x")
    with harness.run_dir("run-b-") as b:
        pass
    assert a != b and os.path.isfile(os.path.join(a, "f")) and os.path.isdir(b)   # kept after the run
    assert registered == [harness._remove_run_dirs]   # one exit hook for every run
    harness._remove_run_dirs()
    assert not os.path.exists(a) and not os.path.exists(b) and harness._run_dirs == []


def test_fs_info_names_the_deepest_mount_and_its_journal(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda / ext4 rw 0 0\n"
                      "/dev/vdb /data ext4 rw 0 0\n"
                      "tmpfs /data/scratch tmpfs rw 0 0\n"
                      "/dev/vdc /database xfs rw 0 0\n")
    jbd2 = tmp_path / "jbd2"
    jbd2.mkdir()
    (jbd2 / "vdb-8").mkdir()

    def info(path):
        return harness.fs_info(path, mounts=str(mounts), jbd2=str(jbd2))
    assert info("/data/x") == {"mount": "/data", "type": "ext4", "device": "/dev/vdb", "journal": True}
    assert info("/no-such-hummock-dir/srv") == {"mount": "/", "type": "ext4", "device": "/dev/vda", "journal": False}
    assert info("/data/scratch/y")["type"] == "tmpfs" and info("/data/scratch/y")["journal"] is None
    assert info("/database/z")["mount"] == "/database"   # not "/data": a prefix of the name only
    assert harness.fs_info("/no-such-hummock-dir/srv", mounts=str(mounts), jbd2=str(tmp_path / "absent"))["journal"] is False
    assert harness.fs_info("/no-such-hummock-dir/srv", mounts=str(tmp_path / "absent"))["type"] is None


def test_so_files_missing_or_older_than_their_source_are_named(tmp_path, monkeypatch):
    native = tmp_path / "native"
    native.mkdir()
    for name in ("_a", "_b", "_c", "_d"):
        (native / f"{name}.pyx").write_text("")
    (native / "_d.pyx").write_text('# cython: language_level=3\ninclude "_d_part.pxi"\n')
    for name in ("_a", "_b", "_d"):
        (native / f"{name}.cpython-311-x86_64-linux-gnu.so").write_text("")
    os.utime(native / "_b.cpython-311-x86_64-linux-gnu.so", (1, 1))   # built before its .pyx changed
    (native / "_d_part.pxi").write_text("")   # a part of _d changed after _d was built
    os.utime(native / "_d.pyx", (1, 1))
    os.utime(native / "_d.cpython-311-x86_64-linux-gnu.so", (2, 2))
    (tmp_path / "setup.py").write_text('COMPILER_DIRECTIVES = {"boundscheck": False}\n'
                                       'Extension("x", [], extra_compile_args=["-O2", "-march=native"])\n')
    monkeypatch.setattr(harness, "_ROOT", str(tmp_path))
    monkeypatch.setattr(_twins, "expected_native_modules", lambda: ["_a", "_b", "_c", "_d"])
    build = harness.build_info()
    assert build["so_present"] == "3/4" and build["so_missing"] == ["_c"]
    assert build["so_older_than_pyx"] == ["_b", "_d"]
    assert build["cython_directives"] == {"boundscheck": False}
    assert build["extra_compile_args"] == ["-O2", "-march=native"]


def test_report_summary_line_leaves_the_conditions_out(tmp_path):
    out = tmp_path / "report.md"
    report.render({"nexmark": {"bench": "nexmark", "events": 10, "events_per_s": {"q0": 5}, "checked": True,
                               "machine": harness.machine()}}, out)
    summary = next(line for line in out.read_text().splitlines() if "machine:" in line)
    assert "python " in summary and "conditions" not in summary and "{" not in summary
