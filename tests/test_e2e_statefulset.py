"""StatefulSets end to end (issue 17 §5), real processes on a `kubemu up --nodes 3 --fast`
cluster: web-0, web-1, web-2 start in order, each once its predecessor is Ready; kill -9 of
web-1's container restarts it in place, deleting the pod brings a new web-1; a template change
rolls 2, 1, 0 (and `kubemu rollout status|history` report it); scale to 1 deletes web-2 then
web-1; the controller-manager killed -9 in the middle of a scale-up converges to exactly
web-0..2, the pods made before the kill kept (none replaced or deleted)."""
from __future__ import annotations

import json
import os
import signal
import sys

from components.controllers.podutil import parse_time
from tests.conftest import wait_for
from tests.test_e2e import LONG, cluster, container_pid, ready, restarts  # noqa: F401 (cluster: the fixture)

PY = sys.executable
SLEEPER = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); time.sleep(10**6)"


def statefulset(replicas: int, version: str = "1") -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "serviceName": "web",
                 "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                     "terminationGracePeriodSeconds": 2,
                     "containers": [{"name": "web", "command": [PY, "-c", SLEEPER],
                                     "env": [{"name": "VERSION", "value": version}]}]}}}})


def pods(cluster) -> dict[str, dict] | None:
    """The pods of the StatefulSet by name, terminating ones included."""
    listed = cluster.call("list", "pods", namespace="default", label_selector="app=web")
    return None if listed is None else {p["metadata"]["name"]: p for p in listed["items"]}


def terminating(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def version(pod: dict) -> str:
    return next(e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "VERSION")


def exactly_ready(cluster, names: list[str], version_: str | None = None) -> dict | None:
    """Exactly the pods `names`, none terminating, all Running and Ready (of `version_`)."""
    current = pods(cluster)
    if current is None or sorted(current) != sorted(names):
        return None
    if not all(ready(p) and not terminating(p) for p in current.values()):
        return None
    if version_ and not all(version(p) == version_ for p in current.values()):
        return None
    return current


def ready_since(pod: dict) -> float:
    return parse_time(next(c["lastTransitionTime"] for c in pod["status"]["conditions"]
                           if c["type"] == "Ready"))


def watch_rule(cluster, done, broken) -> list:
    """Poll until `done()`; every look at the pods where `broken(pods)` holds (a rule of the
    controller seen broken). A rule checked at each look holds even when two changes fall between
    two looks, which an order of first sightings would misread on a loaded machine."""
    seen = []

    def step():
        current = pods(cluster) or {}
        if broken(current):
            seen.append({name: (version(p), ready(p), terminating(p)) for name, p in current.items()})
        return done()
    wait_for(step, timeout=LONG, interval=0.1, message="the controller to get there")
    return seen


def test_a_statefulset_of_three(cluster, tmp_path):
    cluster.cli("up", "--nodes", "3", "--fast", "--detach")
    manifest = tmp_path / "web.json"

    # Ordered start: each pod is created only once its predecessor is Running and Ready.
    manifest.write_text(statefulset(3))
    assert "statefulset.apps/web created" in cluster.cli("apply", "-f", str(manifest)).stdout
    up = wait_for(lambda: exactly_ready(cluster, ["web-0", "web-1", "web-2"]), timeout=LONG,
                  interval=0.25, message="web-0..2 Running and Ready")
    for before, after in (("web-0", "web-1"), ("web-1", "web-2")):
        assert parse_time(up[after]["metadata"]["creationTimestamp"]) >= ready_since(up[before]), \
            f"{after} was created before {before} was Ready"
    assert up["web-1"]["spec"]["hostname"] == "web-1" and up["web-1"]["spec"]["subdomain"] == "web"
    assert up["web-1"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"
    status = cluster.cli("rollout", "status", "statefulset/web").stdout
    assert status == "partitioned roll out complete: 3 new pods have been updated...\n", status

    # kill -9 of web-1's container: the kubelet restarts it, the same pod.
    uid = up["web-1"]["metadata"]["uid"]
    os.kill(container_pid(up["web-1"]), signal.SIGKILL)
    wait_for(lambda: (p := (pods(cluster) or {}).get("web-1")) and restarts(p) == 1 and ready(p)
             and p["metadata"]["uid"] == uid, timeout=LONG, interval=0.25,
             message="web-1's container restarted")

    # Deleting the pod: a new web-1.
    cluster.cli("delete", "pod", "web-1")
    again = wait_for(lambda: (current := exactly_ready(cluster, ["web-0", "web-1", "web-2"]))
                     and current["web-1"]["metadata"]["uid"] != uid and current,
                     timeout=LONG, interval=0.25, message="a new web-1")
    assert again["web-0"]["metadata"]["uid"] == up["web-0"]["metadata"]["uid"]

    # A template change rolls the pods from the highest ordinal down.
    manifest.write_text(statefulset(3, version="2"))
    cluster.cli("apply", "-f", str(manifest))
    def updated_too_early(current: dict) -> bool:   # web-k new while a higher ordinal is not new and Ready
        names = [f"web-{i}" for i in range(3)]
        new = [n in current and version(current[n]) == "2" and not terminating(current[n]) for n in names]
        done = [new[i] and ready(current[names[i]]) for i in range(3)]
        return any(new[k] and not all(done[k + 1:]) for k in range(3))
    early = watch_rule(cluster, lambda: exactly_ready(cluster, ["web-0", "web-1", "web-2"], "2"),
                       updated_too_early)
    assert not early, f"a lower ordinal was updated before the higher ones were: {early}"
    status = cluster.cli("rollout", "status", "statefulset/web", f"--timeout={LONG:g}s").stdout
    assert status.splitlines()[-1] == "partitioned roll out complete: 3 new pods have been updated...", status
    history = cluster.cli("rollout", "history", "statefulset/web").stdout
    assert history == ("statefulset.apps/web \nREVISION  CHANGE-CAUSE\n1         <none>\n"
                       "2         <none>\n\n"), history

    # Scale to 1: web-2 goes first, web-1 only once web-2 is gone. Checked at every look (two
    # deletions may fall between two looks on a loaded machine, so their order alone would not do).
    cluster.cli("scale", "statefulset/web", "--replicas", "1")
    early = watch_rule(cluster, lambda: exactly_ready(cluster, ["web-0"]),
                       lambda current: "web-2" in current and ("web-1" not in current
                                                                or terminating(current["web-1"])))
    assert not early, f"web-1 went while web-2 was still there: {early}"

    # Scale to 3 with the controller-manager killed -9 as web-1 appears: exactly web-0..2.
    cluster.cli("scale", "statefulset/web", "--replicas", "3")
    wait_for(lambda: "web-1" in (pods(cluster) or {}), timeout=LONG, interval=0.05,
             message="web-1 created")
    pid = wait_for(lambda: cluster.system_pid("controller-manager"), timeout=LONG,
                   message="the controller-manager's pid")
    before = {name: p["metadata"]["uid"] for name, p in wait_for(lambda: pods(cluster)).items()}
    os.kill(pid, signal.SIGKILL)
    uids: dict[str, set[str]] = {}  # every uid seen under each name
    deleted: set[str] = set()

    def converged():
        current = pods(cluster) or {}
        for name, p in current.items():
            uids.setdefault(name, set()).add(p["metadata"]["uid"])
            if terminating(p):
                deleted.add(name)
        return exactly_ready(cluster, ["web-0", "web-1", "web-2"])
    after = wait_for(converged, timeout=LONG, interval=0.25,
                     message="the scale-up to converge after the kill")
    assert {"web-0", "web-1"} <= set(before), before
    # the pods made before the kill are the ones that stay: none replaced, none deleted
    assert {name: after[name]["metadata"]["uid"] for name in before} == before, (before, uids)
    assert all(len(seen) == 1 for seen in uids.values()) and not deleted, (uids, deleted)
