"""The table-watermark side of :class:`~hummock.storage.HummockStorage`: watermarks and
truncation (``hummock/table_watermarks.py``).

``MarksSide`` is a base class of ``HummockStorage`` holding ``update_table_watermarks`` and
``truncate_table`` (records that make reads at epochs >= theirs hide keys at once), the
records a commit publishes (``_marks_to_publish``), what a compaction may drop because of them
(``_compaction_hide``) and the removal of a truncated table's whole SSTs after the commit
(``_drop_truncated_ssts``). It owns no state: every attribute it reads (``_marks``,
``_buffer``, ``_version``, ``_truncated_tables``, the engine lock) is set up by
``HummockStorage.__init__``; methods marked "under the lock" expect their caller to hold it.

Callers: :mod:`hummock.storage` only (the store's public methods are documented here).
"""

from __future__ import annotations

import logging

from hummock.arg_checks import _check_table_id, _check_user_epoch
from hummock.errors import HummockError, InvalidArgumentError
from hummock.key import EPOCH_SPILL_MASK
from hummock.table_watermarks import TableWatermarks, check_ranges, resolve_all
from hummock.version import VersionDelta

log = logging.getLogger("hummock.storage")


class MarksSide:
    """Table watermarks and truncation of ``HummockStorage`` (see the module docstring)."""

    def update_table_watermarks(self, table_id: int, epoch: int, watermarks) -> None:
        """From ``epoch`` on, hide keys of ``table_id`` below a watermark, per vnode:
        ``watermarks`` maps a vnode (the first 2 bytes of a table key, big-endian) to ``W``
        (hide the keys whose bytes after the vnode are ``< W``) or to a range ``(lo, hi)`` (hide
        those in ``[lo, hi)``; ``hi`` ``None``: no upper end). Reads on this store at epochs
        >= ``epoch`` hide them at once, whenever the keys were written (also later);
        reads at older epochs and snapshots still see them; the commit of ``epoch`` makes the
        watermark durable, and compaction then drops the keys for good.

        Watermarks only grow: each range is merged into its vnode's current one (their hull),
        so one below the current is ignored and several per epoch keep the highest. REQUIRES:
        ``epoch`` unsealed with its low 16 bits zero (as for ``ingest_batch``) and not below this
        table's newest watermark epoch; ranges non-empty and overlapping or touching the vnode's
        current one. Raises ``InvalidArgumentError`` otherwise; nothing changes then."""
        self._require_writer()
        table_id = _check_table_id(table_id)
        epoch = _check_user_epoch(epoch)
        ranges = check_ranges(watermarks)
        with self._lock:
            self._require_writer()
            self._check_unsealed(epoch)
            if not ranges:
                return
            records = self._marks.get(table_id, TableWatermarks())
            self._install_marks(table_id, records.with_watermarks(epoch, ranges))   # checked again: cheap

    def truncate_table(self, table_id: int, epoch: int) -> None:
        """Empty ``table_id`` from ``epoch`` on (``TRUNCATE``, ``DROP``): reads at epochs >=
        ``epoch`` see none of the versions written before this call (at ``epoch`` or earlier);
        writes made after it, at ``epoch`` or later, stay visible. Older reads and snapshots
        still see the old rows. The uncommitted writes of ``epoch`` it hides leave the shared
        buffer at once (those of older epochs stay for older reads); the commit of ``epoch``
        publishes the truncation in its version delta, and SSTs holding only
        truncated data of this table then leave the version (as soon as no snapshot or
        retention window needs them); compaction drops the rest. Watermarks stay.

        REQUIRES: ``epoch`` unsealed with its low 16 bits zero and not below this table's newest
        truncation epoch. Raises ``InvalidArgumentError`` otherwise; nothing changes then."""
        self._require_writer()
        table_id = _check_table_id(table_id)
        epoch = _check_user_epoch(epoch)
        with self._lock:
            self._require_writer()
            self._check_unsealed(epoch)
            through = epoch + self._buffer.next_offset(table_id, epoch) - 1
            records = self._marks.get(table_id, TableWatermarks()).with_truncation(epoch, through)
            # its own epoch's imms no read can see any more; older ones stay for older reads
            self._buffer.remove(lambda imm: imm.table_id == table_id and epoch <= imm.epoch <= through)
            self._truncated_tables.add(table_id)
            self._install_marks(table_id, records)

    def table_watermarks(self, table_id: int) -> TableWatermarks:
        """The watermark records of ``table_id`` this store's reads apply (committed, plus
        uncommitted ones on a writer); empty if it has none."""
        table_id = _check_table_id(table_id)
        return self._marks.get(table_id, TableWatermarks())

    def _check_unsealed(self, epoch: int) -> None:
        if epoch <= self._buffer.sealed_epoch:
            raise InvalidArgumentError(f"epoch {epoch} is sealed (sealed up to {self._buffer.sealed_epoch}); "
                                       "use a newer epoch")

    def _install_marks(self, table_id: int, records: TableWatermarks) -> None:
        """Make ``records`` the table's watermark records for reads (under the lock)."""
        marks = dict(self._marks)
        marks[table_id] = records
        self._marks = marks
        self._refresh_state()

    def _marks_to_publish(self, epoch: int) -> dict:
        """The uncommitted watermark records a commit of ``epoch`` publishes (under the lock)."""
        committed = self._version.max_committed_epoch
        out = {}
        for table_id, records in self._marks.items():
            if records.newest_epoch > committed:
                part = records.between(committed, epoch)
                if part:
                    out[table_id] = part
        return out

    def _drop_truncated_ssts(self) -> None:
        """Remove from the version, in one delta, the SSTs holding only versions of one table
        that a truncation hides, once every reader is at or above the truncation's epoch (the
        compaction watermark: snapshots and the retention window hold it back); that delta
        raises ``safe_epoch`` to the watermark as a compaction would. Best effort, under the
        lock: an error is logged and the next commit retries."""
        if not self._truncated_tables:
            return
        watermark = self._watermark()
        version = self._version
        doomed, done = [], []
        for table_id in self._truncated_tables:
            committed = version.table_watermarks.get(table_id, TableWatermarks()).truncations
            applicable = [t for t in committed if t[0] <= watermark]
            if applicable:
                through = applicable[-1][1]
                doomed += [info.sst_id for info in version.all_ssts()
                           if list(info.table_ids) == [table_id] and info.max_epoch <= through]
            newest = self._marks.get(table_id, TableWatermarks()).truncations
            if not newest or newest[-1][0] <= watermark:
                done.append(table_id)   # nothing left that a later commit could remove
        if not doomed:
            self._truncated_tables.difference_update(done)
            return
        try:
            self._check_ownership()
            delta = VersionDelta.compaction(version, doomed, {}, watermark=watermark)
            try:
                new = self._manifest.commit(delta)
            finally:
                self._set_version(self._manifest.current)
            self._set_version(new)
            self.counters["truncated_ssts_dropped"] += len(doomed)
            self._truncated_tables.difference_update(done)
        except HummockError as exc:
            log.warning("could not remove the SSTs of truncated tables (retried at the next commit): %s", exc)

    def _compaction_hide(self, watermark: int) -> dict:
        """What a compaction at ``watermark`` may drop besides old versions (under the lock):
        ``{table_id: resolved}`` of the committed table watermarks (``resolve_all``)."""
        return resolve_all(self._version.table_watermarks, watermark | EPOCH_SPILL_MASK)


__all__ = ["MarksSide"]
