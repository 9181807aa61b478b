"""A broken native build must never pass silently.

In the native run every ``native/*.pyx`` must have compiled and every owning package must have
picked its native module; in the pure run (``HUMMOCK_PURE_PYTHON=1``) every package must have
picked its twin. Importing every module of every layer first makes each owner call ``_twins.load``.
"""

import importlib
import pkgutil

import pytest

from hummock import _twins

LAYERS = ["hummock", "relational", "stream", "sql"]


@pytest.fixture(scope="module", autouse=True)
def _import_owners():
    """Import every module of every layer, so each owner has called ``_twins.load``."""
    for layer in LAYERS:
        package = importlib.import_module(layer)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{layer}."):
            importlib.import_module(info.name)


def test_every_native_module_has_an_owner_that_loaded_it():
    expected = _twins.expected_native_modules()
    assert expected, "no native/*.pyx found: the source tree is incomplete"
    assert sorted(_twins.LOADED) == expected, "a native module has no owner importing it through _twins.load"


def test_native_modules_built_unless_pure_forced():
    if _twins.pure_python_forced():
        assert not any(_twins.LOADED.values()), f"pure mode forced but natives loaded: {_twins.LOADED}"
        return
    assert not _twins.LOAD_FAILURES, (
        "native modules were expected but did not import (run `pip install -e .` with a C compiler; "
        f"or set HUMMOCK_PURE_PYTHON=1 on purpose): {_twins.LOAD_FAILURES}")
    assert all(_twins.LOADED.values()), _twins.LOADED
    for name in _twins.expected_native_modules():
        importlib.import_module(f"native.{name}")


def test_the_source_distribution_carries_every_native_source():
    """MANIFEST.in must name every kind of file the native build reads (``.pyx``, the ``.pxd``
    other modules cimport, the ``.pxi`` parts a module includes): an sdist without one of them
    does not compile (``.pxi`` parts were missing from it until 2026-11-29)."""
    import fnmatch
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    patterns = []
    with open(os.path.join(root, "MANIFEST.in"), encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if words[:2] == ["recursive-include", "native"]:
                patterns.extend(words[2:])
    sources = [name for name in os.listdir(os.path.join(root, "native"))
               if os.path.splitext(name)[1] in (".pyx", ".pxd", ".pxi")]
    assert {os.path.splitext(name)[1] for name in sources} == {".pyx", ".pxd", ".pxi"}
    missing = [name for name in sources if not any(fnmatch.fnmatch(name, p) for p in patterns)]
    assert not missing, f"MANIFEST.in leaves these native sources out of the sdist: {missing}"
