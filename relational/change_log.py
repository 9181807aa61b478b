"""Change logs: the per-epoch changes of a table or MV, kept in an internal table of their own
(what RisingWave's subscriptions read). docs/format.md "Change logs" is the layout's one source.

**Layout** (part of the file format, do not change). A change log is a table of its own id (the
SQL catalog allocates it, one per subscription). Each entry is the *net* change of one row pk
in one epoch:

- key   = ``vnode (2 bytes BE) | epoch (8 bytes BE) | memcomparable(pk)`` -- the vnode and the
  pk bytes are exactly the relation's own state-table key (``RowSerde.encode``), with the epoch
  the change was written at slid in after the vnode. Keyed by vnode first, so writers owning
  disjoint vnodes (the Spark runtime's tasks) write one epoch without overlapping keys; one
  entry per (vnode, epoch, pk), so no tiebreak.
- value = one op tag byte, then the relation's value encoding (``RowSerde.encode_value``) of
  the row(s): ``0x01`` insert + new row; ``0x02`` delete + old row; ``0x03`` update +
  ``u32 BE`` length of the old row's bytes + old row + new row.

Net change per pk per epoch: a row inserted and deleted in one epoch leaves nothing, a row
updated twice leaves one update from the epoch's first old row to its last new row, an update
back to the same bytes leaves nothing. A reader expands an update into ``UpdateDelete`` then
``UpdateInsert`` (RisingWave's ops). Readers order entries by ``(epoch, vnode, pk)``.

**Retention**: entries older than ``retention_ms`` before the epoch being written are hidden by
per-vnode table watermarks on the log table (every owned vnode; only the singleton vnode for a
relation without a distribution key) (``update_table_watermarks``, range ``[b"",
epoch_bytes(cutoff))`` after the vnode), advanced in steps of :data:`RETENTION_STEP_FRACTION`
of the retention (at least one second), so the watermark history stays short; compaction drops
what they hide. :func:`retained_from` reads the cutoff back; a reader whose position is older
gets :class:`ChangeLogExpiredError`, never a silent gap.

**Consumer pins** hold retention back for a named durable reader (the Spark source's
``consumer`` option): an object ``changelog-pins/<log table id>/<sha256(name)[:32]>.json``
holding ``{"position": p, "ttl_s": t, "consumer": name}`` (:func:`write_pin`; the path is
built from ids and a hash only). While it lives (its last write plus ``ttl_s`` on the store's
clock) the writer's cutoff stays at or below ``p + 2^16``: every change after ``p`` is kept.
The writer reads the pins (one listing) only when its cutoff would advance, so at most once
per step; a pin it cannot parse is ignored with a warning (logger ``relational.change_log``).

**Writing**: :class:`ChangeLogWriter`, fed by ``Materialize`` with the changes it applied
(``record``) and committed at each barrier (``commit``: one sorted ``ingest_batch`` at the
epoch, then the retention watermark). It keeps the epoch's net changes in memory (a dict keyed
by the state-table key): an epoch's changes must fit in memory.

**Reading**: :func:`read_changes` over anything with ``iter(table_id, epoch, start, end)`` --
``HummockStorage``, a snapshot's store, ``hummock.pinned_read.VersionReader`` -- for epochs in
``(after, upto]`` and a vnode range, skipping absent vnodes with one seek each.

Callers: ``stream/executors/materialize.py`` (writer), ``sql/subscription.py`` (cursors,
``Connection.subscribe``), ``relational/spark_changelog.py`` (the Spark streaming source).
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import json
import logging
import struct

import numpy as np
import pyarrow as pa

from hummock.errors import ExpiredEpochError
from hummock.object_store.base import ObjectNotFoundError
from hummock.key import EPOCH_BASE_UNIX_MS, EPOCH_PHYSICAL_SHIFT, epoch_to_unix_ms

from relational.errors import SchemaError
from relational.vnode import SINGLETON_VNODE, VNODE_BYTES, VNODE_COUNT

# --- the format: part of the file format, do not change ----------------------------------------
TAG_INSERT = 0x01
TAG_DELETE = 0x02
TAG_UPDATE = 0x03
EPOCH_BYTES = 8
_U32 = struct.Struct(">I")
_INSERT_TAG = bytes((TAG_INSERT,))

#: ops a reader yields (the stream layer's numbers) and RisingWave's names for them
OP_INSERT, OP_DELETE, OP_UPDATE_DELETE, OP_UPDATE_INSERT = 1, 2, 3, 4
OP_NAMES = {OP_INSERT: "Insert", OP_DELETE: "Delete", OP_UPDATE_DELETE: "UpdateDelete",
            OP_UPDATE_INSERT: "UpdateInsert"}
RETENTION_STEP_FRACTION = 1 / 32   # the cutoff advances once it moved this much of the retention
MIN_RETENTION_STEP_MS = 1000

_ABSENT = object()   # "no row before this epoch" in the writer's net-change dict
PIN_PREFIX = "changelog-pins/"
MAX_PIN_BYTES = 4096
log = logging.getLogger("relational.change_log")


class ChangeLogExpiredError(ExpiredEpochError):
    """A change-log position older than what the log keeps: the changes after it were dropped
    by retention (or precede the subscription). ``epoch``: the position asked for;
    ``min_readable_epoch``: the oldest position that is still complete."""

    def __init__(self, log_name: str, epoch: int, min_readable_epoch: int):
        ValueError.__init__(self, f"change log of {log_name}: position {epoch} is older than what it keeps; the "
                                  f"oldest complete position is {min_readable_epoch} (changes in between were "
                                  f"dropped by the retention or precede the subscription)")
        self.epoch, self.min_readable_epoch, self.log_name = epoch, min_readable_epoch, log_name


@dataclasses.dataclass(frozen=True)
class ChangeLogSpec:
    """One change log a Materialize writes: its table id and retention (milliseconds)."""

    table_id: int
    retention_ms: int
    name: str = ""


@dataclasses.dataclass(frozen=True)
class Change:
    """One change a reader yields: ``epoch`` it was committed at, ``op`` (``OP_*``) and the
    relation's full row (schema order)."""

    epoch: int
    op: int
    row: tuple

    @property
    def op_name(self) -> str:
        return OP_NAMES[self.op]

    @property
    def rw_timestamp(self) -> int:
        """The epoch's wall-clock milliseconds (RisingWave's ``rw_timestamp``)."""
        return epoch_to_unix_ms(self.epoch)


def epoch_bytes(epoch: int) -> bytes:
    return epoch.to_bytes(EPOCH_BYTES, "big")


def log_key(state_key: bytes, epoch: int) -> bytes:
    """The log key of a state-table key written at ``epoch`` (module docstring)."""
    return state_key[:VNODE_BYTES] + epoch_bytes(epoch) + state_key[VNODE_BYTES:]


def retention_cutoff(epoch: int, retention_ms: int) -> int:
    """The oldest epoch kept when writing ``epoch``: ``retention_ms`` earlier (0 if before the base)."""
    ms = (epoch >> EPOCH_PHYSICAL_SHIFT) - retention_ms
    return max(ms, 0) << EPOCH_PHYSICAL_SHIFT


class ChangeLogWriter:
    """Collects one relation's net changes per epoch and writes them to its log (module docstring).

    ``store``: the relation's state table's store (also a Spark task's store); ``serde``: its
    ``RowSerde``; ``vnodes``: a callable giving the owned vnodes (a ``Bitmap``) at commit.
    REQUIRES: the changes recorded are consistent (what Materialize applied to its table)."""

    def __init__(self, store, spec: ChangeLogSpec, serde, vnodes):
        self.store, self.spec, self.serde, self._vnodes = store, spec, serde, vnodes
        self._changes: dict = {}   # state key -> [old value bytes or _ABSENT, new value bytes or None]
        self._runs: list = []      # (sorted keys, values) of insert-only chunks, before any other change
        marks = getattr(store, "table_watermarks", None)   # the cutoff already published (a restart, a task)
        self._cutoff = retained_from(marks(spec.table_id)) if marks is not None else -1

    def record(self, ops, columns, visibility=None) -> None:
        """Record a chunk of applied changes (ops 1..4, columns in schema order)."""
        ops = np.asarray(ops.to_numpy(zero_copy_only=False) if isinstance(ops, pa.Array) else ops)
        if visibility is not None:
            mask = np.asarray(visibility.to_numpy(zero_copy_only=False) if isinstance(visibility, pa.Array)
                              else visibility, dtype=bool)
            if not mask.all():
                ops = ops[mask]
                keep = pa.array(mask)
                columns = [c.filter(keep) if isinstance(c, (pa.Array, pa.ChunkedArray)) else
                           [v for v, m in zip(c, mask) if m] for c in columns]
        n = len(ops)
        if not n:
            return
        if not self._changes and bool((ops == OP_INSERT).all()):
            # inserts of keys no recorded change touches (a consistent stream inserts a key again
            # only after deleting it, which goes through the dict): kept as a sorted run
            _, keys, values = self.serde.encode_chunk(list(columns), n, sort=True)
            self._runs.append((keys, values))
            return
        self._fold_runs()
        _, keys, values = self.serde.encode_chunk(list(columns), n)
        changes = self._changes
        for op, key, value in zip(ops.tolist(), keys, values):
            entry = changes.get(key)
            if op == OP_INSERT or op == OP_UPDATE_INSERT:
                if entry is None:
                    changes[key] = [_ABSENT, value]
                else:
                    entry[1] = value
            elif entry is None:
                changes[key] = [value, None]
            else:
                entry[1] = None

    def _fold_runs(self) -> None:
        """Move the insert runs into the net-change dict (a change other than an insert came)."""
        for keys, values in self._runs:
            self._changes.update(zip(keys, ([_ABSENT, v] for v in values)))
        self._runs = []

    def entries(self, epoch: int) -> list:
        """The sorted ``(log key, value)`` pairs of the net changes recorded (module docstring)."""
        eb = epoch_bytes(epoch)
        if self._runs:   # only inserts this epoch (else they were folded)
            if len(self._runs) == 1:
                keys, values = self._runs[0]
            else:
                pairs = sorted(kv for keys, values in self._runs for kv in zip(keys, values))
                keys, values = [k for k, _ in pairs], [v for _, v in pairs]
            tag = _INSERT_TAG
            return [(k[:VNODE_BYTES] + eb + k[VNODE_BYTES:], tag + v) for k, v in zip(keys, values)]
        out = []
        for key in sorted(self._changes):
            old, new = self._changes[key]
            if old is _ABSENT:
                if new is None:
                    continue
                value = _INSERT_TAG + new
            elif new is None:
                value = bytes((TAG_DELETE,)) + old
            elif new == old:
                continue
            else:
                value = bytes((TAG_UPDATE,)) + _U32.pack(len(old)) + old + new
            out.append((key[:VNODE_BYTES] + eb + key[VNODE_BYTES:], value))
        return out

    def commit(self, epoch: int) -> None:
        """Write the epoch's net changes at ``epoch`` and advance the retention watermark. All or
        nothing: if the store refuses the batch, the changes stay and a retry writes them."""
        pairs = self.entries(epoch)
        if pairs:
            self.store.ingest_batch(self.spec.table_id, pairs, epoch)
        self._changes, self._runs = {}, []
        cutoff = retention_cutoff(epoch, self.spec.retention_ms)
        step = max(int(self.spec.retention_ms * RETENTION_STEP_FRACTION), MIN_RETENTION_STEP_MS) << EPOCH_PHYSICAL_SHIFT
        if cutoff > 0 and cutoff >= self._cutoff + step:
            objects = getattr(self.store, "_store", None)   # HummockStorage's and TaskStore's object store
            pinned = pinned_position(objects, self.spec.table_id) if objects is not None else None
            if pinned is not None:
                cutoff = min(cutoff, pinned + (1 << EPOCH_PHYSICAL_SHIFT))
            owned = self._vnodes()
            if not self.serde.dist_key_indices:   # a singleton relation lives in one vnode
                owned = [SINGLETON_VNODE] if SINGLETON_VNODE in owned else []
            if cutoff > self._cutoff and owned:
                self.store.update_table_watermarks(self.spec.table_id, epoch,
                                                   dict.fromkeys(owned, (b"", epoch_bytes(cutoff))))
                self._cutoff = cutoff

    def discard(self) -> None:
        """Forget the changes recorded (the epoch failed)."""
        self._changes, self._runs = {}, []


# --- reading --------------------------------------------------------------------------------------

def retained_from(watermarks) -> int:
    """The oldest epoch a log still holds every entry of, by its table watermarks (a
    ``TableWatermarks`` or ``None``): 0 when nothing was dropped."""
    if not watermarks:
        return 0
    oldest = 0
    for _, hi in watermarks.latest.values():
        if hi is not None and len(hi) >= EPOCH_BYTES:
            oldest = max(oldest, int.from_bytes(hi[:EPOCH_BYTES], "big"))
    return oldest


def check_position(log_name: str, position: int, start_epoch: int, watermarks) -> None:
    """Raise :class:`ChangeLogExpiredError` unless the log holds every change after
    ``position``: it is at or after the subscription's ``start_epoch`` and no entry above it
    was dropped by retention (entries below the cutoff ``W`` are gone: ``position`` must be
    at least the epoch just before ``W``)."""
    cutoff = retained_from(watermarks)
    oldest = max(start_epoch, cutoff - (1 << EPOCH_PHYSICAL_SHIFT))
    if position < oldest:
        raise ChangeLogExpiredError(log_name, position, oldest)


def decode_entry(serde, key: bytes, value: bytes):
    """``(epoch, [(op, row), ...])`` of one log entry; ``SchemaError`` if it is malformed."""
    if len(key) < VNODE_BYTES + EPOCH_BYTES or not value:
        raise SchemaError(f"malformed change-log entry {key!r:.80}")
    epoch = int.from_bytes(key[VNODE_BYTES:VNODE_BYTES + EPOCH_BYTES], "big")
    state_key = key[:VNODE_BYTES] + key[VNODE_BYTES + EPOCH_BYTES:]
    tag, body = value[0], value[1:]
    if tag == TAG_INSERT:
        return epoch, [(OP_INSERT, serde.decode(state_key, body))]
    if tag == TAG_DELETE:
        return epoch, [(OP_DELETE, serde.decode(state_key, body))]
    if tag == TAG_UPDATE and len(body) >= 4:
        n = _U32.unpack_from(body)[0]
        if 4 + n <= len(body):
            return epoch, [(OP_UPDATE_DELETE, serde.decode(state_key, body[4:4 + n])),
                           (OP_UPDATE_INSERT, serde.decode(state_key, body[4 + n:]))]
    raise SchemaError(f"malformed change-log entry {key!r:.80}: tag {tag} with {len(body)} bytes")


def _vnode_entries(reader, table_id: int, read_epoch: int, after: int, upto: int, vnodes: range):
    """Per vnode holding entries in ``(after, upto]``: a list of its ``(key, value)``s (one
    seek per vnode with data, plus one to find the next such vnode)."""
    v, stop = vnodes.start, vnodes.stop
    lo, hi = epoch_bytes(after + 1), epoch_bytes(upto + 1) if upto + 1 < 1 << 64 else None
    while v < stop:
        prefix = v.to_bytes(VNODE_BYTES, "big")
        end = (stop.to_bytes(VNODE_BYTES, "big") if stop < 1 << 16 else None)
        found, nxt = [], None
        for key, value in reader.iter(table_id, read_epoch, prefix + lo, end):
            kv = int.from_bytes(key[:VNODE_BYTES], "big")
            if kv != v:
                nxt = kv
                break
            if hi is not None and key[VNODE_BYTES:VNODE_BYTES + EPOCH_BYTES] >= hi:
                nxt = v + 1
                break
            found.append((key, value))
        if found:
            yield found
        if nxt is None:
            return
        v = nxt


def read_changes(reader, table_id: int, serde, read_epoch: int, after: int, upto: int,
                 vnodes: range = range(VNODE_COUNT)):
    """Yield :class:`Change`\\ s of log ``table_id`` with epochs in ``(after, upto]`` and vnodes
    in ``vnodes``, ordered by ``(epoch, vnode, pk)``, read at ``read_epoch`` (>= ``upto``).
    ``serde``: the relation's ``RowSerde``. The caller checks the position first
    (:func:`check_position`)."""
    if upto <= after:
        return
    per_vnode = [iter(part) for part in _vnode_entries(reader, table_id, read_epoch, after, upto, vnodes)]
    merged = heapq.merge(*per_vnode, key=lambda kv: kv[0][VNODE_BYTES:VNODE_BYTES + EPOCH_BYTES]) \
        if len(per_vnode) > 1 else (per_vnode[0] if per_vnode else ())
    for key, value in merged:
        epoch, changes = decode_entry(serde, key, value)
        for op, row in changes:
            yield Change(epoch, op, row)


def epoch_of_unix_ms(unix_ms: int) -> int:
    """The epoch of a wall-clock ms (RisingWave's ``rw_timestamp``), clamped at the base."""
    return max(unix_ms - EPOCH_BASE_UNIX_MS, 0) << EPOCH_PHYSICAL_SHIFT


# --- consumer pins ---------------------------------------------------------------------------------

def pin_path(log_table_id: int, consumer: str) -> str:
    return f"{PIN_PREFIX}{int(log_table_id)}/{hashlib.sha256(consumer.encode()).hexdigest()[:32]}.json"


def write_pin(objects, log_table_id: int, consumer: str, position: int, ttl_s: float) -> str:
    """Pin ``position`` of log ``log_table_id`` for ``consumer`` for ``ttl_s`` seconds (module
    docstring); returns the object path. Raises ObjectStoreError."""
    path = pin_path(log_table_id, consumer)
    objects.upload(path, json.dumps({"position": int(position), "ttl_s": float(ttl_s),
                                     "consumer": consumer}).encode())
    return path


def drop_pins(objects, log_table_id: int) -> None:
    """Delete every pin of a log (its subscription was dropped)."""
    paths = [m.path for m in objects.list(f"{PIN_PREFIX}{int(log_table_id)}/")]
    if paths:
        objects.delete(paths)


def pinned_position(objects, log_table_id: int):
    """The lowest position a live pin of the log holds, or None."""
    lowest = None
    metas = objects.list(f"{PIN_PREFIX}{int(log_table_id)}/")
    if not metas:
        return None
    now = objects.now()
    for meta in metas:
        try:
            if meta.size > MAX_PIN_BYTES:
                raise ValueError(f"{meta.size} bytes, over {MAX_PIN_BYTES}")
            body = json.loads(objects.read(meta.path))
            position, ttl = body["position"], body["ttl_s"]
            if isinstance(position, bool) or not isinstance(position, int) or not isinstance(ttl, (int, float)):
                raise ValueError("position must be an int and ttl_s a number")
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the malformed change-log pin %s: %s", meta.path, exc)
            continue
        except ObjectNotFoundError:   # gone meanwhile (dropped): it pins nothing
            continue
        if (now - meta.last_modified).total_seconds() <= ttl:
            lowest = position if lowest is None else min(lowest, position)
    return lowest


# --- the subscription record (written by the SQL catalog, read by the Spark source) ----------------

SUBSCRIPTION_PROPERTY = "subscription"


def subscription_properties(relation: str, retention_ms: int, start_epoch: int) -> dict:
    """The ``properties`` of a subscription's catalog record (its ``TableDesc`` is the log's:
    id, the subscription's name, the relation's columns and pk)."""
    return {SUBSCRIPTION_PROPERTY: {"relation": relation, "retention_ms": int(retention_ms),
                                    "start_epoch": int(start_epoch)}}
