"""The pod `log` subresource: a container's output, read where its kubelet keeps it.

In Kubernetes the apiserver proxies this to the node's kubelet; in kubemu every node lives
under one state directory on this machine, so the apiserver reads the kubelet's files itself:
`<state>/nodes/<node>/pods/<namespace>_<name>_<uid>/<container>/<restartCount>.log` (a static
pod's directory carries the static pod's uid, which its mirror pod names in its annotation).
Errors are kubectl's: a pod with no node, a container that must be named or does not exist, no
previous instance.
"""
from __future__ import annotations

from pathlib import Path

from kubemu.wire import BadRequest, NotFound

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
MAX_LOG_BYTES = 1024 * 1024  # one reply stays well under the wire's 2 MiB frame


def log_path(state_dir: Path, pod: dict, container: str | None, previous: bool) -> Path:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    name = meta["name"]
    node = spec.get("nodeName")
    if not node:
        raise BadRequest(f'pod "{name}" does not have a host assigned', {"reason": "BadRequest"})
    containers = [c.get("name") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
    if container is None:
        apps = [c.get("name") for c in spec.get("containers") or []]
        if len(apps) != 1:
            raise BadRequest(f"a container name must be specified for pod {name}, choose one of: "
                             f"[{' '.join(apps)}]", {"reason": "BadRequest"})
        container = apps[0]
    if container not in containers:
        raise BadRequest(f"container {container} is not valid for pod {name}", {"reason": "BadRequest"})
    statuses = {c.get("name"): c for c in (status.get("initContainerStatuses") or [])
                + (status.get("containerStatuses") or [])}
    count = int((statuses.get(container) or {}).get("restartCount") or 0) - (1 if previous else 0)
    uid = (meta.get("annotations") or {}).get(MIRROR_ANNOTATION) or meta.get("uid", "")
    path = state_dir / "nodes" / node / "pods" / f"{meta['namespace']}_{name}_{uid}" / container / f"{count}.log"
    if count < 0 or not path.is_file():
        what = f'previous terminated container "{container}"' if previous else f'container "{container}"'
        raise BadRequest(f'{what} in pod "{name}" not found', {"reason": "BadRequest"})
    return path


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
