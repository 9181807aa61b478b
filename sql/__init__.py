"""The SQL layer: parse, bind, plan and run SQL over the streaming engine (DESIGN.md section 9).

Top of the layering (sql -> stream -> relational -> hummock). So far it holds the ``hummock``
command-line entry point (:mod:`sql.cli`); ``sql.connect()`` arrives with the SQL issue.
"""
