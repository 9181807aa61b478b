"""One producer's changes netted per stream key (sql/spark_pipeline/task.py ``net_changes``), the
step that makes an exchange exact when rows move between partitions: the vectorized path
(Arrow's hash group-by) against a model of the changes, for key types it takes and for ones it
leaves to the row path (floats, intervals), NULL keys and empty keys included. No Spark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from relational.types import DataType, TypeKind
from sql.spark_pipeline.task import net_changes
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.schema import Schema

KEY_TYPES = {
    TypeKind.BIGINT: (pa.int64(), st.integers(-3, 3)),
    TypeKind.VARCHAR: (pa.string(), st.sampled_from(["a", "b", "", "\u00e9"])),
    TypeKind.DOUBLE: (pa.float64(), st.sampled_from([0.0, -0.0, 1.5, float("inf")])),
    TypeKind.TIMESTAMP: (pa.timestamp("us"), st.integers(0, 3)),
}
OPS = st.sampled_from([INSERT, DELETE, UPDATE_DELETE, UPDATE_INSERT])


def _model(rows, ops, key):
    """Per key (Python equality): its first change if a delete, its last if an insert."""
    first, last = {}, {}
    for i, row in enumerate(rows):
        k = tuple(row[j] for j in key)
        first.setdefault(k, i)
        last[k] = i
    gone = sorted(i for i in first.values() if ops[i] in (DELETE, UPDATE_DELETE))
    came = sorted(i for i in last.values() if ops[i] in (INSERT, UPDATE_INSERT))
    return gone, came


@given(st.data())
def test_net_changes_equals_the_model(data):
    kinds = data.draw(st.lists(st.sampled_from(sorted(KEY_TYPES)), min_size=1, max_size=3))
    n = data.draw(st.integers(1, 30))
    rows = [tuple(data.draw(st.one_of(st.none(), KEY_TYPES[k][1])) for k in kinds) + (i,) for i in range(n)]
    ops = np.array(data.draw(st.lists(OPS, min_size=n, max_size=n)), np.int8)
    key = data.draw(st.lists(st.integers(0, len(kinds) - 1), min_size=0, max_size=len(kinds), unique=True))
    types = [DataType(k) for k in kinds] + [DataType(TypeKind.BIGINT)]
    arrow = [pa.array([r[j] for r in rows], KEY_TYPES[k][0]) for j, k in enumerate(kinds)]
    arrow.append(pa.array([r[-1] for r in rows], pa.int64()))
    split = data.draw(st.integers(0, n))
    schema = Schema(types)
    chunks = [StreamChunk(ops[:split], [c.slice(0, split) for c in arrow], schema),
              StreamChunk(ops[split:], [c.slice(split) for c in arrow], schema)]
    chunks = [c for c in chunks if len(c.ops)] or chunks[:1]
    deletes, inserts = net_changes(chunks, key)
    gone, came = _model(rows, ops, key)
    got_gone = deletes[0].columns[-1].to_pylist() if deletes else []
    got_came = inserts[0].columns[-1].to_pylist() if inserts else []
    assert got_gone == gone and got_came == came
    assert all((c.ops == DELETE).all() for c in deletes) and all((c.ops == INSERT).all() for c in inserts)
