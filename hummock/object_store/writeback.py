"""Start a file's write-back without waiting for it: Linux ``sync_file_range(fd, 0, 0,
SYNC_FILE_RANGE_WRITE)``, a hint the local object store gives for each deferred upload as it
is published (local.py, "Deferred durability").

Why: a flush SST is published unsynced and fsynced by the checkpoint's barrier a little later,
together with the manifest delta. Without the hint the kernel starts writing the SST's pages
back only inside that fsync, so the barrier waits for the whole write (~580 KB a q1 batch on
this VM's disk). With it the device writes while the engine prepares the delta, and the
barrier's fsync finds most of the pages clean. A pool thread calling fsync at publication
cannot do this: it needs the interpreter lock first, which the thread preparing the delta
holds (docs/performance.md, the bench.peers section: the session of 2026-11-29).

Invariants: a hint only -- durability still comes from the barrier's fsync alone, and nothing
here reports or consumes a write-back error (``SYNC_FILE_RANGE_WRITE`` without the wait flags
neither waits nor checks the file's error state, so the barrier's fsync still sees any error).
Every failure is ignored; where the call does not exist (not Linux) :func:`start_writeback`
does nothing. ``ctypes`` and the libc lookup are loaded on first use, not at import (readers
never pay for them).

Callers: :mod:`hummock.object_store.local` only.
"""

from __future__ import annotations

import threading

SYNC_FILE_RANGE_WRITE = 2   # <fcntl.h>; the same value on every Linux architecture

_call = None          # the libc function, False where there is none; None until first use
_call_lock = threading.Lock()


def _load():
    global _call
    with _call_lock:
        if _call is None:
            try:
                import ctypes
                function = ctypes.CDLL(None, use_errno=True).sync_file_range
                function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
                function.restype = ctypes.c_int
                _call = function
            except (OSError, AttributeError, ImportError):   # not Linux, or no ctypes
                _call = False
        return _call


def start_writeback(fd: int) -> bool:
    """Ask the kernel to start writing ``fd``'s dirty pages back now (module doc); True if the
    hint was given, False where it could not be (no such call, or it failed)."""
    call = _call if _call is not None else _load()
    if not call:
        return False
    try:
        return call(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0
    except Exception:   # noqa: BLE001 -- a hint: any failure leaves the barrier's fsync to do it all
        return False


def available() -> bool:
    """Whether this platform has the call (tests skip on those that do not)."""
    return bool(_call if _call is not None else _load())
