"""The wire's envelope, pure: message kinds, `Request`/`Reply`, and the encode_*/decode_*
functions with their size checks. No sockets here; the format is documented in `kubemu.wire`."""
from __future__ import annotations

import copy
import logging
from typing import Any, NamedTuple

import msgpack

from ._wire_errors import BadRequest, Internal, TooLarge, WireError, error_from_code
from ._wire_limits import DEFAULT_MAX_FRAME
from .packer import array_header, map_header
from .packer import packb as _packb

log = logging.getLogger("kubemu.wire")

REQ, STREAM, CANCEL = 1, 2, 3
REPLY, ERROR, STREAM_START, STREAM_ITEM, STREAM_END, PING = 4, 5, 6, 7, 8, 9
NOTIFY = 10  # client -> server, one way: nothing ever comes back
STREAM_ITEMS = 11  # several stream items in one message: a stream handler's `Batch`
# the handshake property (ZMQ_METADATA) a client names itself with, as HTTP's User-Agent
USER_AGENT_PROPERTY = "X-User-Agent"


class Request(NamedTuple):
    kind: int  # REQ, STREAM, NOTIFY or CANCEL
    id: int
    method: str | None
    params: dict | None


class Reply(NamedTuple):
    kind: int  # REPLY, ERROR, STREAM_START, STREAM_ITEM, STREAM_ITEMS, STREAM_END or PING
    id: int | None
    value: Any  # the result, the item, or the WireError for ERROR


def _unpackb(data):
    # strict_map_key=False: results and params may legitimately hold int-keyed maps
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def _tag(err: WireError, request_id) -> WireError:
    err.request_id = request_id
    return err


def _describe(exc: BaseException, limit: int = 200) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + "..."


def _peek_id(data) -> int | None:
    """The request id of a message too large or too broken to decode, read from its first bytes."""
    try:
        unpacker = msgpack.Unpacker(raw=False)
        unpacker.feed(data[:32])
        if unpacker.read_array_header() < 2:
            return None
        unpacker.skip()
        rid = unpacker.unpack()
    except Exception:
        return None
    return rid if type(rid) is int else None


def _check_size(payload: bytes, max_frame: int | None, what: str) -> bytes:
    if max_frame is not None and len(payload) > max_frame:
        raise TooLarge(f"{what} of {len(payload)} bytes exceeds the limit of {max_frame} bytes",
                       {"size": len(payload), "limit": max_frame})
    return payload


def encode_call(rid: int, method: str, params: dict | None = None, max_frame: int | None = None) -> bytes:
    return _check_size(_packb([REQ, rid, method, {} if params is None else params]), max_frame,
                       f"request {method!r}")


def encode_stream(rid: int, method: str, params: dict | None = None, max_frame: int | None = None) -> bytes:
    return _check_size(_packb([STREAM, rid, method, {} if params is None else params]), max_frame,
                       f"stream request {method!r}")


def encode_notify(rid: int, method: str, params: dict | None = None, max_frame: int | None = None) -> bytes:
    return _check_size(_packb([NOTIFY, rid, method, {} if params is None else params]), max_frame,
                       f"notification {method!r}")


def encode_cancel(rid: int) -> bytes:
    return _packb([CANCEL, rid])


def encode_reply(rid: int, result, max_frame: int | None = None) -> bytes:
    return _check_size(_packb([REPLY, rid, result]), max_frame, "reply")


def encode_stream_start(rid: int) -> bytes:
    return _packb([STREAM_START, rid])


class SharedItem(dict):
    """A map sent on many streams (a watch event to every watcher of its resource): read-only
    once made, and packed once, on its first send, however many streams carry it
    (kube-apiserver's cachingObject). A value that is a SharedItem itself is packed once too,
    whichever maps hold it (one object in the ADDED, MODIFIED and DELETED events that differ
    by their type only)."""
    __slots__ = ("_packed",)

    # a copy is made to be changed: a plain dict, never the packed bytes of the original
    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo: dict) -> dict:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def packed(self) -> bytes:
        try:
            return self._packed
        except AttributeError:
            pass
        if any(type(v) is SharedItem for v in self.values()):  # a map is its header, then its pairs
            self._packed = b"".join([map_header(len(self)), *(
                _packb(k) + _packed(v) for k, v in self.items())])
        else:
            self._packed = _packb(self)
        return self._packed


class Batch(list):
    """Stream items a handler has at hand at once, yielded together: sent as one STREAM_ITEMS
    message, which the client's stream gives out one item at a time, in order (a watch event
    per wire message was most of a watcher's cost when writes come in bursts)."""
    __slots__ = ()


_STREAM_ITEM_HEAD = b"\x93" + _packb(STREAM_ITEM)  # a 3-element array, then its kind
_STREAM_ITEMS_HEAD = b"\x93" + _packb(STREAM_ITEMS)


def _packed(item) -> bytes:
    return item.packed() if type(item) is SharedItem else _packb(item)


def encode_stream_item(rid: int, item, max_frame: int | None = None) -> bytes:
    if type(item) is SharedItem:  # msgpack's array is its header and its elements in a row
        return _check_size(b"".join((_STREAM_ITEM_HEAD, _packb(rid), item.packed())), max_frame, "stream item")
    return _check_size(_packb([STREAM_ITEM, rid, item]), max_frame, "stream item")


def encode_stream_items(rid: int, items: list, max_frame: int | None = None) -> bytes:
    """One STREAM_ITEMS message of `items` (a `Batch`); TooLarge if over `max_frame` (the
    server then sends them one by one)."""
    return _check_size(b"".join([_STREAM_ITEMS_HEAD, _packb(rid), array_header(len(items)),
                                 *map(_packed, items)]), max_frame, "stream items")


def encode_stream_end(rid: int) -> bytes:
    return _packb([STREAM_END, rid])


def encode_ping() -> bytes:
    return _packb([PING])


def encode_error(rid: int | None, err: WireError, max_frame: int | None = None) -> bytes:
    """Never raises: an error reply must always be sendable, so undeliverable parts are dropped."""
    code = err.code if isinstance(err.code, str) else "Error"
    message = err.message if isinstance(err.message, str) else str(err.message)
    details = err.details or None
    if details is not None and not isinstance(details, dict):
        details = {"details": details}  # the envelope promises a map
    try:
        payload = _packb([ERROR, rid, code, message, details])
    except Exception:
        log.warning("details of a %s error are not serializable; sent without them", code)
        payload = _packb([ERROR, rid, code, message, None])
    if max_frame is not None and len(payload) > max_frame:
        payload = _packb([ERROR, rid, code, message[:1000], None])
    return payload


def decode_request(frames, max_frame: int = DEFAULT_MAX_FRAME) -> Request:
    """Validate what a ROUTER received after the routing-id frame.

    Raises BadRequest or TooLarge; `err.request_id` is set when an id could still be read, so
    the error can be addressed to the waiting call."""
    if len(frames) != 1:
        raise BadRequest(f"expected exactly 1 frame after the routing id, got {len(frames)}")
    data = frames[0]
    size = len(data)
    if size > max_frame:
        raise _tag(TooLarge(f"message of {size} bytes exceeds the limit of {max_frame} bytes",
                            {"size": size, "limit": max_frame}), _peek_id(data))
    try:
        msg = _unpackb(data)
    except Exception as exc:
        raise _tag(BadRequest(f"undecodable message: {_describe(exc)}"), _peek_id(data)) from None
    if type(msg) is not list or len(msg) < 2:
        raise BadRequest("a message must be an array [kind, id, ...]")
    kind, rid = msg[0], msg[1]
    if type(rid) is not int:
        raise BadRequest(f"the request id must be an integer, not {type(rid).__name__}")
    if type(kind) is int and (kind == REQ or kind == STREAM or kind == NOTIFY):
        if len(msg) != 4:
            raise _tag(BadRequest(f"a request must be [kind, id, method, params], got {len(msg)} elements"), rid)
        method, params = msg[2], msg[3]
        if type(method) is not str:
            raise _tag(BadRequest(f"the method name must be a string, not {type(method).__name__}"), rid)
        if params is None:
            params = {}
        elif type(params) is not dict:
            raise _tag(BadRequest(f"params of {method!r} must be a map, not {type(params).__name__}"), rid)
        else:
            for key in params:
                if type(key) is not str:
                    raise _tag(BadRequest(f"param names of {method!r} must be strings, got {key!r:.50}"), rid)
        return Request(kind, rid, method, params)
    if type(kind) is int and kind == CANCEL:
        if len(msg) != 2:
            raise _tag(BadRequest(f"a cancel must be [kind, id], got {len(msg)} elements"), rid)
        return Request(CANCEL, rid, None, None)
    raise _tag(BadRequest(f"unknown message kind {kind!r:.20}"), rid)


def decode_reply(frames, max_frame: int = DEFAULT_MAX_FRAME) -> Reply:
    """Validate what a DEALER received. Raises TooLarge or Internal (with `request_id` if known)."""
    if len(frames) != 1:
        raise Internal(f"malformed reply: expected 1 frame, got {len(frames)}")
    data = frames[0]
    size = len(data)
    if size > max_frame:
        raise _tag(TooLarge(f"reply of {size} bytes exceeds this client's limit of {max_frame} bytes",
                            {"size": size, "limit": max_frame}), _peek_id(data))
    try:
        msg = _unpackb(data)
    except Exception as exc:
        raise _tag(Internal(f"malformed reply: {_describe(exc)}"), _peek_id(data)) from None
    if type(msg) is not list or not msg or type(msg[0]) is not int:
        raise Internal("malformed reply: not an array starting with a kind")
    kind, n = msg[0], len(msg)
    if kind == PING and n == 1:
        return Reply(PING, None, None)
    rid = msg[1] if n > 1 else None
    if type(rid) is int:
        if kind == REPLY and n == 3:
            return Reply(REPLY, rid, msg[2])
        if kind == STREAM_ITEM and n == 3:
            return Reply(STREAM_ITEM, rid, msg[2])
        if kind == STREAM_ITEMS and n == 3 and type(msg[2]) is list:
            return Reply(STREAM_ITEMS, rid, msg[2])
        if (kind == STREAM_START or kind == STREAM_END) and n == 2:
            return Reply(kind, rid, None)
    if kind == ERROR and n == 5 and (rid is None or type(rid) is int):
        code, message, details = msg[2], msg[3], msg[4]
        if type(code) is str and type(message) is str and (details is None or type(details) is dict):
            return Reply(ERROR, rid, error_from_code(code, message, details))
    raise _tag(Internal(f"malformed reply of kind {kind!r:.20} with {n} elements"),
               rid if type(rid) is int else None)
