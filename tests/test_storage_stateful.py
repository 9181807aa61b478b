"""The KV API against ``KvModel`` with a hypothesis state machine, on memory, local and S3 stores.

Rules: ingest batches (deletes included, several per epoch), seal (which starts an upload in the
background), sync, commit, get/multi_get, iter with random bounds/prefix/reverse at random
epochs, snapshots pinned and read later, compact_all and compact_range (and the background
compactor, which runs at its L0 trigger), table watermarks (several per epoch, as ``W`` or
``(lo, hi)``, refused when disjoint from a vnode's current range) and truncate_table, both also
at older, sealed and later epochs (refused at a sealed epoch or below the table's newest record
of their kind; otherwise hiding from their epoch on), writes, seals, watermarks, truncations,
commits and compactions while a scan is open (before its first row or halfway; it keeps
reading the store as of its creation), reopen (drops uncommitted data, watermarks and
truncations included). ``KvModel`` hides keys below a watermark or truncation at once, and the
same reads must hold after reopen and compaction. A tiny shared buffer makes spills happen.
Runs in whichever mode the suite runs (native or ``HUMMOCK_PURE_PYTHON=1``).
"""

import itertools
import uuid

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from hummock import ExpiredEpochError, HummockStorage, InvalidArgumentError, StorageOptions
from kv_model import KvModel

EPOCH = 1 << 16
KEY = st.sampled_from([b"", b"a", b"a\x00", b"ab", b"ab\x00", b"abc", b"b", b"ba", b"bac", b"c", b"\xff"])
VNODES = st.sampled_from([0x6162, 0x6261, 0x6100])   # "ab", "ba", "a\x00": the vnodes of KEY
BOUNDS = [b"", b"\x00", b"c", b"d"]
KEYS = st.lists(KEY, max_size=6, unique=True)
VALUES = st.one_of(st.none(), st.binary(max_size=8), st.binary(min_size=500, max_size=3000))
TABLES = st.sampled_from([1, 2])
OPTIONS = StorageOptions(shared_buffer_capacity=64 * 1024, block_size=512, target_sst_size=8 * 1024,
                         block_cache_capacity=1 << 20, meta_cache_capacity=1 << 20, compactor="none",
                         vacuum_min_age_s=0)
COMPACTING = OPTIONS.replace(compactor="local")   # background runner at its L0 trigger, plus compact_all


class KvMachine(RuleBasedStateMachine):
    store_factory = None  # set per store kind below
    # With compaction, versions below the watermark (the oldest snapshot, else the committed
    # epoch) may be gone: reads at older epochs are then only promised through snapshots.
    compaction = False

    @initialize()
    def open_store(self):
        self.snapshots = []
        self.opener = type(self).store_factory()   # () -> HummockStorage on the same location
        self.store = self.opener()
        self.model = KvModel()
        self.epoch = EPOCH            # the epoch being written
        self.written_epochs = [0]
        self.sealed = 0               # the highest epoch sealed (by seal, sync or commit)

    def teardown(self):
        for snap, _ in getattr(self, "snapshots", []):
            snap.release()
        if hasattr(self, "store"):
            self.store.close()

    @rule(table=TABLES, keys=KEYS, values=st.data())
    def ingest(self, table, keys, values):
        pairs = [(k, values.draw(VALUES)) for k in sorted(keys)]
        self.store.ingest_batch(table, pairs, self.epoch)
        self.model.ingest(table, pairs, self.epoch)
        if self.written_epochs[-1] != self.epoch:
            self.written_epochs.append(self.epoch)

    @rule(step=st.integers(1, 3))
    def next_epoch(self, step):
        self.epoch += step * EPOCH

    @rule()
    def seal(self):
        self.store.seal_epoch(self.epoch)
        self.sealed = self.epoch
        self.epoch += EPOCH

    @rule()
    def sync(self):
        self.store.sync(self.epoch)
        self.synced = self.sealed = self.epoch
        self.epoch += EPOCH

    @rule(data=st.data())
    def commit(self, data):
        # an epoch synced together with later ones cannot be committed alone (tested separately)
        floor = max(self.model.committed_epoch + 1, getattr(self, "synced", 0))
        candidates = [e for e in self.written_epochs if e >= floor] + [self.epoch]
        epoch = data.draw(st.sampled_from(candidates))
        if epoch <= self.model.committed_epoch:
            return
        self.store.commit_epoch(epoch)
        self.model.commit(epoch)
        self.sealed = max(self.sealed, epoch)
        if self.epoch <= epoch:
            self.epoch = epoch + EPOCH

    def _read_epoch(self, data):
        epochs = self.written_epochs + [self.epoch, self.epoch + 5 * EPOCH, 2**64 - 1, 0, EPOCH // 2]
        return data.draw(st.sampled_from(epochs))

    def _exact_or_expired(self, read, epoch, expected):
        """A read answers exactly or raises ExpiredEpochError below min_readable_epoch (which
        compaction raises; checked after the read, since the background compactor may run)."""
        try:
            got = read()
        except ExpiredEpochError as exc:
            assert epoch < self.store.min_readable_epoch and exc.epoch == epoch
            return
        assert got == expected, (epoch, self.store.min_readable_epoch)

    @rule(table=TABLES, data=st.data())
    def get(self, table, data):
        epoch = self._read_epoch(data)
        keys = data.draw(KEYS)
        self._exact_or_expired(lambda: self.store.multi_get(table, keys, epoch), epoch,
                               [self.model.get(table, k, epoch) for k in keys])
        for k in keys[:2]:
            self._exact_or_expired(lambda: self.store.get(table, k, epoch), epoch, self.model.get(table, k, epoch))

    @rule(table=TABLES, data=st.data(), reverse=st.booleans())
    def scan(self, table, data, reverse):
        epoch = self._read_epoch(data)
        start = data.draw(st.one_of(st.none(), st.sampled_from([b"", b"a", b"ab", b"b\x00"])))
        end = data.draw(st.one_of(st.none(), st.sampled_from([b"a", b"a\x00", b"b", b"c", b"\xff\xff"])))
        prefix = data.draw(st.one_of(st.none(), st.sampled_from([b"a", b"b", b"\xff", b""])))
        self._exact_or_expired(lambda: list(self.store.iter(table, epoch, start, end, prefix=prefix, reverse=reverse)),
                               epoch, self.model.items(table, epoch, start, end, prefix, reverse))

    @rule(table=TABLES, data=st.data(), reverse=st.booleans(), start=st.integers(0, 3))
    def scan_while_writing(self, table, data, reverse, start):
        """An iterator reads the store as it was when ``iter`` was called: batches ingested
        (and maybe sealed, so the upload swaps imms for staging SSTs), watermarks, truncations,
        commits and compactions after it was created (before its first row or halfway through)
        never show up in it, and the scan never fails."""
        epoch = data.draw(st.sampled_from([self.epoch, 2**64 - 1]))
        expected = self.model.items(table, epoch, reverse=reverse)
        it = self.store.iter(table, epoch, reverse=reverse)
        got = list(itertools.islice(it, start))
        actions = ["ingest", "seal", "watermark", "truncate", "commit"] + ["compact"] * self.compaction
        for action in data.draw(st.lists(st.sampled_from(actions), min_size=1, max_size=3)):
            event(f"scan while writing: {action}")
            if action in ("ingest", "seal"):   # (keywords: subclasses wrap the rules)
                self.ingest(table=data.draw(TABLES), keys=data.draw(KEYS), values=data)
                if action == "seal":
                    self.seal()
            elif action == "watermark":
                self.update_watermarks(table=data.draw(TABLES), data=data)
            elif action == "truncate":
                self.truncate(table=data.draw(TABLES))
            elif action == "commit":
                self.commit(data=data)
            else:
                self.store.compact_all()
            got += itertools.islice(it, data.draw(st.integers(0, 2)))
        got += list(it)
        assert got == expected

    @rule(table=TABLES, data=st.data())
    def update_watermarks(self, table, data):
        """A watermark per chosen vnode, as W or (lo, hi); reads at epochs >= this one hide at
        once, older ones do not; a range disjoint from the vnode's current one is refused."""
        ranges, given = {}, {}
        for vnode in data.draw(st.lists(VNODES, unique=True, min_size=1, max_size=3)):
            lo, hi = data.draw(st.sampled_from(BOUNDS)), data.draw(st.sampled_from(BOUNDS + [None]))
            if hi is not None and hi <= lo:
                hi = None
            ranges[vnode] = (lo, hi)
            given[vnode] = hi if lo == b"" and hi is not None and data.draw(st.booleans()) else (lo, hi)
        error = self.model.watermark_error(table, self.epoch, ranges)
        try:
            self.store.update_table_watermarks(table, self.epoch, given)
        except InvalidArgumentError:
            assert error is not None
            return
        assert error is None, error
        self.model.update_watermarks(table, self.epoch, ranges)
        if self.written_epochs[-1] != self.epoch:
            self.written_epochs.append(self.epoch)

    @rule(table=TABLES)
    def truncate(self, table):
        """Everything of ``table`` written so far leaves reads at epochs >= this one (refused
        below the table's newest truncation, which ``marks_at_other_epochs`` may have put later)."""
        error = self.model.truncate_error(table, self.epoch)
        try:
            self.store.truncate_table(table, self.epoch)
        except InvalidArgumentError:
            assert error is not None
            return
        assert error is None, error
        self.model.truncate(table, self.epoch)
        if self.written_epochs[-1] != self.epoch:
            self.written_epochs.append(self.epoch)

    @rule(table=TABLES, data=st.data(), truncate=st.booleans())
    def marks_at_other_epochs(self, table, data, truncate):
        """A watermark or truncation at an older, sealed, current or later epoch: refused,
        changing nothing, at a sealed epoch or below the table's newest record of its kind;
        otherwise reads at epochs >= it hide what it covers (also writes made between it and
        the current epoch), reads below it do not."""
        sealed = self._sealed_epoch()
        epoch = data.draw(st.sampled_from(sorted({e for e in self.written_epochs if e} | {
            sealed, sealed + EPOCH, self.epoch, self.epoch + 2 * EPOCH} - {0})))
        if truncate:
            error = "sealed" if epoch <= sealed else self.model.truncate_error(table, epoch)
            call = lambda: self.store.truncate_table(table, epoch)   # noqa: E731
        else:
            vnode = data.draw(VNODES)
            lo, hi = data.draw(st.sampled_from(BOUNDS)), data.draw(st.sampled_from(BOUNDS + [None]))
            ranges = {vnode: (lo, hi)}
            error = "sealed" if epoch <= sealed else self.model.watermark_error(table, epoch, ranges)
            call = lambda: self.store.update_table_watermarks(table, epoch, ranges)   # noqa: E731
        event(f"{'truncation' if truncate else 'watermark'} at another epoch: {error or 'accepted'}")
        before = {t: self.model.items(t, 2**64 - 1) for t in (1, 2)}
        try:
            call()
        except InvalidArgumentError:
            assert error is not None
            assert {t: list(self.store.iter(t, 2**64 - 1)) for t in (1, 2)} == before
            return
        assert error is None, error
        if truncate:
            self.model.truncate(table, epoch)
        else:
            self.model.update_watermarks(table, epoch, ranges)

    def _sealed_epoch(self) -> int:
        return self.sealed

    @precondition(lambda self: self.compaction)
    @rule()
    def compact_all(self):
        """Compaction (manual here; the background runner also runs) never changes a read."""
        self.store.compact_all()

    @precondition(lambda self: self.compaction)
    @rule(table=TABLES, start=st.one_of(st.none(), KEY), end=st.one_of(st.none(), KEY))
    def compact_range(self, table, start, end):
        """A manual range compaction never changes a read either."""
        self.store.compact_range(table, start, end)

    @precondition(lambda self: self.model.committed_epoch > 0 and len(self.snapshots) < 3)
    @rule()
    def pin(self):
        snap = self.store.snapshot()
        self.snapshots.append((snap, {t: self.model.items(t, snap.epoch) for t in (1, 2)}))

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def read_snapshot_and_unpin(self, data):
        snap, expected = self.snapshots.pop(data.draw(st.integers(0, len(self.snapshots) - 1)))
        for table in (1, 2):
            assert list(snap.iter(table)) == expected[table]
            for key, value in expected[table][:3]:
                assert snap.get(table, key) == value
        snap.release()

    @rule()
    def reopen(self):
        for snap, _ in self.snapshots:
            snap.release()
        self.snapshots = []
        self.store.close()
        self.store = self.opener()
        self.model.reopen(recovered=self.store.max_committed_epoch)   # (nothing lost: kv_model)
        assert self.store.max_committed_epoch == self.model.committed_epoch
        self.written_epochs = [e for e in self.written_epochs if e <= self.model.committed_epoch]
        self.synced = 0
        self.sealed = self.model.committed_epoch   # a reopened writer has sealed what it recovered
        self.epoch = max(self.epoch, self.model.committed_epoch + EPOCH)

    @precondition(lambda self: self.model.committed_epoch > 0 and len(self.snapshots) < 3)
    @rule(data=st.data())
    def pin_old_epoch(self, data):
        """A snapshot of an older committed epoch: exact if at or above min_readable_epoch,
        else refused with ExpiredEpochError."""
        epoch = data.draw(st.sampled_from([e for e in self.written_epochs if e <= self.model.committed_epoch]))
        try:
            snap = self.store.snapshot(epoch)
        except ExpiredEpochError:
            assert epoch < self.store.min_readable_epoch
            return
        self.snapshots.append((snap, {t: self.model.items(t, epoch) for t in (1, 2)}))

    @invariant()
    def min_readable_epoch_is_sane(self):
        if hasattr(self, "store"):
            assert 0 <= self.store.min_readable_epoch <= self.store.max_committed_epoch
            if not self.compaction:   # only removing a truncated table's SSTs raises it
                truncated = [e for t in self.model.truncations.values() for e, _ in t
                             if e <= self.model.committed_epoch]
                assert self.store.min_readable_epoch == 0 or truncated

    @invariant()
    def shared_buffer_is_consistent(self):
        if hasattr(self, "store"):
            with self.store._lock:   # (an upload installs its SSTs under it)
                self.store._buffer._check()

    @invariant()
    def committed_epoch_matches(self):
        if hasattr(self, "store"):
            assert self.store.max_committed_epoch == self.model.committed_epoch


_names = (f"kv-{uuid.uuid4().hex[:8]}-{i}" for i in itertools.count())
SETTINGS = settings(max_examples=40, stateful_step_count=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _run(factory, settings_=SETTINGS, compaction=False):
    machine = type("Machine", (KvMachine,), {"store_factory": staticmethod(factory), "compaction": compaction})
    run_state_machine_as_test(machine, settings=settings_)


def _opener(url, options=OPTIONS):
    return lambda: HummockStorage.open(url, options)


def test_stateful_memory():
    _run(lambda: _opener(f"memory://{next(_names)}"))


def test_stateful_memory_with_compaction():
    _run(lambda: _opener(f"memory://{next(_names)}", COMPACTING), compaction=True)


def test_stateful_memory_long_runs_with_compaction():
    """Longer runs (watermarks and truncations need an ingest, the record and a read to meet)."""
    _run(lambda: _opener(f"memory://{next(_names)}", COMPACTING),
         settings(SETTINGS, max_examples=80, stateful_step_count=80), compaction=True)


def test_stateful_local(tmp_path):
    counter = itertools.count()
    _run(lambda: _opener(str(tmp_path / f"store-{next(counter)}")))


def test_stateful_local_with_compaction(tmp_path):
    counter = itertools.count()
    _run(lambda: _opener(str(tmp_path / f"store-{next(counter)}"), COMPACTING), compaction=True)


def test_stateful_s3(s3_server):
    from s3_server import CREDENTIALS, REGION, new_bucket_name

    def factory():
        bucket = new_bucket_name()
        s3_server.admin_client().create_bucket(Bucket=bucket)
        options = COMPACTING.replace(s3_access_key_id=CREDENTIALS["access_key_id"],
                                     s3_secret_access_key=CREDENTIALS["secret_access_key"])
        return _opener(f"s3://{bucket}/kv?endpoint={s3_server.endpoint_url}&region={REGION}", options)
    _run(factory, settings(SETTINGS, max_examples=8), compaction=True)
