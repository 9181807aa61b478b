"""Postgres wire protocol v3 framing: reading client messages, building server messages.

Job: the byte layer of the pgwire server (docs/pgwire.md): a startup packet and typed
messages read from an ``asyncio.StreamReader`` with their declared length checked against a
limit before anything is allocated; the server's messages built as bytes; a body reader
(:class:`Body`) that raises ``ProtocolViolation`` on a truncated or malformed field instead of
an IndexError.

Invariants: nothing here blocks or touches the database; every malformed input is a
``ProtocolViolation`` (SQLSTATE 08P01) -- the server answers it with an ErrorResponse and
closes that connection only.

Callers: :mod:`sql.pgwire.server`.
"""

from __future__ import annotations

import struct

from sql.errors import Error

PROTOCOL_3_0 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
MAX_STARTUP_BYTES = 10_000

_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")


class ProtocolViolation(Error):
    """The client broke the protocol (a bad length, a truncated field, an unknown message)."""

    sqlstate = "08P01"


async def read_startup(reader) -> tuple:
    """``(code, body)`` of a startup-phase packet (startup, SSL/GSS request, cancel)."""
    head = await reader.readexactly(4)
    length = _I32.unpack(head)[0]
    if not 8 <= length <= MAX_STARTUP_BYTES:
        raise ProtocolViolation(f"invalid startup packet length {length}")
    body = await reader.readexactly(length - 4)
    return _I32.unpack(body[:4])[0], body[4:]


async def read_message(reader, limit: int) -> tuple:
    """``(type byte, body)`` of one message; its length is checked against ``limit`` first."""
    head = await reader.readexactly(5)
    length = _I32.unpack(head[1:])[0]
    if length < 4:
        raise ProtocolViolation(f"invalid message length {length} (message type {head[:1]!r})")
    if length - 4 > limit:
        raise ProtocolViolation(f"message of {length - 4} bytes exceeds the server's limit of {limit} bytes "
                                f"(message type {head[:1]!r}; hummock serve --max-message-bytes)")
    body = await reader.readexactly(length - 4) if length > 4 else b""
    return head[:1], body


class Body:
    """Sequential reader of a message body (module docstring)."""

    __slots__ = ("data", "at")

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ProtocolViolation("message too short for its fields")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def byte(self) -> bytes:
        return self._take(1)

    def bytes(self, n: int) -> bytes:
        return self._take(n)

    def cstr(self) -> str:
        end = self.data.find(b"\x00", self.at)
        if end < 0:
            raise ProtocolViolation("unterminated string in message")
        raw = self.data[self.at:end]
        self.at = end + 1
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation("a string in the message is not valid UTF-8") from None

    def rest(self) -> bytes:
        out = self.data[self.at:]
        self.at = len(self.data)
        return out


def startup_params(body: bytes) -> dict:
    """The ``name -> value`` pairs of a StartupMessage body."""
    parts = body.split(b"\x00")
    if len(parts) < 2 or parts[-1] != b"" or len(parts) % 2 != 0:
        raise ProtocolViolation("malformed startup parameters")
    try:
        pairs = [p.decode() for p in parts[:-2]] if parts[-2] == b"" else None
    except UnicodeDecodeError:
        raise ProtocolViolation("startup parameters are not valid UTF-8") from None
    if pairs is None or len(pairs) % 2:
        raise ProtocolViolation("malformed startup parameters")
    return dict(zip(pairs[::2], pairs[1::2]))


# --- server messages ------------------------------------------------------------------------------

def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + _I32.pack(len(body) + 4) + body


def cstr(s: str) -> bytes:
    return s.encode() + b"\x00"


def auth_ok() -> bytes:
    return message(b"R", _I32.pack(0))


def auth_cleartext() -> bytes:
    return message(b"R", _I32.pack(3))


def auth_md5(salt: bytes) -> bytes:
    return message(b"R", _I32.pack(5) + salt)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return message(b"K", _I32.pack(pid) + _I32.pack(secret))


def ready(status: bytes) -> bytes:
    return message(b"Z", status)


def negotiate_version(minor: int, unknown: list) -> bytes:
    return message(b"v", _I32.pack(minor) + _I32.pack(len(unknown)) + b"".join(cstr(u) for u in unknown))


def row_description(fields) -> bytes:
    """``fields``: ``(name, type oid, type size, format code)`` per column."""
    body = [_I16.pack(len(fields))]
    for name, oid, size, fmt in fields:
        body.append(cstr(name) + struct.pack("!ihihih", 0, 0, oid, size, -1, fmt))
    return message(b"T", b"".join(body))


def parameter_description(oids) -> bytes:
    return message(b"t", _I16.pack(len(oids)) + b"".join(_I32.pack(o) for o in oids))


def data_rows(columns, start: int, end: int) -> bytes:
    """DataRow messages of rows ``start..end`` of ``columns`` (lists of encoded cells)."""
    head = _I16.pack(len(columns))
    pack = _I32.pack
    out = []
    for cells in zip(*[c[start:end] for c in columns]) if columns else [()] * (end - start):
        body = head + b"".join(cells)
        out.append(b"D" + pack(len(body) + 4) + body)
    return b"".join(out)


def command_complete(tag: str) -> bytes:
    return message(b"C", cstr(tag))


def empty_query() -> bytes:
    return message(b"I")


def no_data() -> bytes:
    return message(b"n")


def copy_response(kind: bytes, ncols: int, text: bool = True) -> bytes:
    """CopyInResponse (``G``) or CopyOutResponse (``H``): overall text/binary and per column."""
    fmt = 0 if text else 1
    return message(kind, struct.pack("!bh", fmt, ncols) + _I16.pack(fmt) * ncols)


def copy_data(data: bytes) -> bytes:
    return message(b"d", data)


def copy_done() -> bytes:
    return message(b"c")


def error_fields(severity: str, code: str, text: str, position: int | None = None, detail: str | None = None,
                 hint: str | None = None) -> bytes:
    fields = [b"S" + cstr(severity), b"V" + cstr(severity), b"C" + cstr(code), b"M" + cstr(text)]
    if detail:
        fields.append(b"D" + cstr(detail))
    if hint:
        fields.append(b"H" + cstr(hint))
    if position is not None:
        fields.append(b"P" + cstr(str(position)))
    return b"".join(fields) + b"\x00"


def error_response(code: str, text: str, position: int | None = None, severity: str = "ERROR",
                   detail: str | None = None, hint: str | None = None) -> bytes:
    return message(b"E", error_fields(severity, code, text, position, detail, hint))


def notice(text: str, code: str = "01000", severity: str = "WARNING") -> bytes:
    return message(b"N", error_fields(severity, code, text))
