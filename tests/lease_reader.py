"""Child process of tests/test_two_process.py: a read-only opener that refreshes and reads in a
loop while tests/churn_writer.py compacts and vacuums the same store in another process.

Usage: ``python lease_reader.py URL OPTIONS_JSON SECONDS``. Opens ``read_only=True`` (so it
holds a reader lease) with the writer's ``reader_lease_s``, then for ``SECONDS`` repeats a
*cycle*: ``refresh()``; scan the whole table at the new ``max_committed_epoch`` and compare it
row by row with ``expected_state`` of that epoch; point-read sample keys there; scan again the
previous cycle's epoch when it is still at or above ``min_readable_epoch``. Every
``SNAPSHOT_EVERY_S`` seconds it takes a snapshot and holds it ``SNAPSHOT_HOLD_S`` seconds --
longer than the writer's ``vacuum_min_age_s``, so meanwhile only the lease (naming the
snapshot's older version while refreshes move on) keeps its SSTs -- reading sample keys from
it each cycle and scanning it whole on release; ``lease_only_ssts`` counts the SSTs such a
scan needed that the current version no longer holds (past the vacuum age, only the lease
kept them).

Every error is caught and counted by type; ``VersionExpiredError`` is the only one the engine
may raise here (a clear request to refresh, e.g. after the lease lapsed). Prints one line
``SUMMARY <json>``: cycles, rows checked, wrong rows, errors by type, samples of other errors.
"""

import json
import sys
import time
import traceback
from collections import Counter

from churn_writer import KEYS, OPTIONS, TABLE, expected_state, expected_value, key
from hummock import HummockStorage

SNAPSHOT_EVERY_S = 4.0
SNAPSHOT_HOLD_S = 3.0


def compare(got, expected: dict) -> int:
    """Wrong rows: keys whose value differs, is missing or should not be there; or disorder."""
    got = list(got)
    wrong = sum(1 for a, b in zip(got, got[1:]) if a[0] >= b[0])
    seen = dict(got)
    wrong += sum(1 for k, v in expected.items() if seen.get(k) != v)
    wrong += sum(1 for k in seen if k not in expected)
    return wrong


def main(url: str, extra: dict, seconds: float) -> int:
    counts = Counter()
    errors = Counter()
    samples = []
    store = HummockStorage.open(url, OPTIONS.replace(**extra), read_only=True)
    previous = None
    held = None          # (snapshot, release time)
    sample_keys = [key(k) for k in range(0, KEYS, 97)]
    deadline = time.monotonic() + seconds
    next_snapshot = time.monotonic() + 1.0
    first_epoch = last_epoch = None
    while time.monotonic() < deadline:
        counts["cycles"] += 1
        try:
            epoch = store.refresh()
            i = epoch >> 16
            first_epoch = i if first_epoch is None else first_epoch
            last_epoch = i
            expected = expected_state(i)
            counts["wrong_rows"] += compare(store.iter(TABLE, epoch), expected)
            counts["rows_checked"] += len(expected)
            got = store.multi_get(TABLE, sample_keys, epoch)
            counts["wrong_rows"] += sum(1 for k, v in zip(sample_keys, got) if expected.get(k) != v)
            if previous is not None and previous != epoch and previous >= store.min_readable_epoch:
                old = expected_state(previous >> 16)
                counts["wrong_rows"] += compare(store.iter(TABLE, previous), old)
                counts["rows_checked"] += len(old)
                counts["older_epoch_scans"] += 1
            previous = epoch
            now = time.monotonic()
            if held is None and now >= next_snapshot and epoch:
                held = (store.snapshot(), now + SNAPSHOT_HOLD_S)
                next_snapshot = now + SNAPSHOT_EVERY_S
            if held is not None:
                snap, until = held
                j = snap.epoch >> 16
                got = snap.multi_get(TABLE, sample_keys)
                counts["wrong_rows"] += sum(1 for k, v in zip(sample_keys, got)
                                            if expected_value(int(k[3:]), j) != v)
                if now >= until:
                    counts["lease_only_ssts"] += len(snap._state.version.sst_ids()
                                                     - store.version().sst_ids())
                    whole = expected_state(j)
                    counts["wrong_rows"] += compare(snap.iter(TABLE), whole)
                    counts["rows_checked"] += len(whole)
                    counts["snapshots_checked"] += 1
                    snap.release()
                    held = None
            counts["ok_cycles"] += 1
        except Exception as exc:   # noqa: BLE001 -- counted and reported, never hidden
            errors[type(exc).__name__] += 1
            if type(exc).__name__ != "VersionExpiredError" and len(samples) < 5:
                samples.append(traceback.format_exc()[-2000:])
            if held is not None:
                held[0].release()
                held = None
    store.close()
    summary = {**counts, "errors": dict(errors), "error_samples": samples,
               "epochs_read": [first_epoch, last_epoch], "seconds": seconds}
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])))
