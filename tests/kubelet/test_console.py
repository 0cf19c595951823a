"""kubelet/console.py through real shims: a container with `stdin` or `tty`, and an attacher
that gets its input end from the shim's N.attach socket."""
from __future__ import annotations

import fcntl
import json
import os
import struct
import termios
from pathlib import Path

from kubelet import console
from tests.conftest import alive, wait_for
from tests.kubelet.test_shim import container_dir, exit_of, launch, marker_env, node, py, state_of, subreaper  # noqa: F401

# Reports whether its stdio is a terminal and the terminal's size, then echoes lines until EOF.
ECHO = r"""
import os, sys
print("tty" if os.isatty(0) and os.isatty(1) else "pipe", os.get_terminal_size(0) if os.isatty(0) else "", flush=True)
for line in sys.stdin:
    if line.strip() == "size":
        print("size", os.get_terminal_size(0).columns, os.get_terminal_size(0).lines, flush=True)
    else:
        print("got", line.strip(), flush=True)
print("eof", flush=True)
"""


def start(node: Path, cdir: Path, **modes) -> dict:
    spec = {"argv": py(ECHO), "env": marker_env(node), "grace": 5, **modes}
    (cdir / "0.spec.json").write_text(json.dumps(spec))
    assert launch(cdir, None, "--spec", str(cdir / "0.spec.json")).returncode == 0
    return state_of(cdir)


def log_has(cdir: Path, text: str) -> str:
    log = cdir / "0.log"
    return wait_for(lambda: log.exists() and text in log.read_text() and log.read_text(), message=repr(text))


def write(fd: int, data: bytes) -> None:
    assert os.write(fd, data) == len(data)


def test_a_tty_container_gets_a_terminal_whose_output_is_its_log(node):
    cdir = container_dir(node)
    start(node, cdir, stdin=True, tty=True)
    assert log_has(cdir, "tty").startswith("tty")
    kind, fd = console.attach(str(cdir / "0.attach"))
    assert kind == console.TTY
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.set_blocking(fd, False)  # as asyncio's pipe transport leaves the master in the kubelet
        write(fd, b"hello\n")
        log_has(cdir, "got hello")
        write(fd, b"size\n")
        log_has(cdir, "size 120 40")
        assert b"hello\r\n" in (cdir / "0.log").read_bytes(), "the terminal echoes, with its line discipline"
        write(fd, b"\x04")  # ^D: the terminal's end of input
    finally:
        os.close(fd)
    assert exit_of(cdir)["exit_code"] == 0
    assert log_has(cdir, "eof")
    assert not (cdir / "0.attach").exists(), "the socket goes with the container"


def test_stdin_once_closes_the_input_after_the_first_attacher(node):
    cdir = container_dir(node)
    start(node, cdir, stdin=True, stdin_once=True)
    assert log_has(cdir, "pipe")
    kind, fd = console.attach(str(cdir / "0.attach"))
    assert kind == console.STDIN
    assert console.attach(str(cdir / "0.attach")) == (console.CLOSED, None), "handed out once"
    write(fd, b"one\n")
    log_has(cdir, "got one")
    os.close(fd)  # the only writer left: the container reads EOF
    assert exit_of(cdir)["exit_code"] == 0
    log_has(cdir, "eof")


def test_stdin_stays_open_between_attachers_without_stdin_once(node):
    cdir = container_dir(node)
    state = start(node, cdir, stdin=True)
    for word in (b"a", b"b"):
        kind, fd = console.attach(str(cdir / "0.attach"))
        assert kind == console.STDIN
        write(fd, word + b"\n")
        os.close(fd)
        log_has(cdir, f"got {word.decode()}")
    assert alive(state["pid"]), "the shim's copy keeps the pipe open: no EOF"
    os.kill(state["shim_pid"], 15)
    exit_of(cdir)


def test_without_stdin_or_tty_there_is_no_socket(node):
    cdir = container_dir(node)
    start(node, cdir)
    assert log_has(cdir, "pipe")
    assert exit_of(cdir)["exit_code"] == 0, "stdin is /dev/null: EOF at once"
    assert not (cdir / "0.attach").exists()
    try:
        console.attach(str(cdir / "0.attach"))
    except OSError:
        pass
    else:
        raise AssertionError("attaching to a container without stdin must fail")


def test_a_socket_path_longer_than_a_unix_address_works(node):
    deep = node / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    cdir = container_dir(deep)
    assert len(str(cdir / "0.attach")) > 108
    start(node, cdir, stdin=True, stdin_once=True)
    kind, fd = console.attach(str(cdir / "0.attach"))
    assert kind == console.STDIN
    os.close(fd)
    assert exit_of(cdir)["exit_code"] == 0
