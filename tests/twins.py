"""Which implementations a twin test runs: the pure twin always, the native module too unless
``HUMMOCK_PURE_PYTHON=1``. A native module that should be there but does not import fails the
test (ImportError) instead of skipping it."""

import importlib

from hummock import _twins


def implementations(pure_module, native_name: str) -> list:
    if _twins.pure_python_forced():
        return [pure_module]
    return [pure_module, importlib.import_module(f"native.{native_name}")]
