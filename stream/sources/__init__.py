"""Connector sources: rows a table or source relation gets from a generator rather than from DML.

``nexmark.py`` (the deterministic Nexmark event generator) and ``nexmark_schema.py`` (its three
tables); ``connector.py`` (the ``datagen`` and ``nexmark`` connectors: option parsing, the rows of
any offset range, and the :class:`~stream.sources.connector.ConnectorSource` executor that emits
the next batch at each barrier and stores its offset in a state table); ``files.py`` (the
``posix_fs`` connector: a directory of CSV/Parquet/JSON files, each read once). Callers: :mod:`sql.build`,
:mod:`sql.source`, ``bench/nexmark``.
"""
