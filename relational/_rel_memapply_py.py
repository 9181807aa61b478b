"""Pure-Python twin of ``native/_rel_memapply.pyx``: a chunk of inserts and deletes through the
MemTable's merge rules, into an overlay, without touching the MemTable.

The reference for the native module: same name, results and exceptions. The merge rules are
those of :mod:`relational.mem_table` (its module docstring has the table); records are
``(op, old, new)`` tuples with ``op`` 1 INSERT, 2 DELETE, 3 UPDATE (the numbers are
``relational.mem_table``'s; do not change one without the other).

``merge_ops(records, inserts, keys, values, stored, consistent, error)``:

- ``records``: the MemTable's ``key -> record`` dict (read only);
- ``inserts``, ``keys``, ``values``: one entry per operation, in order: a truthy ``inserts[i]``
  inserts the row ``values[i]`` under ``keys[i]``, a falsy one deletes the row ``values[i]``
  (its old value); keys and values are ``bytes``;
- ``stored`` (strict mode): ``key -> stored value or None`` for keys without a record (a key
  missing from it counts as no stored row); ``None`` means empty;
- ``error(reason, key)``: builds the exception raised for the first operation the rules
  refuse (strict mode); nothing is changed then, since nothing here changes anything.

Returns ``(overlay, gone, added)``: ``overlay`` maps each key whose run ended with a record to
that record, ``gone`` lists (in first-touch order) the keys whose run ended with no record (a
strict insert cancelled by its delete), and ``added`` is the ``approx_bytes`` the MemTable
adds: ``len(key) + len(value) + RECORD_OVERHEAD`` each time a key without a record gets one. Raises
``ValueError`` when the three sequences differ in length or a record is not a 3-tuple, and
``TypeError`` when ``records`` or ``stored`` is not a dict or a key or value is not ``bytes``.

``insert_new(records, keys, values)``: the all-insert chunk's records (below);
``insert_absent`` the same when no key has a record, in one dict probe a key natively.

``probe_keys(records, keys)``: the keys a strict chunk must look up in storage (below).

``PrefixIndex(prefix_len)``: the MemTable's per-prefix index of its keys, and the records of
many prefixes read from it (below; ``MemTable.records_with_prefixes``).

``sorted_news(records)``: the MemTable's KV batch, keys ascending (below; ``MemTable.columns``).

Callers: :meth:`relational.mem_table.MemTable.apply`, ``insert_many`` and ``unrecorded`` only, through
``hummock._twins.load``.
"""

from __future__ import annotations

INSERT, DELETE, UPDATE = 1, 2, 3
#: bytes a MemTable record costs besides its key and value payload (CPython 3.11, measured with
#: the RSS of 1M records): the dict slot and its share of the table, the ``(op, old, new)``
#: tuple, the key's and the value's bytes headers with pymalloc's rounding, an index slot
RECORD_OVERHEAD = 192
_UNSEEN = object()


def _check_record(rec) -> tuple:
    if type(rec) is not tuple or len(rec) != 3:
        raise ValueError(f"a MemTable record is an (op, old, new) tuple, got {rec!r:.80}")
    return rec


def merge_ops(records, inserts, keys, values, stored, consistent, error):
    """See the module docstring."""
    if type(records) is not dict or not (stored is None or type(stored) is dict):
        raise TypeError(f"records and stored are dicts, got {type(records).__name__} and {type(stored).__name__}")
    inserts, keys, values = list(inserts), list(keys), list(values)
    n = len(keys)
    if len(inserts) != n or len(values) != n:
        raise ValueError(f"inserts, keys and values differ in length: {len(inserts)}, {n}, {len(values)}")
    if stored is None:
        stored = {}
    overlay = {}          # key -> record after the run so far, or None (no record)
    added = 0
    for i in range(n):
        key = keys[i]
        value = values[i]
        if type(key) is not bytes or type(value) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(key).__name__} and {type(value).__name__}")
        is_insert = bool(inserts[i])
        rec = overlay.get(key, _UNSEEN)
        if rec is _UNSEEN:
            rec = records.get(key)
        if rec is None:
            if consistent:
                found = stored.get(key)
                if is_insert:
                    if found is not None:
                        raise error("insert of a pk that already has a row", key)
                elif found is None:
                    raise error("delete of a pk that has no row", key)
                elif found != value:
                    raise error("delete whose old row is not the stored row", key)
            overlay[key] = (INSERT, None, value) if is_insert else (DELETE, value, None)
            added += len(key) + len(value) + RECORD_OVERHEAD
            continue
        op, old, cur = _check_record(rec)
        if is_insert:
            if op == DELETE:
                overlay[key] = (UPDATE, old, value)
            elif consistent:
                raise error("insert of a pk that already has a row", key)
            else:
                overlay[key] = (op, old, value)
        elif op == DELETE:
            if consistent:
                raise error("delete of a pk that has no row", key)
            overlay[key] = rec
        elif consistent and cur != value:
            raise error("delete whose old row is not the current row", key)
        elif op == INSERT:
            overlay[key] = None if consistent else (DELETE, cur, None)
        else:
            overlay[key] = (DELETE, old, None)
    gone = [key for key, rec in overlay.items() if rec is None]
    for key in gone:
        del overlay[key]
    return overlay, gone, added


def _checked_pairs(records, keys, values) -> tuple:
    """``(keys, values)`` as lists, after the checks :func:`insert_new` and
    :func:`insert_absent` make before they change anything."""
    if type(records) is not dict:
        raise TypeError(f"records is a dict, got {type(records).__name__}")
    keys, values = list(keys), list(values)
    if len(keys) != len(values):
        raise ValueError(f"keys and values differ in length: {len(keys)}, {len(values)}")
    for key, value in zip(keys, values):
        if type(key) is not bytes or type(value) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(key).__name__} and {type(value).__name__}")
    return keys, values


def insert_new(records, keys, values) -> None:
    """``records[k] = (INSERT, None, v)`` for each pair of ``keys`` and ``values`` (bytes; the
    caller checked that no key repeats or has a record). Checks everything before it changes
    anything: ``TypeError`` unless ``records`` is a dict and every key and value bytes,
    ``ValueError`` when the lengths differ. (The native module leaves these records untracked by
    the garbage collector, as it does merge_ops' records.)"""
    keys, values = _checked_pairs(records, keys, values)
    records.update(zip(keys, [(INSERT, None, value) for value in values]))


def insert_absent(records, keys, values) -> bool:
    """:func:`insert_new` when no key of ``keys`` has a record in ``records`` (the caller
    checked that none repeats), returning True; else False, and ``records`` is unchanged.
    The same ``TypeError`` / ``ValueError`` as :func:`insert_new`, before anything changes."""
    keys, values = _checked_pairs(records, keys, values)
    if not records.keys().isdisjoint(keys):
        return False
    records.update(zip(keys, [(INSERT, None, value) for value in values]))
    return True


def probe_keys(records, keys) -> list:
    """The distinct keys of ``keys`` (bytes; first-occurrence order) that have no entry in
    ``records`` (a dict): what a strict chunk looks up in storage. ``TypeError`` unless
    ``records`` is a dict and every key bytes."""
    if type(records) is not dict:
        raise TypeError(f"records is a dict, got {type(records).__name__}")
    keys = list(keys)
    for key in keys:
        if type(key) is not bytes:
            raise TypeError(f"keys are bytes, got {type(key).__name__}")
    return [key for key in dict.fromkeys(keys) if key not in records]


def merge_insert_runs(runs) -> tuple[list, list]:
    """One sorted ``(keys, values)`` batch from relaxed all-insert runs ``[(keys, values), ...]``
    in write order, each run's keys strictly ascending bytes: a key written by several runs
    takes its value from the latest. Checks everything first: ``TypeError`` unless keys and
    values are bytes, ``ValueError`` when a run's lengths differ or its keys do not ascend."""
    merged = {}
    for keys, values in _checked_runs(runs):
        merged.update(zip(keys, values))
    keys = sorted(merged)
    return keys, [merged[k] for k in keys]


def sorted_news(records: dict) -> tuple[list, list]:
    """``(keys, news)``: the keys of ``records`` ascending (bytes order) and each one's new
    value (a record's third item, None for a delete). ``TypeError`` unless ``records`` is a
    dict of bytes keys; ``ValueError`` for a record that is not a 3-tuple."""
    if type(records) is not dict:
        raise TypeError(f"records is a dict, got {type(records).__name__}")
    for key, rec in records.items():
        if type(key) is not bytes:
            raise TypeError(f"keys are bytes, got {type(key).__name__}")
        _check_record(rec)
    keys = sorted(records)
    return keys, [records[k][2] for k in keys]


def _checked_runs(runs) -> list:
    out = []
    for keys, values in runs:
        keys, values = list(keys), list(values)
        if len(keys) != len(values):
            raise ValueError(f"a run's keys and values differ in length: {len(keys)}, {len(values)}")
        for i, (key, value) in enumerate(zip(keys, values)):
            if type(key) is not bytes or type(value) is not bytes:
                raise TypeError(f"keys and values are bytes, got {type(key).__name__} and {type(value).__name__}")
            if i and keys[i - 1] >= key:
                raise ValueError(f"a run's keys must strictly ascend (at {i})")
        out.append((keys, values))
    return out


class PrefixIndex:
    """The MemTable's per-prefix index of its keys (``MemTable.records_with_prefixes``): keys
    are added (repeats allowed; a key shorter than ``prefix_len`` is its own prefix) and read
    back by prefix. The twin keeps a dict ``key[:prefix_len] -> bucket``: a bucket is the one
    key of its prefix (bytes), or a list of its keys (unsorted, may repeat) once a second
    distinct key comes; the native class hashes the prefixes in C (no ``bytes`` object for a
    prefix). ``ValueError`` for a ``prefix_len`` that is not an int >= 0; ``TypeError`` for a
    key or prefix that is not ``bytes`` (``add`` then adds nothing) or records not a dict."""

    def __init__(self, prefix_len):
        if type(prefix_len) is not int or prefix_len < 0:
            raise ValueError(f"prefix_len is an int >= 0, got {prefix_len!r}")
        self.prefix_len = prefix_len
        self._buckets: dict = {}

    def add(self, keys) -> None:
        """Index each key of ``keys`` under its prefix."""
        keys = list(keys)
        for key in keys:
            if type(key) is not bytes:
                raise TypeError(f"MemTable keys must be bytes, got {type(key).__name__}")
        buckets, plen = self._buckets, self.prefix_len
        for key in keys:
            prefix = key[:plen]
            bucket = buckets.get(prefix)
            if bucket is None:
                buckets[prefix] = key
            elif type(bucket) is bytes:
                if bucket != key:
                    buckets[prefix] = [bucket, key]
            else:
                bucket.append(key)

    def find(self, prefix: bytes) -> list:
        """The distinct keys added under ``prefix``, ascending."""
        if type(prefix) is not bytes:
            raise TypeError(f"a key prefix is bytes, got {type(prefix).__name__}")
        bucket = self._buckets.get(prefix)
        if bucket is None:
            return []
        return [bucket] if type(bucket) is bytes else sorted(set(bucket))

    def records(self, records: dict, prefixes) -> list:
        """For each prefix: ``[(key, record)]`` of its keys that have a record in ``records``,
        ascending, or ``None`` for none. A list bucket read is replaced by its sorted distinct
        keys."""
        if type(records) is not dict:
            raise TypeError(f"records is a dict, got {type(records).__name__}")
        buckets = self._buckets
        out = []
        for prefix in prefixes:
            if type(prefix) is not bytes:
                raise TypeError(f"a key prefix is bytes, got {type(prefix).__name__}")
            bucket = buckets.get(prefix)
            if bucket is None:
                out.append(None)
            elif type(bucket) is bytes:
                record = records.get(bucket)
                out.append(None if record is None else [(bucket, record)])
            else:
                bucket = buckets[prefix] = sorted(set(bucket))
                found = [(key, records[key]) for key in bucket if key in records]
                out.append(found or None)
        return out
