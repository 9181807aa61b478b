"""A store wrapper that fails exactly the operations a test scripts, for deterministic fault tests.

``ScriptedStore(inner)`` passes everything to ``inner`` until a rule matches: ``fail(op,
prefix, when="before"|"after", times=1)`` makes the next ``times`` calls of ``op`` (``upload``,
``upload_if_absent``, ``read``, ``delete``, ``list``, ``exists``) on a path starting with
``prefix`` raise ``ObjectStoreError`` -- *before* the operation reaches the inner store, or
*after* it was applied (an ambiguous failure: the reply was lost). ``calls`` logs every
operation as ``(op, path)``. ``hold(op, prefix)`` returns a :class:`Gate`: matching calls block
until the test opens it (``gate.entered`` is set once one is waiting) -- a slow upload. The random, seeded harness for state machines is ``faults.py``.
"""

from __future__ import annotations

import threading

from hummock.object_store.base import ObjectStore, ObjectStoreError


class Gate:
    """Blocks the calls a :meth:`ScriptedStore.hold` matched until :meth:`open`."""

    def __init__(self, op: str, prefix: str):
        self.op, self.prefix = op, prefix
        self.entered = threading.Event()   # a call is waiting (or passed)
        self._open = threading.Event()

    def open(self) -> None:
        self._open.set()

    def pass_through(self, op: str, path: str) -> None:
        if op == self.op and path.startswith(self.prefix):
            self.entered.set()
            if not self._open.wait(60):
                raise AssertionError(f"gate on {self.op} {self.prefix!r} never opened")


class ScriptedStore(ObjectStore):
    def __init__(self, inner: ObjectStore):
        super().__init__()
        self.inner = inner
        self.rules: list[list] = []   # [op, prefix, when, remaining]
        self.calls: list[tuple[str, str]] = []
        self.injected = 0
        self.gates: list[Gate] = []

    def __repr__(self) -> str:
        return f"ScriptedStore({self.inner!r})"

    def fail(self, op: str, prefix: str = "", when: str = "before", times: int = 1) -> None:
        assert when in ("before", "after")
        self.rules.append([op, prefix, when, times])

    def hold(self, op: str, prefix: str = "") -> Gate:
        gate = Gate(op, prefix)
        self.gates.append(gate)
        return gate

    def lock_store(self):
        return self.inner.lock_store()

    def now(self):
        return self.inner.now()

    def _rule(self, op: str, path: str):
        for rule in self.rules:
            if rule[0] == op and path.startswith(rule[1]) and rule[3] > 0:
                rule[3] -= 1
                return rule[2]
        return None

    def _run(self, op: str, path: str, fn):
        self.calls.append((op, path))
        for gate in list(self.gates):
            gate.pass_through(op, path)
        when = self._rule(op, path)
        if when == "before":
            self.injected += 1
            raise ObjectStoreError(f"injected failure before {op} of {path!r}", path=path)
        result = fn()
        if when == "after":
            self.injected += 1
            raise ObjectStoreError(f"injected failure after {op} of {path!r} (reply lost)", path=path)
        return result

    def _upload(self, path, data):
        return self._run("upload", path, lambda: self.inner.upload(path, data))

    def _upload_if_absent(self, path, data):
        return self._run("upload_if_absent", path, lambda: self.inner.upload_if_absent(path, data))

    def _read(self, path, start, end):
        return self._run("read", path, lambda: self.inner.read(path, start, end))

    def _size(self, path):
        return self.inner.size(path)

    def _exists(self, path):
        return self._run("exists", path, lambda: self.inner.exists(path))

    def _delete(self, paths):
        for path in paths:
            self._run("delete", path, lambda p=path: self.inner.delete(p))

    def _list(self, prefix):
        return self._run("list", prefix, lambda: self.inner.list(prefix))

    def _streaming_upload(self, path):
        self.calls.append(("streaming_upload", path))
        for gate in list(self.gates):
            gate.pass_through("upload", path)
        if self._rule("upload", path) == "before":
            self.injected += 1
            raise ObjectStoreError(f"injected failure before upload of {path!r}", path=path)
        return self.inner.streaming_upload(path)

    def _close(self):
        self.inner.close()
