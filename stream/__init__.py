"""The streaming layer: Arrow-backed change streams, barriers, executors, checkpoints
(DESIGN.md section 8; docs/streaming.md).

Modules: :mod:`stream.chunk` (``StreamChunk``, ops, builder), :mod:`stream.message`
(``Barrier``, mutations, ``Watermark``), :mod:`stream.schema`, :mod:`stream.expr` (expressions
on Arrow columns), :mod:`stream.executor` (the executor interface), :mod:`stream.align`
(barrier alignment), :mod:`stream.row_id`, :mod:`stream.executors` (one module per operator),
:mod:`stream.runtime` (actors, channels, dispatchers, the barrier loop, ``StreamRuntime``).
Built on ``relational`` and ``hummock``; used by ``sql``; never imports ``sql``.
"""
