"""Background rotation (``Manifest.background_rotation``) when no thread can take the deletes.

The deletes of a rotation run on an executor; ``submit`` raises ``RuntimeError`` once the
interpreter is shutting down (daemon threads -- the stream runtime, the compactor -- still
commit then) or when no thread can be started. The delta is already stored at that point, so
the commit must still return its version (module doc, invariant 4: a failed delete "never fails
a commit"), and the old objects are deleted in line as without background rotation.
"""

from __future__ import annotations

import concurrent.futures.thread as futures_thread

from hummock.manifest import Manifest, checkpoint_path, delta_path
from hummock.object_store import MemoryObjectStore
from test_manifest import manifest_names, script


def test_commit_that_rotates_during_interpreter_shutdown_still_returns(monkeypatch):
    store = MemoryObjectStore()
    deltas, versions = script(8)
    manifest = Manifest.open(store, checkpoint_interval=4)
    manifest.background_rotation = True
    for delta in deltas[:4]:                # checkpoint 4: nothing to delete yet
        manifest.commit(delta)
    monkeypatch.setattr(futures_thread, "_shutdown", True)   # what atexit sets at shutdown
    for i in range(4, 8):                   # checkpoint 8 deletes deltas 1..4
        assert manifest.commit(deltas[i]) == versions[i + 1]
    monkeypatch.undo()
    manifest.close()
    assert manifest.current == versions[-1]
    assert manifest_names(store) == [checkpoint_path(0), checkpoint_path(4), checkpoint_path(8)] + [
        delta_path(i) for i in range(5, 9)]
    assert Manifest.open(store).current == versions[-1]
