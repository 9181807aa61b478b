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


def test_usable_memory_honours_a_lower_cgroup_limit(monkeypatch):
    real_open = open
    physical = options_module.usable_memory()
    assert physical > 0                       # Linux answers sysconf

    def fake_open(path, *args, **kwargs):
        if path == "/sys/fs/cgroup/memory.max":
            import io
            return io.StringIO("%d\n" % (physical // 4))
        if path == "/sys/fs/cgroup/memory/memory.limit_in_bytes":
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert options_module.usable_memory() == physical // 4


def test_usable_memory_ignores_an_unlimited_cgroup(monkeypatch):
    real_open = open
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")

    def fake_open(path, *args, **kwargs):
        if path.startswith("/sys/fs/cgroup/"):
            import io
            return io.StringIO("max\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert options_module.usable_memory() == physical


def test_block_cache_capacity_is_checked():
    with pytest.raises(InvalidArgumentError, match="block_cache_capacity"):
        StorageOptions(block_cache_capacity=-1)
