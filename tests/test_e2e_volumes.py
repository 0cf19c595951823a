"""Volumes end to end (issue 17 §1, §5), real processes on a `kubemu up --nodes 3 --fast`
cluster: a claim of the default class (`standard`, WaitForFirstConsumer) is provisioned on the
node the scheduler picks for its first pod, the pod writes into it, and the pods that come
after it are kept on that node (VolumeBinding) and read what it wrote; then a StatefulSet of 3
whose pods each write their ordinal into their own volume: kill -9 of web-1's container and
the deletion of the pod web-1 both bring web-1 back on its volume, its data there."""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from tests.conftest import wait_for
from tests.test_e2e import LONG, cluster, container_pid, ready, restarts  # noqa: F401 (cluster: the fixture)
from tests.test_e2e_statefulset import exactly_ready, pods

PY = sys.executable
SELECTED_NODE = "volume.kubernetes.io/selected-node"
HOSTNAME = "kubernetes.io/hostname"

# Each container finds its volume at its mountPath, or (a node without mount namespaces) where
# KUBEMU_MOUNT_DATA says.
NOTE = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
path = os.path.join(os.environ.get("KUBEMU_MOUNT_DATA", "/data"), "note")
print("found:", open(path).read() if os.path.exists(path) else "nothing", flush=True)
if not os.path.exists(path):
    open(path, "w").write("hello from " + os.environ["POD_NAME"])
time.sleep(10**6)
"""
ORDINAL = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
data, name = os.environ.get("KUBEMU_MOUNT_DATA", "/data"), os.environ["POD_NAME"]
path = os.path.join(data, "ordinal")
if not os.path.exists(path):
    open(path, "w").write(name.rsplit("-", 1)[1])
with open(os.path.join(data, "starts"), "a") as f:
    f.write(name + "\n")
time.sleep(10**6)
"""
POD_NAME = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


def container(script: str) -> dict:
    return {"name": "main", "command": [PY, "-c", script], "env": [POD_NAME],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}


def note_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "note"}},
            "spec": {"terminationGracePeriodSeconds": 2, "containers": [container(NOTE)],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "notes"}}]}}


def statefulset() -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
            "spec": {"replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"terminationGracePeriodSeconds": 2, "containers": [container(ORDINAL)]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Mi"}}}}]}}


def volume_dir(cluster, claim: str) -> tuple[str, Path] | None:
    """(the node, the directory) of a Bound claim's volume."""
    pvc = cluster.call("get", "persistentvolumeclaims", claim, namespace="default")
    if not pvc or (pvc.get("status") or {}).get("phase") != "Bound":
        return None
    pv = cluster.call("get", "persistentvolumes", pvc["spec"]["volumeName"])
    if not pv:
        return None
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["key"] == HOSTNAME and term["operator"] == "In"
    return term["values"][0], Path(pv["spec"]["hostPath"]["path"])


def running(cluster, name: str) -> dict | None:
    pod = cluster.call("get", "pods", name, namespace="default")
    return pod if pod and ready(pod) and not pod["metadata"].get("deletionTimestamp") else None


def test_claims_follow_their_pods(cluster):
    cluster.cli("up", "--nodes", "3", "--fast", "--detach")
    api = cluster.api
    wait_for(lambda: cluster.call("get", "storageclasses", "standard"), timeout=LONG, interval=0.25,
             message="the default StorageClass")

    # A claim of the default class, then a pod of it: the scheduler picks the node, the
    # provisioner makes the volume there, the pod writes into it.
    api.create("persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "notes"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Mi"}}}},
        namespace="default")
    assert api.get("persistentvolumeclaims", "notes", "default")["spec"]["storageClassName"] == "standard"
    api.create("pods", note_pod("writer"), namespace="default")
    writer = wait_for(lambda: running(cluster, "writer"), timeout=LONG, interval=0.25, message="the writer running")
    node, directory = wait_for(lambda: volume_dir(cluster, "notes"), timeout=LONG, interval=0.25,
                               message="the claim bound")
    assert writer["spec"]["nodeName"] == node
    assert api.get("persistentvolumeclaims", "notes", "default")["metadata"]["annotations"][SELECTED_NODE] == node
    assert directory.parent == cluster.dir / "nodes" / node / "local-path"
    wait_for(lambda: (directory / "note").exists(), timeout=LONG, interval=0.25,
             message="the writer's note in the volume")
    assert (directory / "note").read_text() == "hello from writer"
    assert "found: nothing" in cluster.cli("logs", "writer").stdout

    # The writer goes; the pods that come after are kept on the volume's node (without the
    # VolumeBinding filter the scores would spread three of them) and read the note.
    cluster.cli("delete", "pod", "writer")
    wait_for(lambda: cluster.call("get", "pods", "writer", namespace="default") is None, timeout=LONG,
             message="the writer gone")
    for i in range(3):
        api.create("pods", note_pod(f"reader-{i}"), namespace="default")
    readers = [wait_for(lambda i=i: running(cluster, f"reader-{i}"), timeout=LONG, interval=0.25,
                        message=f"reader-{i} running") for i in range(3)]
    assert {r["spec"]["nodeName"] for r in readers} == {node}
    for i in range(3):
        assert wait_for(lambda i=i: "found:" in (out := cluster.cli("logs", f"reader-{i}").stdout) and out,
                        timeout=LONG, interval=0.5, message=f"reader-{i}'s log") == "found: hello from writer\n"

    # A StatefulSet of 3, a volume each: each pod writes its ordinal into its own volume.
    manifest = cluster.dir / "web.json"
    manifest.write_text(json.dumps(statefulset()))
    cluster.cli("apply", "-f", str(manifest))
    up = wait_for(lambda: exactly_ready(cluster, ["web-0", "web-1", "web-2"]), timeout=LONG, interval=0.25,
                  message="web-0..2 Running and Ready")
    volumes = {}
    for i in range(3):
        name = f"web-{i}"
        volumes[name] = wait_for(lambda i=i: volume_dir(cluster, f"data-web-{i}"), timeout=LONG, interval=0.25,
                                 message=f"data-web-{i} bound")
        assert up[name]["spec"]["nodeName"] == volumes[name][0]
        wait_for(lambda name=name: (volumes[name][1] / "starts").exists(), timeout=LONG, interval=0.25,
                 message=f"{name}'s first start")
        assert (volumes[name][1] / "ordinal").read_text() == str(i)
    assert len({d for _, d in volumes.values()}) == 3
    web1_volume = volumes["web-1"][1]

    # kill -9 of web-1's container: the same pod restarts on its volume.
    uid = up["web-1"]["metadata"]["uid"]
    os.kill(container_pid(up["web-1"]), signal.SIGKILL)
    wait_for(lambda: (p := running(cluster, "web-1")) and restarts(p) == 1 and p["metadata"]["uid"] == uid,
             timeout=LONG, interval=0.25, message="web-1's container restarted")
    wait_for(lambda: (web1_volume / "starts").read_text() == "web-1\nweb-1\n", timeout=LONG, interval=0.25,
             message="web-1's second start")

    # Deleting the pod web-1: a new web-1, on its volume's node, finds its ordinal there.
    cluster.cli("delete", "pod", "web-1")
    again = wait_for(lambda: (current := exactly_ready(cluster, ["web-0", "web-1", "web-2"]))
                     and current["web-1"]["metadata"]["uid"] != uid and current,
                     timeout=LONG, interval=0.25, message="a new web-1")
    assert again["web-1"]["spec"]["nodeName"] == volumes["web-1"][0]
    assert volume_dir(cluster, "data-web-1") == volumes["web-1"]
    wait_for(lambda: (web1_volume / "starts").read_text() == "web-1\n" * 3, timeout=LONG, interval=0.25,
             message="the new web-1's start")
    assert (web1_volume / "ordinal").read_text() == "1"
    assert sorted(pods(cluster)) == ["web-0", "web-1", "web-2"]
