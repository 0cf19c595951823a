"""The scheduler as a real process against a real 3-replica store and apiserver, and its
scheduling loop's write slots in-process."""
from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from components.scheduler.scheduler import DEFAULT_PARALLEL_BINDS, Scheduler
from components.scheduling.filters import pod_requests
from kubemu.api.quantity import cpu_millis
from kubemu.apiclient import SyncApiClient
from tests.components.apiserver import APIServerEnv
from tests.conftest import wait_for

from . import SchedulerProc, node, pod, scheduled_condition

INSUFFICIENT_CPU = "0/2 nodes are available: 2 Insufficient cpu."


@pytest.fixture
def cluster(state_dir):
    env = APIServerEnv(state_dir)
    try:
        env.start()
        with SyncApiClient(env.endpoint, timeout=15) as api:
            yield env, api
    finally:
        env.stop()


@pytest.fixture
def scheduler(cluster):
    env, _ = cluster
    proc = SchedulerProc(env)
    try:
        yield proc
    finally:
        proc.stop()


def pods_by_name(api) -> dict:
    return {p["metadata"]["name"]: p for p in api.list_all("pods", namespace="default")["items"]}


def bound(api) -> dict:
    """pod name -> node, for the bound pods."""
    return {name: p["spec"]["nodeName"] for name, p in pods_by_name(api).items() if p["spec"].get("nodeName")}


def events(api, reason: str) -> list:
    return [e for e in api.list_all("events", namespace="default")["items"] if e["reason"] == reason]


def test_binds_within_resources_reports_no_fit_and_binds_it_when_a_node_joins(cluster, scheduler):
    _, api = cluster
    for name in ("node-1", "node-2"):
        api.create("nodes", node(name, cpu="1", memory="1Gi"))
    scheduler.start()   # it has listed both nodes: no decision is made with one only
    for i in range(3):
        api.create("pods", pod(f"p{i}", cpu="600m"), namespace="default")

    def one_unschedulable():
        pods = pods_by_name(api)
        placed = [p for p in pods.values() if p["spec"].get("nodeName")]
        waiting = [p for p in pods.values() if (scheduled_condition(p) or {}).get("status") == "False"
                   and scheduled_condition(p)["message"].startswith(INSUFFICIENT_CPU)]
        return len(placed) == 2 and len(waiting) == 1 and (placed, waiting[0])
    placed, waiting = wait_for(one_unschedulable, message="two pods bound and one unschedulable")
    assert sorted(p["spec"]["nodeName"] for p in placed) == ["node-1", "node-2"]   # 600m + 600m > 1 cpu
    for p in placed:
        assert scheduled_condition(p)["status"] == "True"
    cond = scheduled_condition(waiting)
    assert cond["reason"] == "Unschedulable" and cond["lastTransitionTime"]
    assert waiting["status"]["phase"] == "Pending"   # the rest of the status is untouched

    name = waiting["metadata"]["name"]
    failed = wait_for(lambda: [e for e in events(api, "FailedScheduling")
                               if e["involvedObject"]["name"] == name and e["message"] == cond["message"]],
                      message="a FailedScheduling event")
    assert failed[0]["type"] == "Warning"
    assert failed[0]["source"]["component"] == "default-scheduler"
    scheduled = wait_for(lambda: len(events(api, "Scheduled")) == 2 and events(api, "Scheduled"),
                         message="two Scheduled events")
    assert {e["message"] for e in scheduled} == {
        f"Successfully assigned default/{p['metadata']['name']} to {p['spec']['nodeName']}" for p in placed}

    api.create("nodes", node("node-3", cpu="1", memory="1Gi"))   # a node joins: the pod is retried
    wait_for(lambda: bound(api).get(name) == "node-3", message=f"{name} to be bound to node-3")
    assert scheduled_condition(pods_by_name(api)[name])["status"] == "True"
    assert scheduler.stop() == 0, scheduler.log_text()
    assert "Traceback" not in scheduler.log_text()


def test_node_selectors_and_taints(cluster, scheduler):
    _, api = cluster
    api.create("nodes", node("ssd", labels={"disk": "ssd"}))
    api.create("nodes", node("gpu", labels={"accel": "gpu"},
                             taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    api.create("nodes", node("plain"))
    scheduler.start()
    api.create("pods", pod("wants-ssd", nodeSelector={"disk": "ssd"}), namespace="default")
    api.create("pods", pod("gpu-job", nodeSelector={"accel": "gpu"},
                           tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                         "effect": "NoSchedule"}]), namespace="default")
    for i in range(6):
        api.create("pods", pod(f"plain-{i}", cpu="100m"), namespace="default")
    api.create("pods", pod("wants-nvme", nodeSelector={"disk": "nvme"}), namespace="default")

    wait_for(lambda: len(bound(api)) == 8, message="eight pods bound")
    placed = bound(api)
    assert placed["wants-ssd"] == "ssd" and placed["gpu-job"] == "gpu"
    assert all(placed[f"plain-{i}"] in ("ssd", "plain") for i in range(6))   # nobody tolerates gpu's taint

    def nvme_condition():
        cond = scheduled_condition(pods_by_name(api)["wants-nvme"])
        return cond if cond and cond["status"] == "False" else None
    cond = wait_for(nvme_condition, message="wants-nvme to be reported unschedulable")
    assert cond["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, "
        "2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling.")

    api.patch("nodes", "plain", {"metadata": {"labels": {"disk": "nvme"}}})   # a node changes
    wait_for(lambda: bound(api).get("wants-nvme") == "plain", message="wants-nvme bound to plain")


def test_kill_9_mid_way_then_restart_binds_the_rest_once_each(cluster, scheduler):
    env, api = cluster
    nodes, per_node, total = 4, 25, 100
    for i in range(nodes):   # room for exactly `total` pods: any double counting would show
        api.create("nodes", node(f"node-{i}", cpu=f"{per_node * 100}m", memory="64Gi"))
    for i in range(total):
        api.create("pods", pod(f"w-{i}", cpu="100m", memory="16Mi"), namespace="default")
    scheduler.args = ["--parallel-binds", "1"]   # slow enough to be caught half-way
    scheduler.start()
    wait_for(lambda: len(bound(api)) >= 10, message="the first pods bound")
    scheduler.kill()
    at_kill = bound(api)
    assert len(at_kill) < total, "the scheduler finished before it could be killed"

    scheduler.start()
    wait_for(lambda: len(bound(api)) == total, message="every pod bound after the restart")
    after = bound(api)
    assert all(after[name] == node_name for name, node_name in at_kill.items())
    used = Counter()
    for p in pods_by_name(api).values():
        used[p["spec"]["nodeName"]] += pod_requests(p).cpu
    assert all(cpu <= cpu_millis(f"{per_node * 100}m") for cpu in used.values()), used
    bindings = Counter()
    for line in env.audit_path.read_text().splitlines():
        entry = json.loads(line)
        if entry["resource"] == "pods/binding" and entry["code"] == 200:
            bindings[entry["name"]] += 1
    assert bindings == Counter({f"w-{i}": 1 for i in range(total)})
    assert "Traceback" not in scheduler.log_text()


# --- VolumeBinding --------------------------------------------------------------------------

SELECTED_NODE = "volume.kubernetes.io/selected-node"
HOSTNAME = "kubernetes.io/hostname"


def storage_class(name: str, mode: str = "WaitForFirstConsumer") -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete", "volumeBindingMode": mode}


def claim(name: str, cls: str = "standard") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}


def volume(name: str, on: str, claim_obj: dict | None = None) -> dict:
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
          "spec": {"storageClassName": "standard", "capacity": {"storage": "1Gi"},
                   "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Delete",
                   "hostPath": {"path": f"/tmp/{name}", "type": "DirectoryOrCreate"},
                   "nodeAffinity": {"required": {"nodeSelectorTerms": [
                       {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [on]}]}]}}}}
    if claim_obj is not None:
        meta = claim_obj["metadata"]
        pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default",
                                  "name": meta["name"], "uid": meta["uid"]}
    return pv


def provision(api, name: str) -> str:
    """What the provisioner and the PV controller do for claim `name` once it has a node: a
    volume there, bound both ways. The node's name."""
    pvc = api.get("persistentvolumeclaims", name, "default")
    node_name = pvc["metadata"]["annotations"][SELECTED_NODE]
    api.create("persistentvolumes", volume(f"pvc-{name}", node_name, pvc))
    api.patch("persistentvolumeclaims", name, {"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                                               "spec": {"volumeName": f"pvc-{name}"}}, "default")
    api.patch("persistentvolumeclaims", name, {"status": {"phase": "Bound"}}, "default", subresource="status")
    return node_name


def pvc_pod(name: str, claim_name: str) -> dict:
    return pod(name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}])


def test_volume_binding_waits_for_the_claim_then_binds_on_its_node(cluster, scheduler):
    _, api = cluster
    for name in ("node-1", "node-2", "node-3"):
        api.create("nodes", node(name))
    api.create("storageclasses", storage_class("standard"))
    api.create("storageclasses", storage_class("fast", mode="Immediate"))
    scheduler.start()

    api.create("pods", pvc_pod("orphan", "nothing"), namespace="default")
    api.create("persistentvolumeclaims", claim("data"), namespace="default")
    api.create("pods", pvc_pod("db", "data"), namespace="default")
    api.create("persistentvolumeclaims", claim("quick", cls="fast"), namespace="default")
    api.create("pods", pvc_pod("immediate", "quick"), namespace="default")
    api.create("pods", pod("plain"), namespace="default")   # not held up by the others

    selected = wait_for(lambda: (api.get("persistentvolumeclaims", "data", "default")["metadata"].get("annotations")
                                 or {}).get(SELECTED_NODE), message="the claim to get a selected node")
    wait_for(lambda: "plain" in bound(api), message="the plain pod bound")
    assert "db" not in bound(api)   # its claim is not bound yet

    def unschedulable(name):
        cond = scheduled_condition(pods_by_name(api)[name]) or {}
        return cond.get("status") == "False" and cond["message"]
    suffix = " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    assert wait_for(lambda: unschedulable("orphan"), message="orphan unschedulable") == \
        '0/3 nodes are available: persistentvolumeclaim "nothing" not found.' + suffix
    # the claim was created just before its pod, but the claims' watch is not the pods': an
    # attempt made before the scheduler saw the claim says it is not found, and the claim's
    # arrival moves the pod back to the queue
    immediate = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims." + suffix
    wait_for(lambda: unschedulable("immediate") == immediate, message="immediate unschedulable for its claim")

    assert provision(api, "data") == selected
    wait_for(lambda: bound(api).get("db") == selected, message="db bound to the claim's node")

    # the claim is bound now: a new pod of it is kept on that node, whatever the scores say
    api.delete("pods", "db", "default", grace_period_seconds=0)   # no kubelet here
    wait_for(lambda: "db" not in pods_by_name(api), message="db gone")
    for i in range(3):
        api.create("pods", pvc_pod(f"db-{i}", "data"), namespace="default")
    wait_for(lambda: all(bound(api).get(f"db-{i}") == selected for i in range(3)),
             message="every pod of the claim on its node")
    assert "Traceback" not in scheduler.log_text()


def test_volume_binding_times_out_and_tries_again(cluster):
    env, api = cluster
    scheduler = SchedulerProc(env, "--volume-bind-timeout", "1", "--backoff-initial", "0.2", "--backoff-max", "0.5")
    try:
        api.create("nodes", node("node-1"))
        api.create("storageclasses", storage_class("standard"))
        scheduler.start()
        api.create("persistentvolumeclaims", claim("data"), namespace="default")
        api.create("pods", pvc_pod("db", "data"), namespace="default")
        timeout = 'running PreBind plugin "VolumeBinding": binding volumes: timed out waiting for the condition'
        def timeouts() -> int:
            return sum(e.get("count", 1) for e in events(api, "FailedScheduling") if e["message"] == timeout)
        wait_for(lambda: timeouts() >= 2, message="the bind to time out twice")
        assert "db" not in bound(api)
        provision(api, "data")
        wait_for(lambda: bound(api).get("db") == "node-1", message="db bound once its claim is")
        assert "Traceback" not in scheduler.log_text()
    finally:
        scheduler.stop()


def test_volume_binding_binds_a_matching_local_volume_and_keeps_the_pod_on_its_node(cluster, scheduler):
    _, api = cluster
    for name in ("node-1", "node-2", "node-3"):
        api.create("nodes", node(name))
    local = storage_class("local")
    local["provisioner"] = "kubernetes.io/no-provisioner"   # static volumes only
    api.create("storageclasses", local)
    pv = volume("disk-2", "node-2")
    pv["spec"]["storageClassName"] = "local"
    api.create("persistentvolumes", pv)
    api.patch("persistentvolumes", "disk-2", {"status": {"phase": "Available"}}, subresource="status")
    scheduler.start()
    api.create("persistentvolumeclaims", claim("db", cls="local"), namespace="default")
    api.create("pods", pvc_pod("db", "db"), namespace="default")

    ref = wait_for(lambda: api.get("persistentvolumes", "disk-2")["spec"].get("claimRef"),
                   message="the scheduler to bind the volume to the claim")
    pvc = api.get("persistentvolumeclaims", "db", "default")
    assert (ref["namespace"], ref["name"], ref["uid"]) == ("default", "db", pvc["metadata"]["uid"])
    assert api.get("persistentvolumes", "disk-2")["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert "db" not in bound(api)
    # the PV controller's part: the claim's side of the binding
    api.patch("persistentvolumeclaims", "db", {"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                                               "spec": {"volumeName": "disk-2"}}, "default")
    api.patch("persistentvolumeclaims", "db", {"status": {"phase": "Bound"}}, "default", subresource="status")
    wait_for(lambda: bound(api).get("db") == "node-2", message="db bound to the volume's node")
    assert "Traceback" not in scheduler.log_text()


def test_at_most_parallel_binds_writes_are_in_flight_and_the_loop_goes_on_as_they_end():
    """The scheduling loop takes a write slot per decision (in-process, no API: each decision's
    write waits on a gate): the writes in flight never pass the bound, the loop waits at it,
    and every decision is made once the writes end."""
    assert DEFAULT_PARALLEL_BINDS >= 64  # a burst of pods must not wait on bind round trips

    async def body():
        s = Scheduler("ipc:///nonexistent/api.sock", parallel_binds=3)
        keys = [f"default/p{i}" for i in range(10)]
        for key in keys:
            s.queue.add(key)
        gate, in_flight, peak, decided = asyncio.Event(), [0], [0], []

        async def write(key):
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            await gate.wait()
            in_flight[0] -= 1

        def attempt(key, now):
            decided.append(key)
            s.queue.delete(key)
            return write(key)

        s._attempt = attempt
        loop_task = asyncio.create_task(s._schedule_loop())
        for _ in range(50):
            await asyncio.sleep(0)
        assert (peak[0], len(decided)) == (3, 3)  # three writes out: the next decision waits for a slot
        gate.set()
        for _ in range(200):
            await asyncio.sleep(0)
            if len(decided) == len(keys) and in_flight[0] == 0:
                break
        loop_task.cancel()
        await asyncio.gather(loop_task, return_exceptions=True)
        await s.api.close()
        return sorted(decided), peak[0]

    decided, peak = asyncio.run(body())
    assert decided == sorted(f"default/p{i}" for i in range(10)) and peak == 3
