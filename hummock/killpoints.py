"""Named crash points: the engine calls ``kill_point(name)`` at the moments a crash is most
dangerous, and a test process sets ``HUMMOCK_KILL_POINT=name`` (or ``name:N``, the N-th hit)
to be killed there with SIGKILL -- no cleanup, no ``finally``, exactly like a power cut.

With the variable unset (every process but a crash test's child) a call costs one comparison.
``KILL_POINTS`` lists every name the engine uses, so a test can check each one is hit.
Callers: the manifest, the storage engine's flush and vacuum, the compaction manager,
the local object store's atomic create.
"""

from __future__ import annotations

import os
import signal

__all__ = ["kill_point", "KILL_POINTS", "ENV_VAR"]

ENV_VAR = "HUMMOCK_KILL_POINT"
KILL_POINTS = (
    "flush.after_sst_upload",          # staging SSTs uploaded, not yet in any delta
    "manifest.before_delta_write",     # a delta is about to be uploaded
    "object_store.after_barrier",      # local upload_if_absent: deferred uploads and the new
    #                                    object's temp file fsynced, the object not yet linked
    "manifest.after_delta_write",      # the delta is stored; the writer has not seen the reply
    "compaction.after_outputs",        # compaction outputs uploaded, their delta not yet written
    "compaction.after_install",        # the compaction delta is stored, vacuum not yet run
    "vacuum.mid_delete",               # vacuum deleted part of its doomed objects
)


def _parse(value: str | None) -> tuple[str | None, int]:
    if not value:
        return None, 0
    name, _, count = value.partition(":")
    return name, int(count) if count.isdigit() and int(count) > 0 else 1


_target, _remaining = _parse(os.environ.get(ENV_VAR))


def kill_point(name: str) -> None:
    """SIGKILL this process if ``HUMMOCK_KILL_POINT`` names ``name`` and its hit count is reached."""
    global _remaining
    if _target is None or name != _target:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
