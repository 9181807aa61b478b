"""``python -m cli``: the same as the console script ``hummock`` (:func:`cli.main.main`).

Callers: tests and benchmarks that run the command line as a subprocess of this interpreter.
"""

import sys

from cli.main import main

sys.exit(main())
