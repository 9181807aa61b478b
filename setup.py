"""Build script: compiles every ``native/*.pyx`` into an extension module ``native.<name>``.

Metadata lives in pyproject.toml; this file only declares the Cython extensions.
Each extension is *optional*: if a compiler is missing the install still succeeds and the
owning packages fall back to their pure-Python twins (DESIGN.md section 2). The test
``tests/test_native_build.py`` fails loudly in that case unless ``HUMMOCK_PURE_PYTHON=1``,
so a broken build can never pass CI silently.

Install editable (``pip install -e .``) so the compiled modules sit beside their sources:
the flat source tree would otherwise shadow an installed wheel.
"""

import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

COMPILER_DIRECTIVES = {
    "language_level": "3",
    # Safety first: indexing stays bounds-checked unless a function opts out after its
    # author checked every index by hand (see the comment on each such function).
    "boundscheck": True,
    "wraparound": False,
    "cdivision": True,
    "embedsignature": True,
}


def native_extensions():
    extensions = []
    for path in sorted(glob.glob(os.path.join("native", "*.pyx"))):
        name = os.path.splitext(os.path.basename(path))[0]
        extensions.append(
            Extension(
                f"native.{name}",
                [path],
                include_dirs=[numpy.get_include()],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                extra_compile_args=["-O3"],
                optional=True,
            )
        )
    return cythonize(extensions, compiler_directives=COMPILER_DIRECTIVES, quiet=True)


setup(ext_modules=native_extensions())
