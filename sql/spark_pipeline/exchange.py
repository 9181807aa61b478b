"""Exchange files: the Spark pipeline's large records travel through the object store, not the JVM.

A stage's records (``("b", partition, edge, payload)``, each payload an LZ4 Arrow IPC change
chunk of up to ``BLOB_ROWS`` rows, several MB) would otherwise cross into Spark's JVM, be written
and read by its shuffle, and cross back into the consumer's Python worker: measured at 1M Nexmark
bids (105 MB of payloads) that costs more than running the executors. So a producer (the
driver routing SQL writes, a stage-0 route task, a stage task) writes every payload of at least
``inline_bytes`` to the store's object store as a *scratch* object (``upload_scratch``: not
fsynced) and sends ``("r", partition, edge, path)`` instead; Spark still routes the records
(``repartition(N, key)``) and its shuffle moves only the paths. The consumer task reads the
object back (:func:`fetch`). The store is the one every task already reads SSTs from (a shared
directory or S3), so this works on a cluster as it does locally.

Layout: ``pipeline-exchange/<epoch>/<producer>-<random>-<n>``; a producer's random part is new
for every run of it, so a retried or speculative task never overwrites the objects another
attempt's records name (Spark keeps one attempt's output; the rest are garbage).

Lifetime: the driver deletes the batch's objects when the batch ends, committed or not
(:func:`clear`), and every leftover (a driver that crashed mid-batch) when a runtime starts (it
holds the store's one writer, so no other pipeline is using them). Vacuum never sees them: it
lists ``sst/`` only.

Callers: :mod:`sql.spark_pipeline.driver` and :mod:`sql.spark_pipeline.task`.
"""

from __future__ import annotations

import uuid

from hummock.object_store.base import ObjectNotFoundError

from sql.errors import ExecutionError

PREFIX = "pipeline-exchange/"
INLINE_BYTES = 256 * 1024   # payloads below it stay in the record (Spark's shuffle moves them)


class ExchangeLostError(ExecutionError):
    """An exchange object a record names is gone (deleted under a running batch)."""


def spill(records, object_store, epoch: int, producer: str, inline_bytes: int | None):
    """``records`` with every blob payload of at least ``inline_bytes`` written to the object
    store and replaced by its path (kind ``"r"``); ``inline_bytes`` None keeps all inline."""
    tag = uuid.uuid4().hex[:16]
    for n, record in enumerate(records):
        if record[0] == "b" and inline_bytes is not None and len(record[3]) >= inline_bytes:
            path = f"{PREFIX}{epoch}/{producer}-{tag}-{n}"
            object_store.upload_scratch(path, record[3])
            yield "r", record[1], record[2], path.encode()
        else:
            yield record


def fetch(object_store, path: bytes) -> bytes:
    """The payload a ``"r"`` record names."""
    name = path.decode()
    if not name.startswith(PREFIX):
        raise ExchangeLostError(f"exchange record names {name!r}, outside {PREFIX!r}")
    try:
        return object_store.read(name)
    except ObjectNotFoundError:
        raise ExchangeLostError(f"exchange object {name!r} is gone: the batch that wrote it was "
                                f"ended (or its files cleared) while a task still read it") from None


def clear(object_store, epoch: int | None = None) -> int:
    """Delete the exchange objects of batch ``epoch`` (None: of every batch); how many."""
    prefix = PREFIX if epoch is None else f"{PREFIX}{epoch}/"
    paths = [meta.path for meta in object_store.list(prefix)]
    if paths:
        object_store.delete(paths)
    return len(paths)
