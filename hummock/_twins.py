"""Chooses between a native (Cython) module and its pure-Python twin (DESIGN.md section 2).

Every algorithm with a hot path exists twice: ``native/<name>.pyx`` and a pure-Python twin in
the package that owns the algorithm, with the same public names and the same exceptions
(msgpack keeps ``_cmsgpack.pyx`` beside ``fallback.py`` the same way). An owning module calls
:func:`load` once at import time and re-exports what it gets.

Rules:
- ``HUMMOCK_PURE_PYTHON=1`` (or ``true``/``yes``) forces every twin, for tests and debugging.
- Otherwise the native module is used when it imports; if it does not (not built, broken
  build), the twin is used and the failure is recorded in :data:`LOAD_FAILURES`, which
  ``tests/test_native_build.py`` turns into a loud failure unless pure mode was forced.
- The choice is made per process, once per module, and never changes afterwards.

Callers: the owning packages (``hummock``, ``relational``) only.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: native module name -> the ImportError text that made us fall back to the twin.
LOAD_FAILURES: dict[str, str] = {}
#: native module name -> True if the native module is in use, False if its twin is.
LOADED: dict[str, bool] = {}


def pure_python_forced() -> bool:
    """True when ``HUMMOCK_PURE_PYTHON`` asks for the pure-Python twins."""
    return os.environ.get("HUMMOCK_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")


def load(native_name: str, twin_name: str) -> ModuleType:
    """Return the native module ``native.<native_name>`` or, failing that, the twin module.

    ``twin_name`` is the dotted name of the pure-Python module with the same API.
    """
    if not pure_python_forced():
        try:
            module = importlib.import_module(f"native.{native_name}")
        except ImportError as exc:
            LOAD_FAILURES[native_name] = f"{type(exc).__name__}: {exc}"
        else:
            LOADED[native_name] = True
            return module
    LOADED[native_name] = False
    return importlib.import_module(twin_name)


def expected_native_modules() -> list[str]:
    """Names of every native module the source tree declares (``native/*.pyx``)."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "native")
    return sorted(name[:-4] for name in os.listdir(folder) if name.endswith(".pyx"))
