"""Timing helpers shared by the benchmarks: warm-up, repeats, medians, and reporting.

Method: each workload runs once untimed (warm-up: caches, lazy imports, schema compilation),
then ``repeats`` timed runs with ``time.perf_counter``; the figure reported is the median rate.

What a figure depends on besides the code (issue 30 item 6): :func:`machine`, which every
bench's JSON line carries under ``"machine"``, holds :func:`conditions` -- the build (native
modules or pure-Python twins, the Cython directives and compile flags setup.py uses, whether
every ``native/*.so`` is present and newer than its sources), the allocator / glibc / BLAS
environment, the python, pyarrow, numpy and Cython versions, and the load: the 1-minute load
average when this module was imported (a bench imports it before it starts) and when the line
is written, the CPUs this process may use, its nice value, the kernel's autogroup setting (with
autogroup on, nice only ranks processes of the same session), the share of CPU time the
hypervisor stole between the two points (``/proc/stat``), and a speed probe (:func:`probe`) at
both points. Under ``"fs"``: the file system the stores' temporary directories live on (type,
whether it journals) and a file-system probe (:func:`fs_probe`) at both points -- on this VM's
journal-less ext4, creating one file costs 20-80 us on a quiet file system and 150-1,000 us
after recent file churn, and every checkpoint creates two (docs/performance.md, "Conditions").
Linux-only items are None elsewhere.

:func:`run_dir` gives each timed run a fresh directory for its store and removes it when the
bench process exits, not when the run ends: deleting one run's store (hundreds of files) while
the next runs are measured would charge them for the harness's own cleanup on such a file
system (the same reason).

Callers: every ``bench/*.py`` (``report`` / ``machine`` / ``median_rate``), bench.report.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import glob
import json
import os
import platform
import re
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time

from hummock.object_store import LocalObjectStore

#: environment variables a figure depends on (allocators, glibc, BLAS threads, the twins switch)
ENV_PREFIXES = ("MIMALLOC", "MALLOC", "GLIBC_TUNABLES", "PYTHONMALLOC", "OPENBLAS", "OMP_NUM_THREADS",
                "LD_PRELOAD", "HUMMOCK_")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_1m():
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _cpu_times():
    """(total, steal) jiffies of every CPU from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(fields[:8]), (fields[7] if len(fields) > 7 else 0)


def probe() -> dict:
    """A fixed pure-Python loop (100,000 iterations), timed 7 times: ``min_ns`` per iteration is
    the host's speed as this process sees it at its best (it moves with the host period, which
    moves the same code's figures on this VM by ~20 % between hours), ``median_ns`` / ``min_ns``
    well above 1 says the CPU was contended while it ran. ~30 ms."""
    walls = []
    for _ in range(7):
        start = time.perf_counter()
        x = 0
        for i in range(100_000):
            x += (i * i) & 7
        walls.append((time.perf_counter() - start) * 1e4)   # ns per iteration
    return {"min_ns": round(min(walls), 2), "median_ns": round(statistics.median(walls), 2)}


_run_dirs: list[str] = []   # run_dir's directories, removed at exit


@contextlib.contextmanager
def run_dir(prefix: str):
    """A fresh temporary directory for one timed run (its store, its input files), removed when
    this process exits rather than when the ``with`` block ends. On a journal-less ext4 every
    file create scans past the inodes its block group freed in the last 60 s (300 s more while
    their inode-table block is unwritten; ``recently_deleted`` in fs/ext4/ialloc.c): measured
    in one ``bench.peers`` run that removed each store after its run, a store's file create
    went from 129 to 423 us (median) over 12 runs -- 0.9 ms of a 6.5 ms checkpointed batch by
    the last. So the runs of one bench leave their directories to the exit (a 1M-row
    ``bench.peers`` run keeps a few GB until then)."""
    path = tempfile.mkdtemp(prefix=prefix)
    if not _run_dirs:
        atexit.register(_remove_run_dirs)
    _run_dirs.append(path)
    yield path


def _remove_run_dirs() -> None:
    while _run_dirs:
        shutil.rmtree(_run_dirs.pop(), ignore_errors=True)


def fs_probe(directory: str | None = None, files: int = 24, durable: int = 6) -> dict:
    """File creation as a store meets it, in a fresh directory under ``directory`` (default: the
    temporary directory the benches' stores use): ``create_us`` the median CPU microseconds of
    creating one file (``O_CREAT | O_EXCL``, 1 KiB written, closed) over ``files`` files, and
    ``durable_ms`` the median wall milliseconds of one ``LocalObjectStore.upload`` (temporary
    file written and fsynced, renamed, directory fsynced) over ``durable`` ones. On a
    journal-less ext4 the kernel skips every recently freed inode of the directory's block
    group on each create (``recently_deleted``), so ``create_us`` moves 10x with the file
    churn of the last 60-360 s (:func:`run_dir`). The probe's files are removed again. ~10-80 ms. Both are
    None when the directory cannot be written."""
    try:
        root = tempfile.mkdtemp(prefix="hummock-fs-probe-", dir=directory)
    except OSError:
        return {"create_us": None, "durable_ms": None}
    data = b"\0" * 1024
    creates, durables = [], []
    try:
        for i in range(files):
            start = time.thread_time()
            fd = os.open(os.path.join(root, f"f{i}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            creates.append((time.thread_time() - start) * 1e6)
        store = LocalObjectStore(os.path.join(root, "store"))
        try:
            store.upload("d/warm-up", data)   # its directories made (and fsynced) outside the clock
            for i in range(durable):
                start = time.perf_counter()
                store.upload(f"d/{i}", data)
                durables.append((time.perf_counter() - start) * 1e3)
        finally:
            store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"create_us": round(statistics.median(creates), 1), "durable_ms": round(statistics.median(durables), 3)}


def fs_info(directory: str | None = None, *, mounts: str = "/proc/mounts", jbd2: str = "/proc/fs/jbd2") -> dict:
    """The file system holding ``directory`` (default: the temporary directory): its mount point,
    type, device, and whether it journals (ext3/ext4: a ``jbd2`` entry ``<device>-<n>`` for the
    device; None when unknown)."""
    path = os.path.realpath(directory or tempfile.gettempdir())
    best = None
    try:
        with open(mounts) as f:
            for line in f:
                device, mount, fstype = line.split()[:3]
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and (best is None or len(mount) > len(best[1])):
                    best = (device, mount, fstype)
    except OSError:
        return {"mount": None, "type": None, "device": None, "journal": None}
    if best is None:
        return {"mount": None, "type": None, "device": None, "journal": None}
    device, mount, fstype = best
    journal = None
    if fstype in ("ext3", "ext4"):
        base = os.path.basename(device)
        try:
            journal = any(name.startswith(base + "-") for name in os.listdir(jbd2))
        except FileNotFoundError:
            journal = False   # no journaled ext file system is mounted at all
        except OSError:
            journal = None
    return {"mount": mount, "type": fstype, "device": device, "journal": journal}


_PROBE_AT_IMPORT = probe()
_FS_PROBE_AT_IMPORT = fs_probe()
_LOAD_AT_IMPORT = _load_1m()
_CPU_AT_IMPORT = _cpu_times()
_TIME_AT_IMPORT = time.time()


def median_rate(fn, items: int, repeats: int = 5) -> float:
    """Items per second of ``fn()`` (which processes ``items`` items), median of ``repeats``."""
    fn()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - start)
    return items / statistics.median(timings)


#: ``--compactor`` choices of the benchmarks (``compactor_options``)
COMPACTORS = ("default", "local", "workers", "none")


def compactor_options(name: str) -> dict:
    """``StorageOptions`` keywords for a bench's ``--compactor``: ``default`` the store's
    defaults (merges in a worker process on 2+ cores), ``local`` merges in the background
    thread (``compaction_workers=0``), ``workers`` one worker process, ``none`` no compaction."""
    if name not in COMPACTORS:
        raise ValueError(f"--compactor must be one of {COMPACTORS}, got {name!r}")
    return {"default": {}, "local": {"compactor": "local", "compaction_workers": 0},
            "workers": {"compactor": "local", "compaction_workers": 1}, "none": {"compactor": "none"}}[name]


def machine() -> dict:
    """The host, and under ``"conditions"`` what the figures depend on (:func:`conditions`)."""
    return {"python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor() or "unknown", "conditions": conditions()}


def conditions() -> dict:
    """Build mode, environment, versions, load and file system of this run (module docstring)."""
    return {"build": build_info(), "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
            "versions": _versions(), "load": load_info(),
            "fs": {**fs_info(), "probe_before": _FS_PROBE_AT_IMPORT, "probe_after": fs_probe()}}


def load_info() -> dict:
    """The 1-minute load average at import and now, CPUs, nice, autogroup, CPU steal since import."""
    now = _cpu_times()
    steal = None
    if now is not None and _CPU_AT_IMPORT is not None and now[0] > _CPU_AT_IMPORT[0]:
        steal = round((now[1] - _CPU_AT_IMPORT[1]) / (now[0] - _CPU_AT_IMPORT[0]), 4)
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return {"load_avg_1m_before": _LOAD_AT_IMPORT, "load_avg_1m_after": _load_1m(), "nproc": os.cpu_count(),
            "cpus_usable": usable, "nice": os.nice(0) if hasattr(os, "nice") else None,
            "sched_autogroup_enabled": _read_int("/proc/sys/kernel/sched_autogroup_enabled"),
            "steal_fraction": steal, "seconds": round(time.time() - _TIME_AT_IMPORT, 1),
            "probe_before": _PROBE_AT_IMPORT, "probe_after": probe()}


_INCLUDE = re.compile(r'^include\s+"([^"]+)"', re.MULTILINE)


def _source_mtime(pyx: str) -> float:
    """The newest modification time of a ``.pyx`` and the ``.pxi`` files it includes (one
    level: an included file is part of the same extension module), so a module rebuilt before
    one of its parts changed counts as stale."""
    newest = os.path.getmtime(pyx)
    with open(pyx, encoding="utf-8") as f:
        for part in _INCLUDE.findall(f.read()):
            path = os.path.join(os.path.dirname(pyx), part)
            if os.path.exists(path):
                newest = max(newest, os.path.getmtime(path))
    return newest


def build_info() -> dict:
    """Native modules or twins, setup.py's Cython directives and flags, the .so files' state."""
    try:
        from hummock import _twins
    except ImportError:   # pragma: no cover - the bench runs from the source tree
        _twins = None
    expected = _twins.expected_native_modules() if _twins is not None else []
    present, stale = [], []
    for name in expected:
        so = [p for ext in ("so", "pyd") for p in glob.glob(os.path.join(_ROOT, "native", f"{name}.*.{ext}"))]
        if not so:
            continue
        present.append(name)
        if os.path.getmtime(so[0]) < _source_mtime(os.path.join(_ROOT, "native", f"{name}.pyx")):
            stale.append(name)
    flags = _setup_flags()
    return {"pure_python_forced": _twins.pure_python_forced() if _twins is not None else None,
            "native_loaded": sorted(k for k, v in (_twins.LOADED if _twins else {}).items() if v),
            "twins_used": sorted(k for k, v in (_twins.LOADED if _twins else {}).items() if not v),
            "load_failures": dict(_twins.LOAD_FAILURES) if _twins is not None else {},
            "so_present": f"{len(present)}/{len(expected)}",
            "so_missing": sorted(set(expected) - set(present)), "so_older_than_pyx": stale,
            "cython_directives": flags.get("COMPILER_DIRECTIVES"),
            "extra_compile_args": flags.get("extra_compile_args"),
            "python_cflags": sysconfig.get_config_var("CFLAGS"), "cc": sysconfig.get_config_var("CC")}


def _setup_flags() -> dict:
    """``COMPILER_DIRECTIVES`` and the extensions' ``extra_compile_args`` as setup.py declares them
    (read from its source: importing it would run setup())."""
    out = {}
    try:
        with open(os.path.join(_ROOT, "setup.py")) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError):
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "COMPILER_DIRECTIVES" for t in node.targets):
            try:
                out["COMPILER_DIRECTIVES"] = ast.literal_eval(node.value)
            except ValueError:
                pass
        elif isinstance(node, ast.keyword) and node.arg == "extra_compile_args":
            try:
                out["extra_compile_args"] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def _versions() -> dict:
    from importlib import metadata
    out = {"python": platform.python_version(), "implementation": platform.python_implementation()}
    for dist in ("pyarrow", "numpy", "cython", "sqlglot"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _read_int(path: str):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def report(name: str, rows: list[dict], columns: list[str]) -> None:
    """Print ``rows`` as an aligned table, then one JSON line ``{"bench": name, ...}``."""
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))
    print(json.dumps({"bench": name, "machine": machine(), "results": rows}, sort_keys=True))
    sys.stdout.flush()


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    return "" if value is None else str(value)
