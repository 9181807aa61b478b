"""The native block arena (``native/_block_arena.pxi``): huge-page chunks that hold block
contents and restart indexes.

Model: a dict of live spans (address -> (size, bytes written)). After every step the arena's
own invariant check passes, live spans never overlap, each still holds what was written to it,
and the arena's totals move exactly as the model's do. The arena belongs to the native block
module only; in pure mode blocks are Python bytes and there is nothing to test.
"""

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hummock import _twins
from hummock.key import encode_full_key
from hummock.sstable import _block_py
from hummock.value import encode_value

if _twins.pure_python_forced():
    pytest.skip("HUMMOCK_PURE_PYTHON=1: the arena belongs to the native block module only",
                allow_module_level=True)

from native import _block as native_block   # noqa: E402  (native mode: must import, never skipped)

UNIT = native_block.arena_stats()["unit_bytes"]
CHUNK = native_block.arena_stats()["chunk_bytes"]
MIN, MAX = native_block.ARENA_MIN_BYTES, native_block.ARENA_MAX_BYTES


def units(n: int) -> int:
    return -(-n // UNIT)


class ArenaModel(RuleBasedStateMachine):
    """Random allocations and frees; sizes on both sides of the arena's bounds."""

    def __init__(self):
        super().__init__()
        native_block.arena_check()
        self.base = native_block.arena_stats()
        self.spans = {}          # address -> (span, content)
        self.declined = []       # spans the arena refused (outside its size bounds)
        self.counter = 0

    @rule(size=st.one_of(st.integers(MIN, 70_000), st.integers(1, MIN - 1), st.integers(MAX + 1, MAX + 5000),
                         st.sampled_from([MIN, MAX, UNIT, UNIT + 1, 66 * UNIT])))
    def allocate(self, size):
        span = native_block.ArenaSpan(size)
        if not MIN <= size <= MAX:
            assert not span.in_arena, size
            self.declined.append(span)
            return
        assert span.in_arena
        self.counter += 1
        content = (self.counter.to_bytes(4, "little") * (size // 4 + 1))[:size]
        span.write(content)
        assert span.address not in self.spans
        self.spans[span.address] = (span, content)

    @precondition(lambda self: self.spans)
    @rule(pick=st.integers(0, 10**6))
    def free(self, pick):
        address = sorted(self.spans)[pick % len(self.spans)]
        del self.spans[address]

    @precondition(lambda self: len(self.spans) > 3)
    @rule()
    def free_half(self):
        for address in sorted(self.spans)[::2]:
            del self.spans[address]

    @invariant()
    def arena_is_consistent(self):
        native_block.arena_check()
        stats = native_block.arena_stats()
        assert stats["allocations"] - self.base["allocations"] == len(self.spans)
        assert stats["live_bytes"] - self.base["live_bytes"] == UNIT * sum(units(s.size) for s, _ in self.spans.values())
        assert stats["empty_chunks"] <= stats["spare_chunks"]
        previous_end = 0
        for address in sorted(self.spans):
            span, content = self.spans[address]
            assert address >= previous_end, "spans overlap"
            assert address % CHUNK >= UNIT, "a span covers its chunk's header"
            assert address // CHUNK == (address + span.size - 1) // CHUNK, "a span crosses its chunk"
            assert span.read() == content
            previous_end = address + span.size

    def teardown(self):
        self.spans.clear()
        native_block.arena_check()


TestArenaModel = ArenaModel.TestCase
TestArenaModel.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)


def test_chunks_are_given_back_when_their_blocks_go():
    """Filling several chunks and freeing everything leaves at most the spare chunks mapped
    beyond what was there before."""
    native_block.arena_check()
    before = native_block.arena_stats()
    spare = before["spare_chunks"]
    spans = [native_block.ArenaSpan(64 * UNIT) for _ in range((spare + 4) * (CHUNK // (64 * UNIT)))]
    assert all(s.in_arena for s in spans)
    grown = native_block.arena_stats()
    per_chunk = (CHUNK // UNIT - 1) // 64
    assert grown["chunks"] >= -(-len(spans) // per_chunk)
    assert grown["mapped_bytes"] == grown["chunks"] * CHUNK
    del spans
    native_block.arena_check()
    after = native_block.arena_stats()
    assert after["chunks"] <= before["chunks"] - before["empty_chunks"] + spare
    assert after["empty_chunks"] <= spare
    assert after["allocations"] == before["allocations"]


def test_churn_of_a_full_cache_does_not_grow_the_arena():
    """A block cache at capacity frees one block and loads another of about the same size:
    the freed units are reused, so the mapped bytes stay within a few chunks of the live ones."""
    import random
    rng = random.Random(5)
    live = [native_block.ArenaSpan(rng.randint(60 * UNIT, 70 * UNIT)) for _ in range(300)]
    peak_chunks = native_block.arena_stats()["chunks"]
    for _ in range(3000):
        live.pop(rng.randrange(len(live)))
        live.append(native_block.ArenaSpan(rng.randint(60 * UNIT, 70 * UNIT)))
        peak_chunks = max(peak_chunks, native_block.arena_stats()["chunks"])
    stats = native_block.arena_stats()
    native_block.arena_check()
    slack = (stats["spare_chunks"] + 4) * CHUNK
    assert stats["mapped_bytes"] <= stats["live_bytes"] * 1.25 + slack, stats
    assert peak_chunks * CHUNK <= stats["live_bytes"] * 1.25 + slack + 2 * CHUNK, (peak_chunks, stats)
    del live
    native_block.arena_check()


def walk(it):
    """Every entry of the block, first to last."""
    it.seek_to_first()
    return it.collect_forward()[0]


def _entries(count, value_len):
    return [(encode_full_key(1, b"k%08d" % i, 5), encode_value(b"v" * value_len)) for i in range(count)]


@given(count=st.integers(1, 400), value_len=st.integers(0, 300), restart_interval=st.sampled_from([1, 4, 16]))
@settings(max_examples=40, deadline=None)
def test_blocks_in_the_arena_read_as_their_twins(count, value_len, restart_interval):
    """A block whose content went into the arena gives the same content, length, entries and
    point lookups as the pure twin's block of the same bytes."""
    entries = _entries(count, value_len)
    builder = native_block.BlockBuilder(restart_interval)
    for key, value in entries:
        builder.add(key, value)
    content = builder.finish_block()
    before = native_block.arena_stats()["allocations"]
    block = native_block.Block(content)
    twin = _block_py.Block(content)
    in_arena = MIN <= len(content) <= MAX
    assert native_block.arena_stats()["allocations"] == before + in_arena
    assert len(block) == len(twin) == len(content)
    assert block.content == content
    it = block.iterator()
    assert walk(it) == walk(twin.iterator())
    assert [key for key, _ in walk(block.iterator())] == [key for key, _ in entries]
    for key, _ in entries[::7]:
        user_key = key[:-8]
        assert block.get(user_key, 9) == twin.get(user_key, 9) != False  # noqa: E712
        assert block.get(user_key + b"\x00", 9) == twin.get(user_key + b"\x00", 9)
    del it, block
    native_block.arena_check()
    assert native_block.arena_stats()["allocations"] == before


def test_an_iterator_keeps_its_block_content_alive():
    entries = _entries(200, 100)
    builder = native_block.BlockBuilder(16)
    for key, value in entries:
        builder.add(key, value)
    builder_content = builder.finish_block()
    block = native_block.Block(builder_content)
    it = block.iterator()
    del block
    churn = [native_block.ArenaSpan(64 * UNIT) for _ in range(64)]   # would reuse freed units
    for span in churn:
        span.write(b"\xee" * span.size)
    assert walk(it) == walk(_block_py.Block(builder_content).iterator())


def test_the_arena_can_be_switched_off():
    """``HUMMOCK_BLOCK_ARENA=0``: blocks keep their content as bytes and read the same."""
    script = ("import hummock\nfrom native import _block as b\n"
              "from hummock.key import encode_full_key\nfrom hummock.value import encode_value\n"
              "bb = b.BlockBuilder(16)\n"
              "[bb.add(encode_full_key(1, b'k%05d' % i, 1), encode_value(b'x' * 50)) for i in range(100)]\n"
              "c = bb.finish_block(); blk = b.Block(c); s = b.arena_stats()\n"
              "assert not s['enabled'] and s['allocations'] == 0 and s['chunks'] == 0, s\n"
              "assert blk.content == c and len(blk) == len(c)\nprint('ok')\n")
    env = dict(os.environ, HUMMOCK_BLOCK_ARENA="0")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_block_refused_as_corrupt_gives_its_units_back():
    """Damaged content large enough for the arena is copied there before the checks run: the
    CorruptionError leaves no allocation behind."""
    from hummock.errors import CorruptionError
    before = native_block.arena_stats()["allocations"]
    with pytest.raises(CorruptionError, match="restart count"):
        native_block.Block(b"\x00" * 4096 + b"\xff\xff\xff\xff")
    assert native_block.arena_stats()["allocations"] == before
    for content in (b"\x00" * 4096 + (1).to_bytes(4, "little"),   # one restart, then garbage entries
                    (b"\x07" * 2000) + (5).to_bytes(4, "little") * 3 + (3).to_bytes(4, "little")):
        try:
            native_block.Block(content).get(b"\x00\x00\x00\x01k", 1)
        except CorruptionError:
            pass
    native_block.arena_check()
    assert native_block.arena_stats()["allocations"] == before
