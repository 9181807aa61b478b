"""``StorageOptions`` defaults that depend on the machine: the block cache's size from memory."""

import os

import pytest

from hummock import options as options_module
from hummock.errors import InvalidArgumentError
from hummock.options import BLOCK_CACHE_MAX, BLOCK_CACHE_MIN, MiB, StorageOptions


@pytest.mark.parametrize("memory, expected", [
    (0, BLOCK_CACHE_MIN),                    # memory unknown: the floor
    (1024 * MiB, BLOCK_CACHE_MIN),           # a small machine: the floor (1/16 would be 64 MiB)
    (24 * 1024 * MiB, 1536 * MiB),           # this one: 1/16
    (512 * 1024 * MiB, BLOCK_CACHE_MAX),     # a big one: the cap
])
def test_block_cache_default_is_a_sixteenth_of_memory_clamped(monkeypatch, memory, expected):
    monkeypatch.setattr(options_module, "usable_memory", lambda: memory)
    assert StorageOptions().block_cache_capacity == expected
    assert StorageOptions(block_cache_capacity=5 * MiB).block_cache_capacity == 5 * MiB   # given: kept


def test_usable_memory_honours_the_lowest_limit_of_the_cgroup_and_its_ancestors(tmp_path, monkeypatch):
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    files = [tmp_path / "own", tmp_path / "parent", tmp_path / "root"]
    files[0].write_text("max\n")                     # v2: no limit here
    files[1].write_text("%d\n" % (physical // 4))    # ... but on an ancestor
    files[2].write_text("9223372036854771712\n")     # v1's "unlimited"
    monkeypatch.setattr(options_module, "cgroup_limit_files", lambda: [str(f) for f in files] + ["/nonexistent"])
    assert options_module.usable_memory() == physical // 4
    files[1].write_text("max\n")
    assert options_module.usable_memory() == physical


@pytest.mark.parametrize("proc, expected", [
    ("0::/a/b\n", ["{u}/a/b/memory.max", "{u}/a/memory.max", "{u}/memory.max"]),
    ("4:memory:/api/x\n1:cpu:/\n0::/\n", ["{r}/memory/api/x/memory.limit_in_bytes",
                                          "{r}/memory/api/memory.limit_in_bytes",
                                          "{r}/memory/memory.limit_in_bytes", "{u}/memory.max"]),
    ("3:cpu,memory:/../y\n", ["{r}/memory/y/memory.limit_in_bytes", "{r}/memory/memory.limit_in_bytes"]),
    ("garbage\n", []),
])
def test_cgroup_limit_files_walk_from_the_process_cgroup_to_the_root(tmp_path, proc, expected):
    """v1 (the memory controller's line) and v2 (``0::``, unified at the root or under
    ``unified/`` in a hybrid mount); '..' cannot climb out of the hierarchy."""
    proc_file = tmp_path / "cgroup"
    proc_file.write_text(proc)
    root = tmp_path / "fs"
    (root / "unified").mkdir(parents=True)
    unified = str(root / "unified")
    got = options_module.cgroup_limit_files(str(proc_file), str(root))
    assert got == [e.format(u=unified, r=str(root)) for e in expected]
    (root / "cgroup.controllers").write_text("memory\n")   # a pure v2 mount: unified at the root
    if proc.startswith("0::"):
        assert options_module.cgroup_limit_files(str(proc_file), str(root))[-1] == str(root / "memory.max")


def test_block_cache_capacity_is_checked():
    with pytest.raises(InvalidArgumentError, match="block_cache_capacity"):
        StorageOptions(block_cache_capacity=-1)
