"""How deeply a stored JSON payload nests, found before ``json.loads`` recurses into it.

Job: let the decoders of JSON records (manifest checkpoints and deltas in ``hummock/version_codec.py``,
catalog records in ``relational/catalog.py``) refuse a payload nested deeper than their format
can be, so a checksummed but hostile payload raises ``CorruptionError`` instead of
``RecursionError`` (or using the interpreter's stack depth as its limit).

Guarantee: :func:`json_depth_bound` never recurses, costs a few C-speed passes over the payload
plus one pass over its brackets per level (stopping past ``limit``), and returns an upper bound
of the nesting ``json.loads`` can reach in it, exact for valid JSON. Callers: the two decoders
above (and ``TableDesc.to_bytes``, which refuses to write what its decoder would refuse).
"""

from __future__ import annotations

import re

#: Deepest nesting a stored JSON record may have. Manifest payloads nest 6 levels, catalog
#: records 4 plus 3 per level of STRUCT nesting (1 per LIST): far below this.
MAX_JSON_DEPTH = 64

_ESCAPE = re.compile(rb"\\.", re.DOTALL)     # inside strings; a stray one is invalid JSON anyway
_STRING = re.compile(rb'"[^"]*"')            # escapes removed first, so no backtracking
_LEAF = re.compile(rb"\[\]|\{\}")            # innermost pairs: one level per substitution
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth_bound(payload: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """An upper bound of how deeply ``payload`` nests (``[``/``{`` outside strings), exact for
    valid JSON; once it exceeds ``limit`` counting stops and the result is some value > limit."""
    skeleton = _STRING.sub(b"", _ESCAPE.sub(b"", payload)).translate(None, _NOT_BRACKET)
    levels = 0
    while skeleton and levels <= limit:
        # removing every innermost pair lowers the deepest point by exactly one level
        shorter = _LEAF.sub(b"", skeleton)
        if len(shorter) == len(skeleton):   # unbalanced: each bracket left may add a level
            break
        skeleton = shorter
        levels += 1
    return levels + len(skeleton)
