"""The streaming layer: Arrow-backed change streams, barriers, executors, checkpoints
(DESIGN.md section 8). Built on ``relational``; used by ``sql``. Not yet implemented: the
stream issue fills this package.
"""
