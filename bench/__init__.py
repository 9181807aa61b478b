"""Named benchmarks (STYLE.md rule 11). Run one with ``python -m bench.<name>``; never part of
the test run. Each prints a table of figures and one JSON line, and compares against a peer in
the same run where one exists (the pure-Python twin, rocksdict for KV)."""
