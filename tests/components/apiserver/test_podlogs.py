"""podlogs' streaming for the HTTPS door: tail offsets, timestamps, follow until the instance ends."""
from __future__ import annotations

import asyncio
import io
import os

import pytest

from components.apiserver import podlogs
from kubemu.wire import BadRequest, Unavailable
from tests.conftest import DEADLINE


def test_tail_offset():
    data = b"a\nbb\nccc\n"
    f = io.BytesIO(data)
    assert data[podlogs.tail_offset(f, 1):] == b"ccc\n"
    assert data[podlogs.tail_offset(f, 2):] == b"bb\nccc\n"
    assert podlogs.tail_offset(f, 10) == 0 and podlogs.tail_offset(f, 0) == len(data)
    unfinished = io.BytesIO(b"a\nbb")
    assert podlogs.tail_offset(unfinished, 1) == 2
    big = io.BytesIO(b"x" * (podlogs.CHUNK * 2) + b"\nlast\n")
    assert big.getvalue()[podlogs.tail_offset(big, 1):] == b"last\n"


def test_stamp_marks_line_starts_across_chunks():
    out, start = podlogs.stamp(b"one\ntw", 0.0, True)
    assert out == b"1970-01-01T00:00:00.000000000Z one\n1970-01-01T00:00:00.000000000Z tw" and not start
    out, start = podlogs.stamp(b"o\nthree\n", 1.5, start)
    assert out == b"o\n1970-01-01T00:00:01.500000000Z three\n" and start


def _collect(path, opts, clock=lambda: 1e10):
    async def main():
        return [chunk async for chunk in podlogs.stream(path, opts, clock)]
    return b"".join(asyncio.run(asyncio.wait_for(main(), DEADLINE)))


def test_stream_options(tmp_path):
    log = tmp_path / "0.log"
    log.write_bytes(b"one\ntwo\nthree\n")
    assert _collect(log, podlogs.Options()) == b"one\ntwo\nthree\n"
    assert _collect(log, podlogs.Options(tail_lines=1)) == b"three\n"
    assert _collect(log, podlogs.Options(limit_bytes=6)) == b"one\ntw"
    os.utime(log, (1000.0, 1000.0))
    assert _collect(log, podlogs.Options(since_seconds=10), clock=lambda: 2000.0) == b""
    assert _collect(log, podlogs.Options(since_seconds=10), clock=lambda: 1005.0) == b"one\ntwo\nthree\n"


def test_follow_ends_once_the_instance_has_exited(tmp_path):
    log = tmp_path / "3.log"
    log.write_bytes(b"start\n")

    async def main():
        got = []
        async for chunk in podlogs.stream(log, podlogs.Options(follow=True), lambda: 0.0):
            got.append(chunk)
            if len(got) == 1:
                with open(log, "ab") as f:
                    f.write(b"more\n")
            elif len(got) == 2:
                (tmp_path / "3.exit.json").write_text("{}")
        return got
    assert asyncio.run(asyncio.wait_for(main(), DEADLINE)) == [b"start\n", b"more\n"]


def _mirror_pod(mirror: str) -> dict:
    return {"metadata": {"name": "web", "namespace": "ns", "uid": "u0",
                         "annotations": {podlogs.MIRROR_ANNOTATION: mirror}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}}


def _log_at(directory, text: str = "x\n"):
    (directory / "c").mkdir(parents=True, exist_ok=True)
    (directory / "c" / "0.log").write_text(text)


def test_the_mirror_annotation_names_a_pod_directory_of_the_node(tmp_path):
    pods = tmp_path / "nodes" / "n1" / "pods"
    _log_at(pods / "ns_web_static1")
    assert podlogs.log_path(tmp_path, _mirror_pod("static1"), None, False) == pods / "ns_web_static1" / "c" / "0.log"


def test_a_mirror_annotation_that_is_not_one_segment_names_no_file(tmp_path):
    """The annotation is user-writable: it must not lead the apiserver to read elsewhere."""
    pods = tmp_path / "nodes" / "n1" / "pods"
    (pods / "ns_web_u1").mkdir(parents=True)
    _log_at(tmp_path / "nodes" / "n1" / "secret")   # where u1/../../secret leads
    with pytest.raises(BadRequest, match='container "c" in pod "web" not found'):
        podlogs.log_path(tmp_path, _mirror_pod("u1/../../secret"), None, False)


def test_a_pod_directory_that_leads_out_of_the_node_names_no_file(tmp_path):
    pods = tmp_path / "nodes" / "n1" / "pods"
    pods.mkdir(parents=True)
    _log_at(tmp_path / "elsewhere")
    (pods / "ns_web_u1").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(BadRequest, match="not found"):
        podlogs.log_path(tmp_path, _mirror_pod("u1"), None, False)


def test_a_node_with_no_directory_here_is_on_another_machine(tmp_path):
    """A node joined with `kubemu join` keeps its pods' logs on its own machine: one clear
    error (503, as kube-apiserver's when it cannot dial a kubelet), not "container not found"."""
    (tmp_path / "nodes").mkdir()
    with pytest.raises(Unavailable) as err:
        podlogs.log_path(tmp_path, _mirror_pod("u1"), None, False)
    assert err.value.message == ('error dialing backend: the kubelet of node "n1" is not on this machine (a node joined '
                              "with `kubemu join`, or a hollow node): its pods' logs, exec and attach are not served")
