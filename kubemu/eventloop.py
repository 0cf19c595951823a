"""The event loop a server process runs on: uvloop's when it is installed, asyncio's otherwise.

uvloop runs the loop and its TLS transport in C (asyncio's loop and SSL protocol are Python code
run for every wake-up and every record): in `kubemu bench api` the apiserver spent some 15 % less
CPU per concurrent HTTPS GET and per wire create on it. Everything kubemu asks of a loop
(add_reader on a zmq FD, signal handlers, TLS servers) both provide. KUBEMU_EVENT_LOOP=asyncio chooses asyncio's loop even when uvloop is
installed (to compare them, or to rule uvloop out).
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")

ENV = "KUBEMU_EVENT_LOOP"


def loop_factory(choice: str | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's new_event_loop, unless `choice` (default $KUBEMU_EVENT_LOOP) is "asyncio" or
    uvloop is not installed: then asyncio's."""
    if (choice if choice is not None else os.environ.get(ENV, "")).strip().lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main) on the loop loop_factory() chooses."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
