"""SPDY/3.1 framing, as moby/spdystream speaks it: what kubectl tunnels over a WebSocket for port-forward.

Pure: `Framer.feed(bytes)` yields the frames in what was received (a frame may arrive across
many WebSocket messages), `encode_*` make the bytes to send. Header blocks are zlib-compressed
with the SPDY/3 dictionary, one compression context per direction for the whole connection
(each block ends with a sync flush), so a Framer and an Encoder live as long as their connection.

Frames (every integer big-endian):
    control  1 | version(15) | type(16) | flags(8) | length(24) | payload
    data     0 | stream id(31)          | flags(8) | length(24) | data
    SYN_STREAM  stream id, associated id, priority(3) + 5 unused bits, slot(8), header block
    SYN_REPLY   stream id, header block          RST_STREAM  stream id, status
    SETTINGS    count, (flags(8) id(24), value)*  PING  id    GOAWAY  last good id, status
    HEADERS     stream id, header block          WINDOW_UPDATE  stream id, delta
    header block  count(32), (len(32) name, len(32) value)*; a value's parts are NUL-separated
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
PROTOCOL_ERROR, CANCEL = 1, 5  # RST_STREAM status codes

_WORDS = ("options head post put delete trace accept accept-charset accept-encoding accept-language "
          "accept-ranges age allow authorization cache-control connection content-base content-encoding "
          "content-language content-length content-location content-md5 content-range content-type date "
          "etag expect expires from host if-match if-modified-since if-none-match if-range "
          "if-unmodified-since last-modified location max-forwards pragma proxy-authenticate "
          "proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade "
          "user-agent vary via warning www-authenticate method get status|200 OK|version|HTTP/1.1|url "
          "public set-cookie keep-alive origin")
_TAIL = (b"100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
         b"203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 "
         b"Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service "
         b"UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, "
         b"Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
         b"application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch"
         b"charset=utf-8charset=iso-8859-1,utf-,*,enq=0.")


def _dictionary() -> bytes:
    """The SPDY/3 header compression dictionary (the draft's section 2.6.10.1): length-prefixed
    words ("200 OK" and "HTTP/1.1" hold a space, hence the '|' around the middle of the list),
    then a run of status lines, dates and media types."""
    head, middle, tail = _WORDS.split("|", 2)[0], _WORDS.split("|")[1:-1], _WORDS.split("|")[-1]
    words = head.split() + middle + tail.split()
    return b"".join(struct.pack(">I", len(w)) + w.encode() for w in words) + _TAIL


DICTIONARY = _dictionary()


class ProtocolError(Exception):
    """The peer broke the framing: the connection cannot go on."""


@dataclass
class Frame:
    type: int  # a control frame's type, or 0 for data
    flags: int
    stream: int = 0
    headers: dict[str, list[str]] = field(default_factory=dict)
    data: bytes = b""
    status: int = 0      # RST_STREAM, GOAWAY
    ping: int = 0        # PING's id

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)

    def header(self, name: str) -> str:
        values = self.headers.get(name.lower())
        return values[0] if values else ""


class Framer:
    """Frames out of a byte stream; ProtocolError when it is not SPDY/3."""

    def __init__(self):
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> Iterator[Frame]:
        self._buffer += data
        while len(self._buffer) >= 8:
            first, second = struct.unpack_from(">II", self._buffer)
            length = second & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                return
            payload = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            flags = second >> 24
            if not first & 0x80000000:
                yield Frame(0, flags, first & 0x7FFFFFFF, data=payload)
                continue
            version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
            if version != VERSION:
                raise ProtocolError(f"unsupported SPDY version {version}")
            frame = self._control(kind, flags, payload)
            if frame is not None:
                yield frame

    def _control(self, kind: int, flags: int, payload: bytes) -> Frame | None:
        try:
            if kind == SYN_STREAM:
                stream = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
                return Frame(kind, flags, stream, self._headers(payload[10:]))
            if kind in (SYN_REPLY, HEADERS):
                stream = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
                return Frame(kind, flags, stream, self._headers(payload[4:]))
            if kind == RST_STREAM:
                stream, status = struct.unpack_from(">II", payload)
                return Frame(kind, flags, stream & 0x7FFFFFFF, status=status)
            if kind == PING:
                return Frame(kind, flags, ping=struct.unpack_from(">I", payload)[0])
            if kind == GOAWAY:
                stream, status = struct.unpack_from(">II", payload)
                return Frame(kind, flags, stream & 0x7FFFFFFF, status=status)
            if kind in (SETTINGS, WINDOW_UPDATE):
                return Frame(kind, flags)
        except struct.error:
            raise ProtocolError(f"control frame {kind}: {len(payload)} bytes is too short") from None
        return None  # unknown control frames are ignored, as the draft asks

    def _headers(self, block: bytes) -> dict[str, list[str]]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as exc:
            raise ProtocolError(f"header block: {exc}") from None
        headers: dict[str, list[str]] = {}
        try:
            (count,), at = struct.unpack_from(">I", raw), 4
            for _ in range(count):
                parts = []
                for _ in range(2):
                    (n,) = struct.unpack_from(">I", raw, at)
                    if at + 4 + n > len(raw):
                        raise struct.error
                    parts.append(raw[at + 4:at + 4 + n].decode("utf-8", "replace"))
                    at += 4 + n
                headers.setdefault(parts[0].lower(), []).extend(parts[1].split("\0"))
        except struct.error:
            raise ProtocolError("header block: truncated") from None
        return headers


class Encoder:
    """Frames to bytes, with this direction's header compression context."""

    def __init__(self):
        self._deflate = zlib.compressobj(zdict=DICTIONARY)

    def _block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            n, v = name.lower().encode(), value.encode()
            raw += struct.pack(">I", len(n)) + n + struct.pack(">I", len(v)) + v
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_stream(self, stream: int, headers: dict[str, str], flags: int = 0) -> bytes:
        return _control(SYN_STREAM, flags, struct.pack(">IIH", stream, 0, 0) + self._block(headers))

    def syn_reply(self, stream: int, headers: dict[str, str] | None = None, flags: int = 0) -> bytes:
        return _control(SYN_REPLY, flags, struct.pack(">I", stream) + self._block(headers or {}))


def _control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def data(stream: int, payload: bytes, fin: bool = False) -> bytes:
    return struct.pack(">II", stream, ((FLAG_FIN if fin else 0) << 24) | len(payload)) + payload


def rst_stream(stream: int, status: int) -> bytes:
    return _control(RST_STREAM, 0, struct.pack(">II", stream, status))


def ping(ident: int) -> bytes:
    return _control(PING, 0, struct.pack(">I", ident))


def goaway(last_stream: int, status: int = 0) -> bytes:
    return _control(GOAWAY, 0, struct.pack(">II", last_stream, status))
