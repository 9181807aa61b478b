"""docs/format.md against the code: every layout and constant the document gives a byte count
(or a value) for is parsed out of the text and compared with the constant the code uses.

The document is the one written source of truth of the formats (STYLE.md rule 2); this test
keeps it from drifting (it once gave the SST footer as 36 bytes while the code wrote 32).
"""

from __future__ import annotations

import ast
import operator
import pathlib
import re
import struct

import pytest

from hummock import key as key_module
from hummock import version_codec as version_codec_module
from hummock.errors import CorruptionError
from hummock.sstable import block as block_module
from hummock.sstable import filter as filter_module
from hummock.sstable import meta as meta_module
from relational import _value_encoding_py as value_module
from relational import catalog as catalog_module
from relational import memcomparable
from relational.types import DataType as T

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
FORMAT = (DOCS / "format.md").read_text(encoding="utf-8")
RELATIONAL = (DOCS / "relational.md").read_text(encoding="utf-8")
FLAT = " ".join(FORMAT.split())   # prose with its line breaks undone
WIDTHS = {"u8": "B", "u16le": "H", "u32le": "I", "u64le": "Q", "8 bytes": "8s"}


def section(title_start: str) -> str:
    """The text of the section (## or ###) whose heading starts with ``title_start``."""
    match = re.search(rf"^(#+) {re.escape(title_start)}.*?$", FORMAT, re.MULTILINE)
    assert match, f"no section {title_start!r} in docs/format.md"
    level = len(match.group(1))
    rest = FORMAT[match.end():]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[:end.start()] if end else rest


def code_block(text: str, first_word: str) -> str:
    """The fenced block in ``text`` that has a line starting with ``first_word``."""
    for block in re.findall(r"```\n(.*?)```", text, re.DOTALL):
        if re.search(rf"^\s*{re.escape(first_word)}\b", block, re.MULTILINE):
            return block
    raise AssertionError(f"no code block with {first_word!r}")


def layout(fields: list[tuple[str, str]]) -> str:
    return "<" + "".join(WIDTHS[kind] for _, kind in fields)


def number(text: str) -> int:
    """A documented integer: ``1_617_235_200_000``, ``0xFFFF``, ``2**32 - 1``, ``2^30``, ``147,455``."""
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Pow: operator.pow, ast.LShift: operator.lshift}

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"not a documented number: {text!r}")
    return ev(ast.parse(text.replace("^", "**").replace(",", "_"), mode="eval").body)


# --- struct layouts given with a byte count -----------------------------------------------------

CODE_STRUCTS = {"block trailer": block_module.BLOCK_TRAILER, "footer": meta_module.FOOTER,
                "ENVELOPE": version_codec_module.ENVELOPE}


def test_every_struct_with_a_byte_count_matches_the_code():
    found = re.findall(r"(block trailer|footer|`ENVELOPE`)[^`]*`(<[0-9A-Za-z]+)`\s*\((\d+) bytes\)", FORMAT)
    assert {name.strip("`") for name, _, _ in found} == set(CODE_STRUCTS)
    for name, fmt, size in found:
        code = CODE_STRUCTS[name.strip("`")]
        assert (fmt, int(size)) == (code.format, code.size), name
        assert struct.calcsize(fmt) == int(size), name


def test_sst_footer_is_the_size_the_code_writes():
    text = section("4. SSTs")
    sizes = [int(n) for n in re.findall(r"footer \((\d+) bytes\)", text)]
    sizes += [int(n) for n in re.findall(r"file_size - (\d+)`", text)]
    sizes += [int(n) for n in re.findall(r"The footer is (\d+) bytes", text)]
    assert len(sizes) == 3 and set(sizes) == {meta_module.FOOTER_SIZE}
    footer = meta_module.encode_footer(100, b"meta")
    assert len(footer) == meta_module.FOOTER_SIZE == 32


def _footer_fields() -> list[tuple[str, str]]:
    block = code_block(section("4.3 Meta and footer"), "footer")
    text = " ".join(block[block.index("footer :="):].split())
    return re.findall(r"(\w+) (u8|u16le|u32le|u64le)", text)


def test_footer_layout_and_positions():
    fields = _footer_fields()
    assert [name for name, _ in fields] == ["meta_offset", "meta_len", "meta_checksum", "format_version", "magic"]
    assert layout(fields) == meta_module.FOOTER.format
    positions = dict((name, int(pos)) for name, pos in
                     re.findall(r"`(\w+)` at (?:footer byte )?(\d+)", section("4.3 Meta and footer")))
    offset = 0
    for name, kind in fields:
        assert positions[name] == offset, name
        offset += struct.calcsize("<" + WIDTHS[kind])


@pytest.mark.parametrize("field", ["magic", "format_version"])
def test_footer_errors_report_the_documented_position(field):
    positions = dict((name, int(pos)) for name, pos in
                     re.findall(r"`(\w+)` at (?:footer byte )?(\d+)", section("4.3 Meta and footer")))
    footer = bytearray(meta_module.encode_footer(100, b"m" * 20))
    footer[positions[field]] ^= 0xFF
    file_size = 100 + 20 + meta_module.FOOTER_SIZE
    with pytest.raises(CorruptionError) as info:
        meta_module.decode_footer(bytes(footer), object="t.sst", file_size=file_size)
    assert info.value.offset == file_size - meta_module.FOOTER_SIZE + positions[field]


def test_block_trailer_layout():
    block = code_block(section("4.2 Stored block"), "tag")
    fields = re.findall(r"^(tag|content_len|checksum)\s+(u8|u32le|u64le)", block, re.MULTILINE)
    assert layout(fields) == block_module.BLOCK_TRAILER.format
    assert number(re.search(r"`content_len <= (2\^\d+)` \(`MAX_BLOCK_CONTENT`\)", FORMAT).group(1)) == \
        block_module.MAX_BLOCK_CONTENT
    assert number(re.search(r"`MAX_BLOCK_CONTENT = (2\^\d+)`", FORMAT).group(1)) == block_module.MAX_BLOCK_CONTENT


# --- envelopes ---------------------------------------------------------------------------------------

def test_manifest_envelope_layout_and_offsets():
    text = section("6. Version manifest")
    block = code_block(text, "magic")
    fields = re.findall(r"^(magic|format_version|payload_len|checksum)\s+(8 bytes|u32le|u64le)", block, re.MULTILINE)
    assert [name for name, _ in fields] == ["magic", "format_version", "payload_len", "checksum"]
    envelope = version_codec_module.ENVELOPE
    assert layout(fields) == envelope.format
    assert int(re.search(r"object size - (\d+)", block).group(1)) == envelope.size
    assert int(re.search(r"fewer\s+than (\d+) bytes", text).group(1)) == envelope.size
    assert int(re.search(r"invalid JSON \(offset (\d+) \+ position\)", text).group(1)) == envelope.size
    # the reading rules name each field's offset
    starts = [struct.calcsize("<" + "".join(WIDTHS[k] for _, k in fields[:i])) for i in range(len(fields))]
    for rule, index in (("format_version != 1", 1), ("payload_len", 2), ("a checksum\nmismatch", 3)):
        found = re.search(re.escape(rule).replace(r"\ ", r"\s+") + r"[^(]*\(offset (\d+)\)", text)
        assert found and int(found.group(1)) == starts[index], rule


def test_catalog_record_envelope_layout():
    line = re.search(r'^record\s+= "HUMKTBL1" \|\| (.*)$', RELATIONAL, re.MULTILINE).group(1)
    fields = [("magic", "8 bytes")] + re.findall(r"(u32le|u64le) (\w+)", line)[:3]
    fields = [(name, kind) if kind in WIDTHS else (kind, name) for name, kind in fields]
    assert layout(fields) == catalog_module._ENVELOPE.format
    assert len(catalog_module.RECORD_MAGIC) == 8


# --- constant tables --------------------------------------------------------------------------------

TABLES = [("3. Full keys and epochs", key_module), ("5. SST filter", filter_module),
          ("6. Version manifest", version_codec_module)]


@pytest.mark.parametrize("title, module", TABLES, ids=[t for t, _ in TABLES])
def test_constant_tables_match_the_code(title, module):
    rows = re.findall(r"^\|\s*`(\w+)`\s*\|\s*(.+?)\s*\|", section(title), re.MULTILINE)
    assert len(rows) >= 4
    for name, value in rows:
        actual = getattr(module, name)
        if isinstance(actual, struct.Struct):
            fmt, size = re.fullmatch(r"`(<\w+)` \((\d+) bytes\)", value).groups()
            assert (fmt, int(size)) == (actual.format, actual.size), name
        elif isinstance(actual, bytes):
            assert value.strip("`").encode() == actual, name
        else:
            assert number(value.strip("`")) == actual, name


def test_filter_header_size():
    block = code_block(section("5. SST filter"), "filter")
    assert int(re.search(r"header \((\d+) bytes\)", block).group(1)) == filter_module.HEADER_LEN
    fields = re.findall(r"(kind|version|probes|reserved|num_keys|num_bits)\s+(u8|u32le)", block)
    assert struct.calcsize(layout(fields)) == filter_module.HEADER_LEN


# --- encodings: widths and bounds -----------------------------------------------------------------

def test_varints_and_decimal_bounds():
    assert int(re.search(r"LEB128 \(7 bits per byte, low group first, at most (\d+) bytes\)", FLAT).group(1)) \
        == value_module.MAX_VARINT_LEN
    digits = [number(n) for n in re.findall(r"at most ([\d,]+)(?: decimal)? digits", FLAT)]
    assert len(digits) == 3 and set(digits) == {value_module.DECIMAL_MAX_PRECISION}
    assert number(re.search(r"at most ([\d,]+) bytes once leading zero", FLAT).group(1)) == \
        value_module.DECIMAL_MAX_COEFFICIENT_BYTES


SAMPLES = {"SMALLINT": (T.SMALLINT, -7), "INT": (T.INT, 7), "BIGINT": (T.BIGINT, 7), "REAL": (T.REAL, 1.5),
           "DOUBLE": (T.DOUBLE, -1.5), "DATE": (T.DATE, None), "TIME": (T.TIME, None),
           "INTERVAL": (T.INTERVAL, None)}


def test_memcomparable_fixed_widths():
    import datetime

    from relational.types import Interval
    values = {"DATE": datetime.date(2020, 1, 2), "TIME": datetime.time(1, 2), "INTERVAL": Interval(1, 2, 3)}
    checked = set()
    for types, widths in re.findall(r"^\| ([A-Z /]+) \|[^|\n]*\(([\d /]+) bytes\)", section("1. Memcomparable"),
                                    re.MULTILINE):
        for name, width in zip(types.split(" / "), widths.split(" / ")):
            dtype, value = SAMPLES[name.strip()]
            value = values.get(name.strip(), value)
            encoded = memcomparable.encode_row([value], [dtype])
            assert len(encoded) == 1 + int(width), name   # the tag byte, then the value
            checked.add(name.strip())
    assert checked == set(SAMPLES)
