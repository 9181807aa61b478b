"""The graph the stream oracle and kill tests run (tests/test_stream_oracle.py,
tests/test_stream_kill.py, tests/stream_kill_writer.py): two base tables and three MVs.

- ``mv_copy``  = Dml -> Materialize(t1) -> Materialize (a copy of t1);
- ``mv_pf``    = t1 -> hash exchange (2 actors, by id) -> Project(id, a*2+1, upper(b)) ->
                 Filter(a2 > 10 OR b IS NULL) -> Materialize (each actor owns half the vnodes);
- ``mv_union`` = Union(Project(0 AS tag, t1.*), Project(1 AS tag, t2.*)) -> Materialize(tag, id).

``expected(model)`` computes every table in plain Python from the two base tables (dicts id ->
row); ``read_all(store, epoch)`` reads every table at a committed epoch; ``changes(model, items)``
turns random ``(id, (a, b))`` items into consistent changes, updating the model.
"""

from hummock import StorageOptions
from relational import StateTable, StorageTable
from relational.types import DataType as T
from stream.executor import Checked
from stream.executors import Dml, Filter, Materialize, Project, Union
from stream.expr import Arith, Cmp, Col, Func, IsNull, Lit, Or
from stream.runtime import StreamRuntime
from stream.runtime.dispatch import vnode_bitmaps
from stream.schema import Schema

BASE = Schema([("id", T.BIGINT), ("a", T.INT), ("b", T.VARCHAR)])
PF = Schema([("id", T.BIGINT), ("a2", T.INT), ("ub", T.VARCHAR)])
UNION = Schema([("tag", T.INT), ("id", T.BIGINT), ("a", T.INT), ("b", T.VARCHAR)])
T1, T2, MV_COPY, MV_PF, MV_UNION = 1, 2, 3, 4, 5
LAYOUT = {T1: (BASE, [0]), T2: (BASE, [0]), MV_COPY: (BASE, [0]), MV_PF: (PF, [0]), MV_UNION: (UNION, [0, 1])}
OPTIONS = StorageOptions(shared_buffer_capacity=256 * 1024, block_size=1024, target_sst_size=16 * 1024,
                         compactor="none")


def build(store, **kw) -> tuple:
    """The graph of the module docstring on ``store``; returns (runtime, source of t1, of t2)."""
    rt = StreamRuntime(store, channel_capacity=4, **kw)

    def state(table_id, vnodes=None):
        schema, pk = LAYOUT[table_id]
        return StateTable(store, table_id, schema.pairs(), pk, dist_key_indices=pk[-1:], vnodes=vnodes)

    s1, s2 = rt.source("t1", BASE, [0]), rt.source("t2", BASE, [0])
    a1 = rt.actor(Checked(Materialize(Dml(s1.executor, BASE, [0]), state(T1), identity="Materialize(t1)")))
    a2 = rt.actor(Checked(Materialize(Dml(s2.executor, BASE, [0]), state(T2), identity="Materialize(t2)")))
    [copy_in] = rt.exchange([a1], 1, "simple")
    rt.actor(Materialize(Checked(copy_in), state(MV_COPY)))
    for head, vnodes in zip(rt.exchange([a1], 2, "hash", key=[0]), vnode_bitmaps(2)):
        p = Project(head, [Col(0, T.BIGINT), Arith("+", Arith("*", Col(1, T.INT), Lit(2, T.INT)), Lit(1, T.INT)),
                           Func("upper", Col(2, T.VARCHAR))], names=list(PF.names))
        f = Filter(Checked(p), Or(Cmp(">", Col(1, T.INT), Lit(10, T.INT)), IsNull(Col(2, T.VARCHAR))))
        rt.actor(Materialize(Checked(f), state(MV_PF, vnodes)))
    tagged = []
    for tag, up in ((0, a1), (1, a2)):
        [head] = rt.exchange([up], 1, "simple")
        tagged.append(Project(head, [Lit(tag, T.INT), Col(0, T.BIGINT), Col(1, T.INT), Col(2, T.VARCHAR)],
                              names=list(UNION.names), stream_key=[0, 1]))
    rt.actor(Materialize(Checked(Union(tagged, stream_key=[0, 1])), state(MV_UNION)))
    return rt, s1, s2


def expected(model) -> dict:
    """Every table's contents computed in plain Python from the base-table models."""
    t1, t2 = model
    pf = []
    for i, a, b in t1.values():
        a2 = None if a is None else a * 2 + 1
        if (a2 is not None and a2 > 10) or b is None:
            pf.append((i, a2, None if b is None else b.upper()))
    union = [(0, *r) for r in t1.values()] + [(1, *r) for r in t2.values()]
    return {T1: sorted(t1.values()), T2: sorted(t2.values()), MV_COPY: sorted(t1.values()), MV_PF: sorted(pf),
            MV_UNION: sorted(union)}


def read_all(store, epoch) -> dict:
    out = {}
    for table_id, (schema, pk) in LAYOUT.items():
        reader = StorageTable(store, table_id, schema.pairs(), pk, dist_key_indices=pk[-1:])
        out[table_id] = sorted(tuple(r.values()) for b in reader.batch_iter(epoch) for r in b.to_pylist())
    return out


def bases_of(tables: dict) -> tuple:
    """The base-table models (dicts id -> row) of tables read with ``read_all``."""
    return ({r[0]: r for r in tables[T1]}, {r[0]: r for r in tables[T2]})


def changes(model: dict, items) -> list:
    """Turn ``(id, values)`` items into consistent changes on ``model`` (updated in place): a new id
    is inserted, an existing one updated (values differ) or deleted (values None-None)."""
    out = []
    for i, (a, b) in items:
        old = model.get(i)
        new = (i, a, b)
        if old is None:
            out.append(("+", new))
            model[i] = new
        elif a is None and b is None:
            out.append(("-", old))
            del model[i]
        else:
            out += [("U-", old), ("U+", new)]
            model[i] = new
    return out
