"""HashAgg over one integer group-key column (stream/executors/hash_agg.py ``_states_of``): the
dirty groups are also found by their key value (``_dirty_values``), and chunks whose key
column has NULLs take the tuple-keyed path; a group touched by both kinds of chunk in one
epoch is one group, the int-keyed map stays a subset of the dirty set (``_check``), a
strict-mode error names the group as a key tuple, and every epoch's output equals a
recomputation from the rows so far (a sum is NULL in a group of NULL values, as a BIGINT and
as a NUMERIC sum, whose result ``_flush`` takes from the state column)."""

from collections import defaultdict

import pytest

from hummock import HummockStorage
from relational.types import DataType as T
from stream.chunk import INSERT, UPDATE_INSERT, StreamChunk
from stream.errors import InconsistentStreamError
from stream.executor import Checked
from stream.executors import AggCall, HashAgg, agg_table_count
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain

S = Schema([("id", T.BIGINT), ("g", T.BIGINT), ("v", T.INT)])
SB = Schema([("id", T.BIGINT), ("g", T.BIGINT), ("v", T.BIGINT)])   # sum(v): NUMERIC
CALLS = [AggCall("count"), AggCall("sum", 2), AggCall("max", 2)]


def _run(epochs_rows, calls=CALLS, schema=S, **kw):
    """Feed ``epochs_rows`` (per epoch, a list of chunks' rows ``(op, (id, g, v))``) through
    a HashAgg on ``g``; returns the executor and its materialized output after each epoch."""
    epochs = Epochs()
    msgs = [epochs.barrier()]
    for chunks in epochs_rows:
        msgs += [StreamChunk.from_rows(schema, rows) for rows in chunks]
        msgs.append(epochs.barrier())
    agg = HashAgg(ListSource(schema, [0], msgs), [1], calls, HummockStorage.open("memory://"),
                  range(10, 10 + agg_table_count(calls, kw.get("append_only", False))), **kw)
    mv, views = {}, []
    for m in drain(Checked(agg))[1:]:
        if isinstance(m, StreamChunk):
            for op, row in m.rows():
                if op in (INSERT, UPDATE_INSERT):
                    mv[row[0]] = row[1:]
                else:
                    assert mv.pop(row[0]) == row[1:]
        else:
            agg._check()
            views.append(dict(mv))
    return agg, views


def _expected(rows):
    groups = defaultdict(list)
    for _, (_, g, v) in rows:
        groups[g].append(v)
    out = {}
    for g, vs in groups.items():
        present = [v for v in vs if v is not None]
        out[g] = (len(vs), sum(present) if present else None, max(present) if present else None)
    return out


@pytest.mark.parametrize("schema", [S, SB])
@pytest.mark.parametrize("append_only", [False, True])
def test_int_keyed_and_null_keyed_chunks_in_one_epoch_update_one_group_each(append_only, schema):
    epochs = [
        [[("+", (1, 5, 10)), ("+", (2, 7, 1))],                      # int keys only
         [("+", (3, None, 4)), ("+", (4, 5, 20)), ("+", (5, 9, 2))],  # a NULL key: tuple path
         [("+", (6, 5, 3)), ("+", (7, 9, None)), ("+", (8, 7, 8))]],
        [[("+", (9, None, 6)), ("+", (10, 11, 1))],                    # tuple path first this epoch
         [("+", (11, 11, 5)), ("+", (12, 5, 1)), ("+", (13, 2 ** 40, 7))]],
        [[("+", (14, 2 ** 40, 9)), ("+", (15, 12, None))]],   # a group of NULL values: sum NULL
        [[("+", (16, 12, None)), ("+", (17, 5, 2 ** 30))]],
    ]
    agg, views = _run(epochs, append_only=append_only, schema=schema)
    seen = []
    for chunks, view in zip(epochs, views):
        seen += [r for rows in chunks for r in rows]
        assert view == _expected(seen)
    assert not agg._dirty_values and not agg._dirty   # both emptied by the barrier's flush


def test_a_retraction_through_the_int_keyed_path_and_its_strict_error():
    epochs = [[[("+", (1, 5, 10)), ("+", (2, 5, 30)), ("+", (3, 6, 1))]],
              [[("-", (2, 5, 30))], [("+", (4, None, 2)), ("-", (3, 6, 1))]]]
    _, views = _run(epochs)
    assert views == [{5: (2, 40, 30), 6: (1, 1, 1)}, {5: (1, 10, 10), None: (1, 2, 2)}]
    with pytest.raises(InconsistentStreamError, match="group") as info:   # no min/max: int keys
        _run([[[("+", (1, 5, 10))], [("-", (2, 8, 1))]]], calls=CALLS[:2])
    assert info.value.pk == (8,)   # the key tuple, not the int the dirty map is keyed by
