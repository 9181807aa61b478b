# cython: language_level=3, boundscheck=True, wraparound=False
"""Native chunk merge of the MemTable; twin of ``relational/_rel_memapply_py.py`` (the reference:
same name, results and exceptions; see its docstring for the contract and the record format).

The same loop as the twin with typed locals: dictionary reads through the C API, records built
with ``PyTuple_Pack``-style tuple literals, no per-operation Python calls unless an operation
is refused (``error`` is called once, then its exception raised).

Safety: the three lists' lengths are checked before the loop, every key and value is checked to
be ``bytes`` before its length is read, and every record read from the dictionaries is checked
to be a 3-tuple before it is unpacked.

Garbage collector: the records it builds hold only an int, bytes and None, which cannot form a
reference cycle, so they are untracked at once (what the collector itself does to such tuples
at its next pass); a MemTable whose records are all untracked stays an untracked dict, which
the collector never traverses (an epoch's MemTable holds tens of thousands of records).

Callers: :meth:`relational.mem_table.MemTable.apply` and ``insert_many`` only, through
``hummock._twins.load``.
"""

cimport cython
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)


cdef inline tuple _record(object op, object old, object new):
    """An ``(op, old, new)`` record, untracked when it holds only an int, bytes and None (module
    docstring, "Garbage collector")."""
    cdef tuple t = (op, old, new)
    if (type(op) is int and (old is None or type(old) is bytes) and (new is None or type(new) is bytes)):
        PyObject_GC_UnTrack(<void*>t)
    return t

INSERT, DELETE, UPDATE = 1, 2, 3
cdef object _INSERT = 1, _DELETE = 2, _UPDATE = 3


cdef inline tuple _check_record(object rec):
    if type(rec) is not tuple or len(<tuple>rec) != 3:
        raise ValueError(f"a MemTable record is an (op, old, new) tuple, got {rec!r:.80}")
    return <tuple>rec


def merge_ops(records, inserts, keys, values, stored, consistent, error):
    """See the twin's docstring."""
    if type(records) is not dict or not (stored is None or type(stored) is dict):
        raise TypeError(f"records and stored are dicts, got {type(records).__name__} and {type(stored).__name__}")
    return _merge(<dict>records, list(inserts), list(keys), list(values), {} if stored is None else <dict>stored,
                  bool(consistent), error)


cdef tuple _merge(dict records, list ins, list ks, list vs, dict st, bint consistent, error):
    cdef Py_ssize_t n = len(ks), i, added = 0
    cdef dict overlay = {}
    cdef PyObject* p
    cdef object key, value, rec, found, op, old, cur
    cdef tuple t
    cdef bint is_insert
    if len(ins) != n or len(vs) != n:
        raise ValueError(f"inserts, keys and values differ in length: {len(ins)}, {n}, {len(vs)}")
    for i in range(n):
        key = ks[i]
        value = vs[i]
        if type(key) is not bytes or type(value) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(key).__name__} and {type(value).__name__}")
        is_insert = bool(ins[i])
        p = PyDict_GetItem(overlay, key)
        if p == NULL:
            p = PyDict_GetItem(records, key)
        rec = None if p == NULL else <object>p
        if rec is None:
            if consistent:
                p = PyDict_GetItem(st, key)
                found = None if p == NULL else <object>p
                if is_insert:
                    if found is not None:
                        raise error("insert of a pk that already has a row", key)
                elif found is None:
                    raise error("delete of a pk that has no row", key)
                elif found != value:
                    raise error("delete whose old row is not the stored row", key)
            if is_insert:
                overlay[key] = _record(_INSERT, None, value)
            else:
                overlay[key] = _record(_DELETE, value, None)
            added += PyBytes_GET_SIZE(key) + PyBytes_GET_SIZE(value) + 64
            continue
        t = _check_record(rec)
        op, old, cur = t[0], t[1], t[2]
        if is_insert:
            if op == _DELETE:
                overlay[key] = _record(_UPDATE, old, value)
            elif consistent:
                raise error("insert of a pk that already has a row", key)
            else:
                overlay[key] = _record(op, old, value)
        elif op == _DELETE:
            if consistent:
                raise error("delete of a pk that has no row", key)
            overlay[key] = rec
        elif consistent and cur != value:
            raise error("delete whose old row is not the current row", key)
        elif op == _INSERT:
            overlay[key] = None if consistent else _record(_DELETE, cur, None)
        else:
            overlay[key] = _record(_DELETE, old, None)
    gone = [k for k, r in overlay.items() if r is None]
    for k in gone:
        del overlay[k]
    return overlay, gone, added


def insert_new(records, keys, values):
    """See the twin's docstring: ``records[k] = (INSERT, None, v)`` for each pair, untracked."""
    if type(records) is not dict:
        raise TypeError(f"records is a dict, got {type(records).__name__}")
    cdef list ks = list(keys), vs = list(values)
    cdef Py_ssize_t n = len(ks), i
    cdef dict d = <dict>records
    if len(vs) != n:
        raise ValueError(f"keys and values differ in length: {n}, {len(vs)}")
    for i in range(n):
        if type(ks[i]) is not bytes or type(vs[i]) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(ks[i]).__name__} and {type(vs[i]).__name__}")
    for i in range(n):
        d[ks[i]] = _record(_INSERT, None, vs[i])
