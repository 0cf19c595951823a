"""The kubelet as a node of the cluster, with real processes: a store, an apiserver, and a
kubelet under init with --api. Its Node and Lease, mirror pods, API pods run, restarted,
reported and deleted gracefully; static pods carry on while the apiserver is down."""
from __future__ import annotations

import itertools
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from components.controllers.podutil import parse_time
from kubemu import cluster, wire
from kubemu.statedir import StateDir
from tests.components.apiserver import api  # noqa: F401  (a module-scoped fixture)
from tests.conftest import DEADLINE, alive, spawn_marked, terminate, wait_for
from tests.kubelet.test_agent import needs_pod_networks

PY = sys.executable
_names = itertools.count(1)


class ApiNode:
    """One node: init + kubelet --api, in the test's own state directory."""

    def __init__(self, state_dir: Path, api_env, extra_args: str = ""):
        self.api = api_env
        self.name = f"node-{next(_names)}"
        self.state = StateDir(state_dir)
        self.dir = cluster.write_node(
            self.state, self.name, restart_sec=0.5, watchdog_sec=30,
            kubelet_args=f"--api {api_env.endpoint} --cpu 2 --memory 2Gi --node-labels tier=test "
                         "--backoff-initial 0.5 --backoff-max 2 --file-check-frequency 2 "
                         f"--node-status-update-frequency 0.3 --node-lease-duration-seconds 4 {extra_args}")
        self.init = spawn_marked([PY, "-m", "init", "--node-dir", str(self.dir)], state_dir)

    def get(self, resource: str, name: str, namespace: str | None = "default") -> dict | None:
        params = {"resource": resource, "name": name}
        if namespace:
            params["namespace"] = namespace
        try:
            return self.api.call("get", **params)
        except wire.NotFound:
            return None

    def pods(self) -> list[dict]:
        return self.api.call("list", resource="pods", field_selector=f"spec.nodeName={self.name}")["items"]

    def manifest(self, name: str, containers: list[dict]) -> None:
        path = self.dir / "manifests" / f"{name}.yaml"
        # written whole under a dotfile name (the kubelet skips those, as the real one does), then
        # renamed; a visible "web.tmp" would be a manifest of its own for a moment
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                   "spec": {"containers": containers, "terminationGracePeriodSeconds": 2}}))
        os.rename(tmp, path)

    def log(self) -> str:
        path = self.dir / "logs" / "kubelet.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        terminate(self.init)


@pytest.fixture
def node(state_dir, api):  # noqa: F811
    n = ApiNode(state_dir, api)
    try:
        wait_for(lambda: n.get("nodes", n.name, None), message=f"{n.name} to register")
        yield n
    finally:
        for pod in n.pods():  # leave the module's apiserver clean for the next test
            try:
                api.call("delete", resource="pods", namespace=pod["metadata"]["namespace"],
                         name=pod["metadata"]["name"], grace_period_seconds=0)
            except wire.NotFound:
                pass
        n.stop()


def sleeper(name="main", extra: str = "") -> dict:
    return {"name": name, "command": [PY, "-c", f"import time\n{extra}\ntime.sleep(3600)"]}


def condition(obj: dict, ctype: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


def running_pid(pod: dict | None) -> int | None:
    for c in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if "running" in c.get("state", {}):
            return int(c["containerID"].removeprefix("process://"))
    return None


def test_node_registers_with_capacity_and_renews_its_lease(node):
    n = node.get("nodes", node.name, None)
    assert n["status"]["capacity"]["cpu"] == "2" and n["status"]["allocatable"]["memory"] == "2Gi"
    assert n["metadata"]["labels"]["tier"] == "test"
    assert n["metadata"]["labels"]["kubernetes.io/hostname"] == node.name
    assert condition(n, "Ready")["status"] == "True"
    assert n["status"]["nodeInfo"]["kubeletVersion"]
    first = wait_for(lambda: node.get("leases", node.name, "kube-node-lease"), message="the lease")
    assert first["spec"]["holderIdentity"] == node.name and first["spec"]["leaseDurationSeconds"] == 4
    t0 = parse_time(first["spec"]["renewTime"])
    wait_for(lambda: parse_time(node.get("leases", node.name, "kube-node-lease")["spec"]["renewTime"]) > t0,
             message="the lease to be renewed")


def test_not_ready_node_gets_ready_again(node, api):  # noqa: F811
    n = node.get("nodes", node.name, None)
    conds = [dict(c, status="Unknown", reason="NodeStatusUnknown") if c["type"] == "Ready" else c
             for c in n["status"]["conditions"]]
    api.call("patch", resource="nodes", name=node.name, patch={"status": {"conditions": conds}},
             subresource="status")
    wait_for(lambda: condition(node.get("nodes", node.name, None), "Ready")["status"] == "True",
             message="the kubelet to post Ready again")


def test_static_pod_has_a_mirror_pod_that_comes_back_when_deleted(node, api):  # noqa: F811
    node.manifest("web", [sleeper()])
    name = f"web-{node.name}"
    mirror = wait_for(lambda: (p := node.get("pods", name)) and running_pid(p) and p, message="a running mirror pod")
    assert "kubernetes.io/config.mirror" in mirror["metadata"]["annotations"]
    assert mirror["spec"]["nodeName"] == node.name
    pid = running_pid(mirror)
    api.call("delete", resource="pods", namespace="default", name=name)
    wait_for(lambda: (p := node.get("pods", name)) and p["metadata"]["uid"] != mirror["metadata"]["uid"]
             and not p["metadata"].get("deletionTimestamp"), message="the mirror pod to be made again")
    assert alive(pid), "deleting a mirror pod must not touch the static pod"

    os.unlink(node.dir / "manifests" / "web.yaml")
    wait_for(lambda: node.get("pods", name) is None, message="the mirror pod of a removed manifest to go")
    wait_for(lambda: not alive(pid), message="the static pod to stop")


def test_api_pod_runs_restarts_reports_and_is_deleted_gracefully(node, api, tmp_path):  # noqa: F811
    marker, armed = tmp_path / "got-sigterm", tmp_path / "armed"
    handler = (f"import os, signal, sys\n"
               f"def bye(*_):\n    open({str(marker)!r}, 'w').close(); sys.exit(0)\n"
               f"signal.signal(signal.SIGTERM, bye)\n"
               f"open({str(armed)!r}, 'w').write(str(os.getpid()))")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job"},
           "spec": {"nodeName": node.name, "terminationGracePeriodSeconds": 20, "containers": [sleeper(extra=handler)]}}
    api.call("create", resource="pods", namespace="default", object=pod)
    running = wait_for(lambda: (p := node.get("pods", "job")) and p["status"].get("phase") == "Running"
                       and running_pid(p) and p, message="the API pod to run")
    assert condition(running, "Ready")["status"] == "True"
    pid = running_pid(running)

    # What the node lifecycle controller does while a node is unreachable: the kubelet, once it
    # sees the API's copy differ from what it knows, posts its status again.
    not_ready = [dict(c, status="False") if c["type"] == "Ready" else c for c in running["status"]["conditions"]]
    api.call("patch", resource="pods", namespace="default", name="job",
             patch={"status": {"conditions": not_ready}}, subresource="status")
    wait_for(lambda: condition(node.get("pods", "job"), "Ready")["status"] == "True",
             message="the kubelet to restore the pod's Ready condition")

    os.kill(pid, signal.SIGKILL)
    restarted = wait_for(lambda: (p := node.get("pods", "job")) and running_pid(p) not in (None, pid) and p,
                         message="the kubelet to restart the container")
    assert restarted["status"]["containerStatuses"][0]["restartCount"] == 1
    pid = running_pid(restarted)
    wait_for(lambda: armed.exists() and armed.read_text() == str(pid), message="the new container's SIGTERM handler")

    api.call("delete", resource="pods", namespace="default", name="job")
    wait_for(lambda: node.get("pods", "job") is None, message="the pod object to be removed by the kubelet")
    assert marker.exists(), "the container got SIGTERM and exited within its grace"
    assert not alive(pid)
    events = api.call("list", resource="events", namespace="default")["items"]
    reasons = {e["reason"] for e in events if e["involvedObject"].get("name") == "job"}
    assert {"Started", "Killing"} <= reasons, reasons


def test_static_pods_run_on_while_the_apiserver_is_down(node, api):  # noqa: F811
    node.manifest("calm", [sleeper()])
    name = f"calm-{node.name}"
    pid = wait_for(lambda: running_pid(node.get("pods", name)), message="the mirror pod to show a running container")
    api.kill_apiserver()
    try:
        node.manifest("later", [sleeper()])  # the kubelet keeps serving its manifests
        later = node.dir / "pods"
        wait_for(lambda: any(p.name.startswith(f"default_later-{node.name}_") for p in later.iterdir()),
                 message="a static pod to start without an apiserver")
        assert alive(pid)
    finally:
        api.start_apiserver()
    wait_for(lambda: running_pid(node.get("pods", f"later-{node.name}")), message="the new mirror pod once the API is back")
    assert running_pid(node.get("pods", name)) == pid


# --- the ConfigMaps and Secrets the node's pods read (in process, against the real apiserver) --

def test_an_edit_of_what_a_pod_reads_reaches_the_agent_and_the_volume(api, tmp_path):  # noqa: F811
    """ConfigMap edit -> the agent's watch -> on_objects -> the volume rewritten (what the
    kubelet does on that callback)."""
    import asyncio
    import uuid

    from kubelet import volumedirs
    from kubelet.apiagent import ApiAgent
    from kubelet.configsource import Unavailable
    from kubelet.nodestatus import NodeConfig
    from tests.conftest import DEADLINE

    suffix = uuid.uuid4().hex[:8]
    node_name, cm_name, pod_name = f"n-{suffix}", f"cfg-{suffix}", f"web-{suffix}"
    ref = ("configmaps", "default", cm_name)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name},
           "spec": {"nodeName": node_name, "containers": [{"name": "app", "command": ["true"],
                    "envFrom": [{"configMapRef": {"name": cm_name}}]}],
                    "volumes": [{"name": "cfg", "configMap": {"name": cm_name}}]}}
    conf = tmp_path / "volumes" / "kubernetes.io~configmap" / "cfg" / "A"

    async def until(condition, what):
        deadline = asyncio.get_running_loop().time() + DEADLINE
        while not condition():
            assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.02)

    def cached():
        try:
            return agent.lookup(*ref)
        except Unavailable:
            return "unavailable"

    async def scenario():
        nonlocal agent
        changed, bound = [], {}

        def on_objects(refs):
            changed.append(refs)
            if bound:
                assert volumedirs.set_up(str(tmp_path), bound["pod"], agent.lookup, [], []) == {}

        agent = ApiAgent(api.endpoint, NodeConfig(node_name, "1", "1Gi"), lambda pods: None,
                         on_objects=on_objects)
        runner = asyncio.create_task(agent.run())
        try:
            await agent.api.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": cm_name}, "data": {"A": "1"}},
                                   namespace="default")
            assert cached() == "unavailable"  # no pod of this node reads it
            await agent.api.create("pods", pod, namespace="default")
            created = await agent.api.get("pods", pod_name, namespace="default")
            assert await agent.wait_for_objects(created, DEADLINE)
            assert agent.objects_synced(created)
            assert cached()["data"] == {"A": "1"}
            bound["pod"] = created
            assert volumedirs.set_up(str(tmp_path), created, agent.lookup, [], []) == {}
            assert conf.read_text() == "1"
            await agent.api.patch("configmaps", cm_name, {"data": {"A": "2"}}, namespace="default")
            await until(lambda: {ref} in changed and conf.read_text() == "2", "the edit in the file")
            await agent.api.delete("pods", pod_name, namespace="default", grace_period_seconds=0)
            await until(lambda: cached() == "unavailable", "the watch to stop with the pod")
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await agent.api.close()

    agent = None
    asyncio.run(scenario())
    api.call("delete", resource="configmaps", name=cm_name, namespace="default")
    api.call("delete", resource="nodes", name=node_name)


def test_cni_node_is_not_ready_until_it_has_a_pod_cidr_and_its_network_config(state_dir, api):  # noqa: F811
    # No fabric is needed for this: no pod runs. The podCIDR is what node IPAM would set.
    n = ApiNode(state_dir, api, "--network-mode cni --cluster-cidr 10.244.0.0/16 --fabric-netns /nonexistent")
    try:
        node = wait_for(lambda: n.get("nodes", n.name, None), message=f"{n.name} to register")
        ready = condition(node, "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady")
        assert ready["message"] == ("container runtime network not ready: NetworkReady=false "
                                    "reason:NetworkPluginNotReady message:Network plugin returns error: "
                                    "cni plugin not initialized")
        conflist = n.dir / "cni" / "net.d" / "10-kubemu.conflist"
        assert not conflist.exists()
        api.call("patch", resource="nodes", name=n.name,
                 patch={"spec": {"podCIDR": "10.244.3.0/24", "podCIDRs": ["10.244.3.0/24"]}})
        wait_for(lambda: condition(n.get("nodes", n.name, None), "Ready")["status"] == "True",
                 message="Ready once the network config is written")
        written = json.loads(conflist.read_text())
        bridge = written["plugins"][0]
        assert bridge["bridge"] == "kmbr3" and bridge["ipam"]["ranges"] == [[{"subnet": "10.244.3.0/24"}]]
        assert bridge["ipam"]["dataDir"] == str(n.dir / "cni" / "networks")
    finally:
        n.stop()


def test_host_network_node_says_why_in_a_condition(state_dir, api):  # noqa: F811
    n = ApiNode(state_dir, api, "--network-mode host --network-mode-reason 'not root'")
    try:
        node = wait_for(lambda: n.get("nodes", n.name, None), message=f"{n.name} to register")
        assert condition(node, "Ready")["status"] == "True"
        unavailable = condition(node, "NetworkUnavailable")
        assert (unavailable["status"], unavailable["reason"], unavailable["message"]) == \
            ("False", "KubemuHostNetwork", "pods share the host's network: not root")
    finally:
        n.stop()


# --- ConfigMaps and Secrets in a real kubelet's pods -------------------------------------------------

def waiting(pod: dict | None) -> dict:
    for c in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        return c["state"].get("waiting") or {}
    return {}


def pod_events(api, name: str, reason: str) -> list[dict]:  # noqa: F811
    return [e for e in api.call("list", resource="events", namespace="default")["items"]
            if e["involvedObject"].get("name") == name and e["reason"] == reason]


def test_secret_in_env_and_a_missing_configmap_waits_in_config_error_until_created(node, api, tmp_path):  # noqa: F811
    out = tmp_path / "env"
    api.call("create", resource="secrets", namespace="default", object={
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"password": "s3cret"}})
    write_env = (f"import os\nopen({str(out)!r}, 'w').write(os.environ['PASSWORD'] + ' ' + "
                 "os.environ['COLOR'] + ' ' + os.environ['GREETING'])")
    container = dict(sleeper(extra=write_env), env=[
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "colors", "key": "sky"}}},
        {"name": "GREETING", "value": "a $(COLOR) sky"}])
    api.call("create", resource="pods", namespace="default", object={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "envs"},
        "spec": {"nodeName": node.name, "terminationGracePeriodSeconds": 1, "containers": [container]}})
    try:
        blocked = wait_for(lambda: (p := node.get("pods", "envs"))
                           and waiting(p).get("reason") == "CreateContainerConfigError" and p,
                           message="the container to wait for its ConfigMap")
        assert waiting(blocked)["message"] == 'configmap "colors" not found'
        status = blocked["status"]["containerStatuses"][0]
        assert status["restartCount"] == 0 and status["lastState"] == {}
        assert wait_for(lambda: pod_events(api, "envs", "Failed"), message="the Failed Event")[0]["message"] == \
            'Error: configmap "colors" not found'
        api.call("create", resource="configmaps", namespace="default", object={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "colors"}, "data": {"sky": "blue"}})
        running = wait_for(lambda: (p := node.get("pods", "envs")) and running_pid(p) and p,
                           message="the container to start once its ConfigMap exists")
        assert running["status"]["containerStatuses"][0]["restartCount"] == 0
        assert wait_for(lambda: out.exists() and out.read_text(),
                        message="the container's env") == "s3cret blue a blue sky"
    finally:
        api.call("delete", resource="secrets", name="creds", namespace="default")
        try:
            api.call("delete", resource="configmaps", name="colors", namespace="default")
        except wire.NotFound:
            pass


def test_configmap_volume_holds_its_keys_and_an_edit_reaches_the_running_container(node, api, tmp_path):  # noqa: F811
    """On this node pods share the node's file system: the container finds the volume by its
    KUBEMU_MOUNT_ variable, and reads the file the kubelet keeps up to date."""
    seen = tmp_path / "seen"
    reader = (f"import os, time\npath = os.path.join(os.environ['KUBEMU_MOUNT_ETC_CONFIG'], 'color')\n"
              f"while True:\n    open({str(seen)!r} + '.tmp', 'w').write(open(path).read())\n"
              f"    os.rename({str(seen)!r} + '.tmp', {str(seen)!r}); time.sleep(0.1)")
    api.call("create", resource="configmaps", namespace="default", object={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "paint"}, "data": {"color": "red"}})
    api.call("create", resource="pods", namespace="default", object={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vol"},
        "spec": {"nodeName": node.name, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "command": [PY, "-c", reader],
                                 "volumeMounts": [{"name": "cfg", "mountPath": "/etc/config"}]}],
                 "volumes": [{"name": "cfg", "configMap": {"name": "paint"}}]}})
    try:
        wait_for(lambda: seen.exists() and seen.read_text() == "red", message="the file in the container")
        pod_dir = next((node.dir / "pods").glob("default_vol_*"))
        files = pod_dir / "volumes" / "kubernetes.io~configmap" / "cfg"
        assert (files / "color").read_text() == "red" and os.readlink(files / "color") == "..data/color"
        api.call("patch", resource="configmaps", namespace="default", name="paint", patch={"data": {"color": "green"}})
        wait_for(lambda: seen.read_text() == "green", message="the edit in the running container's file")
        assert "volumes are not mounted in containers: pods share the node's mount namespace" in node.log()
    finally:
        api.call("delete", resource="configmaps", name="paint", namespace="default")


def test_a_missing_host_path_directory_is_failed_mount_and_starts_nothing(node, api):  # noqa: F811
    api.call("create", resource="pods", namespace="default", object={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hp"},
        "spec": {"nodeName": node.name, "terminationGracePeriodSeconds": 1,
                 "containers": [dict(sleeper(), volumeMounts=[{"name": "data", "mountPath": "/data"}])],
                 "volumes": [{"name": "data", "hostPath": {"path": "/nonexistent/kubemu", "type": "Directory"}}]}})
    failed = wait_for(lambda: pod_events(api, "hp", "FailedMount"), message="a FailedMount Event")
    assert failed[0]["type"] == "Warning"
    assert failed[0]["message"] == ('MountVolume.SetUp failed for volume "data" : hostPath type check failed: '
                                    '/nonexistent/kubemu is not a directory')
    p = node.get("pods", "hp")
    assert waiting(p) == {"reason": "ContainerCreating"} and p["status"]["phase"] == "Pending"


def test_a_claim_is_mounted_once_bound_and_its_volume_outlives_the_pod(node, api, tmp_path):  # noqa: F811
    """A pod of a claim that is not bound yet waits (FailedMount, retried); once the claim is
    bound its volume's directory is made (DirectoryOrCreate) and is what the container writes
    into, through the pod's link to it."""
    data = tmp_path / "volume"
    api.call("create", resource="persistentvolumeclaims", namespace="default", object={
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "store"},
        "spec": {"storageClassName": "", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    writer = "import os\nopen(os.path.join(os.environ['KUBEMU_MOUNT_DATA'], 'out'), 'w').write('hello')"
    api.call("create", resource="pods", namespace="default", object={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "claimer"},
        "spec": {"nodeName": node.name, "terminationGracePeriodSeconds": 1,
                 "containers": [dict(sleeper(extra=writer), volumeMounts=[{"name": "data", "mountPath": "/data"}])],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "store"}}]}})
    try:
        failed = wait_for(lambda: pod_events(api, "claimer", "FailedMount"), message="a FailedMount Event")
        assert failed[0]["message"] == (
            'MountVolume.SetUp failed for volume "data" : error processing PVC default/store: PVC default/store '
            'has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")')
        assert waiting(node.get("pods", "claimer")) == {"reason": "ContainerCreating"}

        pvc = node.get("persistentvolumeclaims", "store")
        api.call("create", resource="persistentvolumes", object={
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-store"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "hostPath": {"path": str(data), "type": "DirectoryOrCreate"},
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "store",
                                  "uid": pvc["metadata"]["uid"]}}})
        api.call("patch", resource="persistentvolumeclaims", namespace="default", name="store",
                 patch={"spec": {"volumeName": "pv-store"}}, patch_type="merge")
        api.call("patch", resource="persistentvolumeclaims", namespace="default", name="store",
                 patch={"status": {"phase": "Bound"}}, patch_type="merge", subresource="status")
        wait_for(lambda: (data / "out").exists() and (data / "out").read_text() == "hello",
                 message="the container's file in the claimed volume")
        pod_dir = next((node.dir / "pods").glob("default_claimer_*"))
        assert os.readlink(pod_dir / "volumes" / "kubernetes.io~local-volume" / "data") == str(data)
        api.call("delete", resource="pods", namespace="default", name="claimer", grace_period_seconds=0)
        wait_for(lambda: not pod_dir.exists(), message="the pod's directory removed")
        assert (data / "out").read_text() == "hello"   # the volume is not the pod's
    finally:
        api.call("delete", resource="persistentvolumeclaims", name="store", namespace="default")
        try:
            api.call("delete", resource="persistentvolumes", name="pv-store")
        except wire.NotFound:
            pass


def test_a_configmap_over_one_mebibyte_is_refused_and_its_pod_says_so(node, api):  # noqa: F811
    with pytest.raises(wire.WireError) as err:
        api.call("create", resource="configmaps", namespace="default", object={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"},
            "data": {"a": "x" * (1024 * 1024 + 1)}})
    assert "Too long: may not be more than 1048576 bytes" in str(err.value)
    api.call("create", resource="pods", namespace="default", object={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big"},
        "spec": {"nodeName": node.name, "terminationGracePeriodSeconds": 1,
                 "containers": [dict(sleeper(), volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}])],
                 "volumes": [{"name": "cfg", "configMap": {"name": "huge"}}]}})
    failed = wait_for(lambda: pod_events(api, "big", "FailedMount"), message="a FailedMount Event")
    assert failed[0]["message"] == 'MountVolume.SetUp failed for volume "cfg" : configmap "huge" not found'
    assert waiting(node.get("pods", "big")) == {"reason": "ContainerCreating"}


def test_node_allocatable_is_what_the_kernel_enforces_on_the_pods_cgroup(state_dir, api):  # noqa: F811
    from kubemu import cgroups, ownership
    from tests.conftest import remove_cluster_cgroups

    root = ownership.cgroup_name(state_dir, "node-x")
    # not a multiple of the page size: the kernel rounds the limit down, and the Node says so
    n = ApiNode(state_dir, api, f"--cgroup-root {root} --memory 1000000000")
    try:
        node = wait_for(lambda: n.get("nodes", n.name, None), message=f"{n.name} to register")
        kubepods = [cg for cg, controllers in cgroups.everywhere(f"{root}/kubepods") if "memory" in controllers]
        if not kubepods:
            pytest.skip("no memory controller kubemu may write to")
        limit = kubepods[0].path / ("memory.max" if kubepods[0].version == 2 else "memory.limit_in_bytes")
        enforced = int(limit.read_text())
        assert 1000000000 - 4096 < enforced <= 1000000000
        assert node["status"]["capacity"]["memory"] == "1000000000"
        assert node["status"]["allocatable"]["memory"] == f"{enforced // 1024}Ki"
    finally:
        n.stop()
        remove_cluster_cgroups(state_dir)


@needs_pod_networks
def test_a_configmap_volume_mounted_in_a_sandboxed_pod_follows_an_edit(state_dir, api, tmp_path):  # noqa: F811
    import ipaddress

    from kubemu import netplan, network

    net = network.setup(state_dir, netplan.CNI)
    n = None
    try:
        assert net.mode == netplan.CNI, net.reason
        pod_cidr = next(ipaddress.ip_network(net.cluster_cidr).subnets(new_prefix=net.node_mask))
        n = ApiNode(state_dir, api, " ".join(netplan.kubelet_flags(net, str(tmp_path))) + f" --pod-cidr {pod_cidr}")
        report = tmp_path / "report"
        report.mkdir()
        reader = ("import os, time\n"
                  "while True:\n"
                  "    text = open('/etc/config/color').read()\n"
                  "    try:\n        open('/etc/config/x', 'w')\n        writable = 'rw'\n"
                  "    except OSError:\n        writable = 'ro'\n"
                  "    open('/report/seen.tmp', 'w').write(text + ' ' + writable)\n"
                  "    os.rename('/report/seen.tmp', '/report/seen'); time.sleep(0.1)")
        api.call("create", resource="configmaps", namespace="default", object={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mounted"}, "data": {"color": "red"}})
        api.call("create", resource="pods", namespace="default", object={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mnt"},
            "spec": {"nodeName": n.name, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "command": [PY, "-c", reader],
                                     "volumeMounts": [{"name": "cfg", "mountPath": "/etc/config"},
                                                      {"name": "report", "mountPath": "/report"}]}],
                     "volumes": [{"name": "cfg", "configMap": {"name": "mounted"}},
                                 {"name": "report", "hostPath": {"path": str(report)}}]}})
        seen = report / "seen"
        wait_for(lambda: seen.exists() and seen.read_text() == "red ro", message="the mounted file, read-only")
        api.call("patch", resource="configmaps", namespace="default", name="mounted", patch={"data": {"color": "blue"}})
        wait_for(lambda: seen.read_text() == "blue ro", message="the edit in the running container's mounted file")
        assert not Path("/etc/config").exists()
    finally:
        for kind, name in (("pods", "mnt"), ("configmaps", "mounted")):
            try:
                api.call("delete", resource=kind, namespace="default", name=name, grace_period_seconds=0)
            except wire.NotFound:
                pass
        if n is not None:
            wait_for(lambda: not n.pods(), message="the pod gone")
            n.stop()
        network.down(state_dir)


# --- Services in the pods' environment ----------------------------------------------------------

def test_a_pods_environment_has_its_namespaces_services_unless_links_are_off(node, api, tmp_path):  # noqa: F811
    api.call("create", resource="services", namespace="default", object={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "e2-web"},
        "spec": {"clusterIP": "10.96.200.7", "selector": {"app": "e2-web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
    master = node.get("services", "kubernetes")  # the apiserver's own, when it keeps one

    def pod(name: str, **spec) -> dict:
        report = (f"import json, os\njson.dump({{k: v for k, v in os.environ.items() if 'E2_WEB' in k "
                  f"or k == 'URL' or k.startswith('KUBERNETES_SERVICE')}}, open({str(tmp_path / name)!r}, 'w'))")
        container = dict(sleeper(extra=report), env=[{"name": "URL", "value": "http://$(E2_WEB_SERVICE_HOST)/"},
                                                     {"name": "E2_WEB_SERVICE_PORT", "value": "mine"}])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeName": node.name, "terminationGracePeriodSeconds": 1, "containers": [container],
                         **spec}}
    try:
        api.call("create", resource="pods", namespace="default", object=pod("links"))
        api.call("create", resource="pods", namespace="default", object=pod("nolinks", enableServiceLinks=False))
        links = json.loads(wait_for(lambda: (tmp_path / "links").exists() and (tmp_path / "links").read_text(),
                                    message="the linked pod's environment"))
        nolinks = json.loads(wait_for(lambda: (tmp_path / "nolinks").exists() and (tmp_path / "nolinks").read_text(),
                                      message="the unlinked pod's environment"))
        web = {k: v for k, v in links.items() if "E2_WEB" in k}
        assert web == {"E2_WEB_SERVICE_HOST": "10.96.200.7", "E2_WEB_SERVICE_PORT": "mine",
                       "E2_WEB_SERVICE_PORT_HTTP": "80", "E2_WEB_PORT": "tcp://10.96.200.7:80",
                       "E2_WEB_PORT_80_TCP": "tcp://10.96.200.7:80", "E2_WEB_PORT_80_TCP_PROTO": "tcp",
                       "E2_WEB_PORT_80_TCP_PORT": "80", "E2_WEB_PORT_80_TCP_ADDR": "10.96.200.7"}
        assert {k: v for k, v in nolinks.items() if "E2_WEB" in k} == {"E2_WEB_SERVICE_PORT": "mine"}
        assert links["URL"] == "http://10.96.200.7/" and nolinks["URL"] == "http://$(E2_WEB_SERVICE_HOST)/"
        if master is not None:  # the master Service's variables, links or not
            for seen in (links, nolinks):
                assert seen["KUBERNETES_SERVICE_HOST"] == master["spec"]["clusterIP"]
    finally:
        api.call("delete", resource="services", name="e2-web", namespace="default")


def test_an_api_pod_waits_for_the_services_first_list_and_a_static_pod_does_not(api):  # noqa: F811
    """The kubelet's serviceHasSynced: an API pod's variables need every Service (the master one
    at least), so its start waits for their first list, up to the wait's timeout; a static pod
    (the apiserver may be one) never waits for the API."""
    import asyncio

    from kubelet.apiagent import ApiAgent
    from kubelet.nodestatus import NodeConfig

    def pod(source: str) -> dict:
        return {"metadata": {"name": source, "namespace": "default", "uid": source,
                             "annotations": {"kubernetes.io/config.source": source}},
                "spec": {"containers": [{"name": "c"}]}}

    async def main():
        agent = ApiAgent(api.endpoint, NodeConfig("waiter", "1", "1Gi"), lambda pods: None)
        try:
            assert agent.service_list() is None
            assert not agent.objects_synced(pod("api")) and agent.objects_synced(pod("file"))
            assert not await agent.wait_for_objects(pod("api"), 0.2)
            assert await agent.wait_for_objects(pod("file"), 0.2)
            stop = asyncio.Event()
            informer = asyncio.create_task(agent.services.run(stop))
            assert await agent.wait_for_objects(pod("api"), DEADLINE)
            assert agent.objects_synced(pod("api")) and isinstance(agent.service_list(), list)
            stop.set()
            await informer
        finally:
            await agent.api.close()
    asyncio.run(main())
