"""The pod `log` subresource: a container's output, read where its kubelet keeps it.

In Kubernetes the apiserver proxies this to the node's kubelet; in kubemu every node lives
under one state directory on this machine, so the apiserver reads the kubelet's files itself:
`<state>/nodes/<node>/pods/<namespace>_<name>_<uid>/<container>/<restartCount>.log` (a static
pod's directory carries the static pod's uid, which its mirror pod names in its annotation).
Errors are kubectl's: a pod with no node, a container that must be named or does not exist, no
previous instance.

Over HTTPS the log is streamed (`stream`): `follow` keeps reading the instance's file until the
shim has written its `<N>.exit.json` and every byte is sent (kubelet's follow also ends with the
container). The kubelet's files hold the container's raw output, without a time per line, so
`timestamps` stamps a line with the file's modification time when it was already written, and
with the time it was read when it arrives while following; `sinceSeconds` likewise skips a file
not written to within that many seconds.
"""
from __future__ import annotations

import asyncio
import datetime
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from kubemu.wire import BadRequest, NotFound, Unavailable

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
MAX_LOG_BYTES = 1024 * 1024  # one reply stays well under the wire's 2 MiB frame
CHUNK = 64 * 1024
FOLLOW_POLL = 0.2  # seconds between looks at a followed file that has nothing new


def pod_node(pod: dict) -> str:
    """The node a pod's containers run on (for its log, exec and attach)."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        raise BadRequest(f'pod "{pod["metadata"]["name"]}" does not have a host assigned', {"reason": "BadRequest"})
    return node


def pod_container(pod: dict, container: str | None) -> str:
    """The container a log, exec or attach request means: the one named, or the pod's only one."""
    name, spec = pod["metadata"]["name"], pod.get("spec") or {}
    containers = [c.get("name") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
    if container is None:
        apps = [c.get("name") for c in spec.get("containers") or []]
        if len(apps) != 1:
            raise BadRequest(f"a container name must be specified for pod {name}, choose one of: "
                             f"[{' '.join(apps)}]", {"reason": "BadRequest"})
        container = apps[0]
    if container not in containers:
        raise BadRequest(f"container {container} is not valid for pod {name}", {"reason": "BadRequest"})
    return container


def pod_uid(pod: dict) -> str:
    """The uid in the name of the pod's directory on its node: a static pod's own uid, which its
    mirror pod carries in an annotation (anyone's to write: callers check it names one segment)."""
    meta = pod["metadata"]
    return (meta.get("annotations") or {}).get(MIRROR_ANNOTATION) or meta.get("uid", "")


def log_path(state_dir: Path, pod: dict, container: str | None, previous: bool) -> Path:
    meta, status = pod["metadata"], pod.get("status") or {}
    name = meta["name"]
    node = pod_node(pod)
    container = pod_container(pod, container)
    statuses = {c.get("name"): c for c in (status.get("initContainerStatuses") or [])
                + (status.get("containerStatuses") or [])}
    count = int((statuses.get(container) or {}).get("restartCount") or 0) - (1 if previous else 0)
    uid = pod_uid(pod)  # it may only name a directory of the node's pods
    if is_segment(node) and not (state_dir / "nodes" / node).is_dir():
        raise Unavailable(elsewhere(node))
    pods = state_dir / "nodes" / node / "pods"
    path = pods / f"{meta['namespace']}_{name}_{uid}" / container / f"{count}.log"
    if count < 0 or not is_segment(uid) or not path.resolve().is_relative_to(pods.resolve()) \
            or not path.is_file():
        what = f'previous terminated container "{container}"' if previous else f'container "{container}"'
        raise BadRequest(f'{what} in pod "{name}" not found', {"reason": "BadRequest"})
    return path


def elsewhere(node: str) -> str:
    """Why the apiserver cannot reach a kubelet that has no directory in its state directory."""
    return (f'error dialing backend: the kubelet of node "{node}" is not on this machine (a node joined with '
            "`kubemu join`, or a hollow node): its pods' logs, exec and attach are not served")


def is_segment(text: object) -> bool:
    """Whether `text` is one path segment that stays where it is put."""
    return isinstance(text, str) and text not in ("", ".", "..") and "/" not in text and "\0" not in text


def read_log(path: Path, tail_lines: int | None = None, limit_bytes: int | None = None) -> str:
    limit = min(limit_bytes or MAX_LOG_BYTES, MAX_LOG_BYTES)
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - limit))
        text = f.read().decode(errors="replace")
    if tail_lines is not None and tail_lines >= 0:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[-tail_lines:]) if tail_lines else ""
    return text


def no_state_dir() -> NotFound:
    return NotFound("pod logs are not available: this apiserver was started without --state-dir",
                    {"reason": "NotFound"})


@dataclass(frozen=True)
class Options:
    """PodLogOptions, as the HTTPS door reads them from the query."""
    container: str | None = None
    follow: bool = False
    previous: bool = False
    tail_lines: int | None = None
    since_seconds: int | None = None
    timestamps: bool = False
    limit_bytes: int | None = None


def exit_path(log: Path) -> Path:
    """<N>.exit.json beside <N>.log: written by the shim when that instance has ended."""
    return log.with_name(f"{log.stem}.exit.json")


def tail_offset(f, lines: int) -> int:
    """The offset in the open binary file `f` where its last `lines` lines begin."""
    end = f.seek(0, 2)
    if lines <= 0:
        return end
    pos, found = end, 0
    while pos > 0:
        step = min(CHUNK, pos)
        pos -= step
        f.seek(pos)
        block = f.read(step)
        # a final newline ends the last line; it does not start one
        stop = len(block) - 1 if pos + len(block) == end and block.endswith(b"\n") else len(block)
        at = stop
        while True:
            at = block.rfind(b"\n", 0, at)
            if at < 0:
                break
            found += 1
            if found == lines:
                return pos + at + 1
    return 0


def rfc3339nano(t: float) -> str:
    dt = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def stamp(data: bytes, when: float, line_start: bool) -> tuple[bytes, bool]:
    """`data` with `<RFC3339Nano time> ` before each line that begins in it, and whether the
    next chunk begins a line."""
    prefix = rfc3339nano(when).encode() + b" "
    lines = data.split(b"\n")
    out = []
    for i, part in enumerate(lines):
        last = i == len(lines) - 1
        if last and not part:
            break
        out.append((prefix if (line_start or i > 0) else b"") + part + (b"" if last else b"\n"))
    return b"".join(out), data.endswith(b"\n")


async def stream(path: Path, opts: Options, clock: Callable[[], float]) -> AsyncIterator[bytes]:
    """The log at `path` as PodLogOptions ask, in chunks; with `follow`, until the instance has ended."""
    done = exit_path(path)
    with open(path, "rb") as f:
        written = os.fstat(f.fileno()).st_mtime
        if opts.since_seconds is not None and written < clock() - opts.since_seconds:
            f.seek(0, 2)
        elif opts.tail_lines is not None:
            f.seek(tail_offset(f, opts.tail_lines))
        sent, line_start, when = 0, True, written
        while True:
            data = f.read(CHUNK)
            if not data:
                if not opts.follow or done.exists() and not (data := f.read(CHUNK)):
                    return
                if not data:
                    await asyncio.sleep(FOLLOW_POLL)
                    when = clock()
                    continue
            if opts.limit_bytes is not None:
                data = data[:opts.limit_bytes - sent]
            sent += len(data)
            if opts.timestamps:
                out, line_start = stamp(data, when, line_start)
            else:
                out = data
            yield out
            if opts.limit_bytes is not None and sent >= opts.limit_bytes:
                return
