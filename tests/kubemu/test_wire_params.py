"""kubemu._wire_params: what a handler accepts, from its signature and annotations."""
from __future__ import annotations

from typing import Any, Literal

import pytest

from kubemu import wire
from kubemu._wire_params import handler_params

from .test_wire import ep, run, sockdir  # noqa: F401  (fixtures)


def typed(a: list[str], b: float, c: Literal["x", 1] = "x", d: int | None = None, e: str = None,
          f: bool | int = 0, g: Any = None, h: dict = None, i: tuple = (), j: bytes = b""):
    return {}


def error(params: dict):
    err = handler_params("typed", typed).error("typed", params)
    return None if err is None else str(err)


@pytest.mark.parametrize("params", [
    {"a": ["x"], "b": 1}, {"a": [], "b": 1.5, "c": 1}, {"a": [], "b": 0, "d": None, "e": None, "f": True},
    {"a": [], "b": 1, "f": 3, "g": {"any": [object]}, "h": {}, "i": [1, "x"], "j": b"\0"},
])
def test_admitted(params):
    assert error(params) is None


@pytest.mark.parametrize("params, fragment", [
    ({"a": ["x", 1], "b": 1}, "a: expected a list of (a string), got a list"),
    ({"a": "x", "b": 1}, "a: expected a list"),
    ({"a": [], "b": True}, "b: expected a number, got a boolean"),  # true is not a count
    ({"a": [], "b": "1"}, "b: expected a number, got a string"),
    ({"a": [], "b": 1, "c": True}, "c: expected one of 'x', 1"),
    ({"a": [], "b": 1, "c": "y"}, "c: expected one of"),
    ({"a": [], "b": 1, "d": False}, "d: expected an integer or nil, got a boolean"),
    ({"a": [], "b": 1, "e": 5}, "e: expected a string or nil, got an integer"),
    ({"a": [], "b": 1, "h": []}, "h: expected a map or nil"),
    ({"a": [], "b": 1, "i": {}}, "i: expected a list, got a map"),
    ({"a": [], "b": 1, "j": "text"}, "j: expected bytes, got a string"),
    ({"b": 1}, "missing a required argument: 'a'"),
    ({"a": [], "b": 1, "zz": 1}, "unexpected keyword argument 'zz'"),
])
def test_refused(params, fragment):
    assert fragment in (error(params) or "")


def test_unresolvable_annotations_are_refused_at_registration():
    def broken(x: NoSuchType):  # noqa: F821
        pass
    with pytest.raises(TypeError, match="cannot resolve"):
        wire.Server("ipc:///tmp/unused.sock", {"broken": broken})


def test_a_wrong_type_is_bad_request_and_the_server_keeps_serving(ep):  # noqa: F811
    async def stop(unit: str, wait: float = 1.0) -> dict:
        return {"unit": unit}

    async def main():
        async with wire.Server(ep, {"stop": stop}), wire.Client(ep, timeout=20) as client:
            for params in ({"unit": 5}, {"unit": None}, {"unit": "u", "wait": "soon"}, {"unit": ["u"]}):
                with pytest.raises(wire.BadRequest, match="bad params for 'stop'"):
                    await client.call("stop", params)
            assert await client.call("stop", {"unit": "u", "wait": 2}) == {"unit": "u"}
    run(main())
