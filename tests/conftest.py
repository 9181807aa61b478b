"""Test-session setup shared by every test: hypothesis profiles and the native/pure banner.

Profiles (pick with ``HYPOTHESIS_PROFILE``; ``CI=true`` selects ``ci`` by default):
- ``dev``: the default, 100 examples per property.
- ``ci``: bounded and deterministic, so CI stays well under its time budget.
- ``thorough``: 2,000 examples, for a long local run before touching a format.
"""

import os

from hypothesis import HealthCheck, settings

from hummock import _twins

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))


def pytest_report_header(config):
    mode = "pure-Python twins (HUMMOCK_PURE_PYTHON=1)" if _twins.pure_python_forced() else "native (Cython)"
    return [f"hummock mode: {mode}; hypothesis profile: {settings._current_profile}"]
