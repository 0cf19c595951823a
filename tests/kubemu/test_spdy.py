"""kubemu/spdy.py: SPDY/3.1 frames as moby/spdystream reads and writes them."""
from __future__ import annotations

import struct
import zlib

import pytest

from kubemu import spdy


def test_the_dictionary_is_spdy3s():
    # 1423 bytes, checksum of moby/spdystream's spdy/dictionary.go (the draft's dictionary)
    assert len(spdy.DICTIONARY) == 1423
    assert zlib.crc32(spdy.DICTIONARY) == 80234766
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")


def test_syn_stream_and_reply_round_trip_with_one_compression_context_per_direction():
    client, server = spdy.Encoder(), spdy.Framer()
    one = client.syn_stream(1, {"streamType": "error", "port": "8000", "requestID": "0"})
    two = client.syn_stream(3, {"streamType": "data", "port": "8000", "requestID": "0"})
    first, second = list(server.feed(one + two))
    assert (first.type, first.stream, first.header("streamtype"), first.header("port")) == \
        (spdy.SYN_STREAM, 1, "error", "8000")
    assert (second.stream, second.header("streamType"), second.header("requestID")) == (3, "data", "0")
    # the second block leans on the first's context: a fresh decompressor cannot read it alone
    with pytest.raises(spdy.ProtocolError):
        list(spdy.Framer().feed(two))
    reply = list(spdy.Framer().feed(spdy.Encoder().syn_reply(1)))[0]
    assert (reply.type, reply.stream, reply.headers) == (spdy.SYN_REPLY, 1, {})


def test_a_frame_split_across_reads_comes_out_whole_and_once():
    wire = spdy.data(5, b"hello") + spdy.data(5, b"", fin=True) + spdy.ping(7) + spdy.rst_stream(5, spdy.CANCEL)
    framer, frames = spdy.Framer(), []
    for i in range(len(wire)):
        frames += framer.feed(wire[i:i + 1])
    assert [(f.type, f.stream, f.data, f.fin) for f in frames[:2]] == [(0, 5, b"hello", False), (0, 5, b"", True)]
    assert (frames[2].type, frames[2].ping) == (spdy.PING, 7)
    assert (frames[3].type, frames[3].stream, frames[3].status) == (spdy.RST_STREAM, 5, spdy.CANCEL)


def test_goaway_settings_window_update_and_unknown_frames():
    settings = spdy._control(spdy.SETTINGS, 0, struct.pack(">III", 1, 7, 1000))
    window = spdy._control(spdy.WINDOW_UPDATE, 0, struct.pack(">II", 1, 65536))
    unknown = spdy._control(99, 0, b"xyz")
    frames = list(spdy.Framer().feed(settings + window + unknown + spdy.goaway(9)))
    assert [f.type for f in frames] == [spdy.SETTINGS, spdy.WINDOW_UPDATE, spdy.GOAWAY]
    assert frames[2].stream == 9


def test_bad_input_is_a_protocol_error():
    with pytest.raises(spdy.ProtocolError, match="version 2"):
        list(spdy.Framer().feed(struct.pack(">HHI", 0x8002, spdy.PING, 4) + b"\0\0\0\1"))
    with pytest.raises(spdy.ProtocolError, match="too short"):
        list(spdy.Framer().feed(spdy._control(spdy.RST_STREAM, 0, b"\0\0")))
    with pytest.raises(spdy.ProtocolError, match="header block"):
        list(spdy.Framer().feed(spdy._control(spdy.SYN_REPLY, 0, b"\0\0\0\1garbage")))
    block = zlib.compressobj(zdict=spdy.DICTIONARY)
    truncated = block.compress(struct.pack(">II", 1, 50) + b"short") + block.flush(zlib.Z_SYNC_FLUSH)
    with pytest.raises(spdy.ProtocolError, match="truncated"):
        list(spdy.Framer().feed(spdy._control(spdy.SYN_REPLY, 0, b"\0\0\0\1" + truncated)))


def test_multi_valued_headers_are_nul_separated():
    block = zlib.compressobj(zdict=spdy.DICTIONARY)
    raw = struct.pack(">I", 1) + struct.pack(">I", 1) + b"a" + struct.pack(">I", 3) + b"x\0y"
    payload = struct.pack(">I", 1) + block.compress(raw) + block.flush(zlib.Z_SYNC_FLUSH)
    (frame,) = spdy.Framer().feed(spdy._control(spdy.HEADERS, 0, payload))
    assert frame.headers == {"a": ["x", "y"]}
