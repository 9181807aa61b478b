"""Pickling what a plan holds, so a fragment's plan travels to Spark's Python workers.

Plans (:mod:`sql.plan.nodes`) are plain Python objects except for one value type: pyarrow's
``MonthDayNano`` (interval literals), a tuple subclass whose class pickle cannot find by name.
Importing this module registers a reducer for it (``copyreg``) that rebuilds it through
:func:`month_day_nano`, a function pickle can name. Callers: :mod:`sql.spark_pipeline.driver`.
"""

from __future__ import annotations

import copyreg

import pyarrow as pa

_MONTH_DAY_NANO = type(pa.MonthDayNano([0, 0, 0]))


def month_day_nano(months: int, days: int, nanoseconds: int):
    """A ``pyarrow.MonthDayNano`` (what the reducer below calls when unpickling)."""
    return pa.MonthDayNano([months, days, nanoseconds])


def _reduce(value):
    return month_day_nano, tuple(value)


copyreg.pickle(_MONTH_DAY_NANO, _reduce)
