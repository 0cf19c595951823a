"""The pod log subresource: read from the kubelet's files under the state directory."""
from __future__ import annotations

import pytest

from kubemu import wire

from . import api, pod  # noqa: F401  (api is a fixture)


def bound_pod(api, name: str, containers: list[str], restarts: int = 0, **meta) -> dict:  # noqa: F811
    obj = pod(name)
    obj["metadata"].update(meta)
    obj["spec"]["containers"] = [{"name": c, "command": ["x"]} for c in containers]
    created = api.call("create", resource="pods", namespace="default", object=obj)
    api.call("bind", name=name, node="node-9", namespace="default")
    current = api.call("get", resource="pods", namespace="default", name=name)
    current["status"]["containerStatuses"] = [{"name": c, "restartCount": restarts, "ready": True,
                                               "state": {"running": {}}, "image": "", "imageID": ""}
                                              for c in containers]
    api.call("update_status", resource="pods", namespace="default", object=current)
    return created


def write_log(api, pod_obj: dict, container: str, count: int, text: str, uid: str | None = None) -> None:  # noqa: F811
    meta = pod_obj["metadata"]
    d = api.dir / "nodes" / "node-9" / "pods" / f"default_{meta['name']}_{uid or meta['uid']}" / container
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{count}.log").write_text(text)


def test_log_current_previous_and_tail(api):  # noqa: F811
    p = bound_pod(api, "talker", ["main"], restarts=1)
    write_log(api, p, "main", 0, "first life\n")
    write_log(api, p, "main", 1, "one\ntwo\nthree\n")
    assert api.call("log", name="talker", namespace="default")["log"] == "one\ntwo\nthree\n"
    assert api.call("log", name="talker", namespace="default", tail_lines=1)["log"] == "three\n"
    assert api.call("log", name="talker", namespace="default", previous=True)["log"] == "first life\n"


def test_mirror_pod_log_comes_from_the_static_pods_directory(api):  # noqa: F811
    p = bound_pod(api, "static-node-9", ["main"], annotations={"kubernetes.io/config.mirror": "abc123"})
    write_log(api, p, "main", 0, "from the manifest\n", uid="abc123")
    assert api.call("log", name="static-node-9", namespace="default")["log"] == "from the manifest\n"


def test_log_errors_read_like_kubectls(api):  # noqa: F811
    bound_pod(api, "duo", ["a", "b"])
    with pytest.raises(wire.BadRequest, match=r"a container name must be specified for pod duo, choose one of: \[a b\]"):
        api.call("log", name="duo", namespace="default")
    with pytest.raises(wire.BadRequest, match="container c is not valid for pod duo"):
        api.call("log", name="duo", namespace="default", container="c")
    with pytest.raises(wire.BadRequest, match='previous terminated container "a" in pod "duo" not found'):
        api.call("log", name="duo", namespace="default", container="a", previous=True)
    api.call("create", resource="pods", namespace="default", object=pod("floating"))
    with pytest.raises(wire.BadRequest, match='pod "floating" does not have a host assigned'):
        api.call("log", name="floating", namespace="default")
    with pytest.raises(wire.NotFound):
        api.call("log", name="ghost", namespace="default")
