"""Cython modules for the hot paths. Never imported directly by users.

Each ``native/<name>.pyx`` has a pure-Python twin in the package that owns the algorithm and is
chosen by :func:`hummock._twins.load`. Rules for every module here (DESIGN.md section 2):

- same public names, signatures and exceptions as its twin, and byte-identical output;
- never trust input: every length, offset and count read from a buffer is checked against the
  buffer's end before use, and a malformed buffer raises the owner's error class;
- no global mutable state beyond caches that are safe to share between threads under the GIL.

Built by setup.py (``pip install -e .`` puts the compiled modules beside these sources).
"""
