"""kubemu/addons.py: the cluster DNS addon's objects as kubeadm makes CoreDNS's, and their
create-if-absent apply (a fake API and a fake clock)."""
from __future__ import annotations

import pytest

from kubemu import addons, netplan, wire
from kubemu.apiclient import AlreadyExists

CNI = netplan.cni_record("abcd1234", "10.244.0.0/16", "10.96.0.0/12", 24, "/run/netns")
HOST = netplan.host_record("not root: CAP_NET_ADMIN is needed for pod networks", None, "00000005")
API, SECRET = "ipc:///s/nodes/node-0/apiserver.sock", "/s/pki/wire/system:serviceaccount:kube-system:coredns.secret"


def objects(net):
    return {o["kind"]: o for o in addons.coredns(net, API, SECRET)}


def test_kubeadm_s_coredns_in_a_pod_network():
    objs = objects(CNI)
    assert [o["kind"] for o in addons.coredns(CNI, API, SECRET)] == ["ServiceAccount", "Service", "Deployment"]
    assert {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs.values()} == {
        ("kube-system", "coredns"), ("kube-system", "kube-dns")}
    svc = objs["Service"]["spec"]
    assert svc["clusterIP"] == "10.96.0.10" and svc["selector"] == {"k8s-app": "kube-dns"}
    assert [(p["name"], p["port"], p["protocol"], p["targetPort"]) for p in svc["ports"]] == [
        ("dns", 53, "UDP", 53), ("dns-tcp", 53, "TCP", 53), ("metrics", 9153, "TCP", 9153)]
    dep = objs["Deployment"]["spec"]
    assert dep["replicas"] == 2 and dep["selector"]["matchLabels"] == dep["template"]["metadata"]["labels"]
    assert dep["strategy"]["rollingUpdate"] == {"maxUnavailable": 1}  # kubeadm's
    pod = dep["template"]["spec"]
    assert pod["serviceAccountName"] == "coredns" and pod["dnsPolicy"] == "Default"
    assert {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"} in pod["tolerations"]
    (c,) = pod["containers"]
    assert c["image"] == "registry.k8s.io/coredns/coredns:v1.11.3" and "command" not in c  # the catalog's entry
    assert c["args"] == ["--api", API, "--wire-credentials", SECRET, "--cluster-domain", "cluster.local"]
    assert [(p["name"], p["containerPort"], p["protocol"]) for p in c["ports"]] == [
        ("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"), ("metrics", 9153, "TCP")]
    assert (c["readinessProbe"]["httpGet"]["port"], c["livenessProbe"]["httpGet"]["port"]) == (8181, 8080)


def test_in_the_host_s_network_one_replica_on_unprivileged_ports():
    """Every pod shares the host's network: port 53 needs root, and a second replica could not
    bind the same ports; the Service still answers on 53 of its (loopback) ClusterIP."""
    objs = objects(HOST)
    c = objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert objs["Deployment"]["spec"]["replicas"] == 1
    # a rollout stops the old pod before it starts the new one, which could not bind its ports
    assert objs["Deployment"]["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    assert c["args"][-6:] == ["--port", "10053", "--health-port", "10054", "--ready-port", "10055"]
    assert (c["readinessProbe"]["httpGet"]["port"], c["livenessProbe"]["httpGet"]["port"]) == (10055, 10054)
    svc = objs["Service"]["spec"]
    assert svc["clusterIP"] == "127.69.0.10"  # the tenth address of the cluster's loopback block
    assert [(p["port"], p["targetPort"]) for p in svc["ports"][:2]] == [(53, 10053), (53, 10053)]


class FakeApi:
    """The objects it has (`existing`, by (resource, name)), and errors to answer creates with."""

    def __init__(self, answers: dict[str, list], existing: dict[tuple[str, str], dict] | None = None):
        self.answers, self.existing = answers, dict(existing or {})
        self.created, self.deleted = [], []

    def create(self, resource, obj, namespace):
        queue = self.answers.get(resource) or []
        answer = queue.pop(0) if queue else None
        if isinstance(answer, Exception):
            raise answer
        name = obj["metadata"]["name"]
        ip = obj.get("spec", {}).get("clusterIP")
        taken = {o.get("spec", {}).get("clusterIP") for (r, _), o in self.existing.items() if r == resource}
        if ip and ip in taken:
            # kube-apiserver allocates the clusterIP before it looks at the name
            raise wire.Invalid(f'Service "{name}" is invalid: spec.clusterIPs[0]: Invalid value: "{ip}": '
                               "failed to allocate IP: provided IP is already allocated")
        if (resource, name) in self.existing:
            raise AlreadyExists(f"{resource} \"{name}\" already exists", {"reason": "AlreadyExists"})
        self.existing[(resource, name)] = obj
        self.created.append((resource, namespace, name))
        return obj

    def get(self, resource, name, namespace):
        if (resource, name) not in self.existing:
            raise wire.NotFound(f"{resource} \"{name}\" not found")
        return self.existing[(resource, name)]

    def delete(self, resource, name, namespace, preconditions=None):
        obj = self.existing.get((resource, name))
        if obj is None:
            raise wire.NotFound(f"{resource} \"{name}\" not found")
        if preconditions and preconditions.get("uid") != obj["metadata"].get("uid"):
            raise wire.Conflict("precondition failed: uid")
        del self.existing[(resource, name)]
        self.deleted.append((resource, namespace, name))
        return obj


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_what_exists_is_left_alone_and_an_unavailable_api_is_tried_again():
    api, clock = FakeApi({
        "services": [wire.Unavailable("the store has no leader"), wire.OutcomeUnknown("timed out")],
    }, {("serviceaccounts", "coredns"): {"kind": "ServiceAccount", "metadata": {"name": "coredns"}}}), Clock()
    created, problems = addons.create_if_absent(api, addons.coredns(CNI, API, SECRET), 30, clock, clock.sleep)
    assert created == ["service/kube-dns", "deployment/coredns"] and problems == []
    assert api.created == [("services", "kube-system", "kube-dns"), ("deployments", "kube-system", "coredns")]
    assert clock.now == 1.0


@pytest.mark.parametrize("error, says", [
    (wire.Invalid('Service "kube-dns" is invalid: spec.clusterIP: Invalid value: "10.96.0.10": '
                  "provided IP is already allocated"), "service/kube-dns in kube-system: Invalid: "),
    (wire.Forbidden("forbidden"), "service/kube-dns in kube-system: Forbidden: forbidden"),
])
def test_a_refusal_is_said_once_and_the_rest_is_still_created(error, says):
    api, clock = FakeApi({"services": [error, error]}), Clock()
    created, problems = addons.create_if_absent(api, addons.coredns(CNI, API, SECRET), 30, clock, clock.sleep)
    assert created == ["serviceaccount/coredns", "deployment/coredns"]
    assert len(problems) == 1 and problems[0].startswith(says)
    assert clock.now == 0.0  # not tried again


def old_kube_dns(cluster_ip: str, labels: dict, uid: str = "u1") -> dict:
    return {"kind": "Service", "metadata": {"name": "kube-dns", "namespace": "kube-system", "uid": uid,
                                            "labels": labels}, "spec": {"clusterIP": cluster_ip}}


def test_kubemu_s_kube_dns_at_another_address_is_recreated():
    """`up` on a reused state directory whose network changed (here CNI → host): the kubelets'
    cluster DNS is the new block's tenth address, the kube-dns kubemu made before has the old
    one and a clusterIP cannot change in place: it is deleted (that one, by uid) and created."""
    old = old_kube_dns("10.96.0.10", objects(CNI)["Service"]["metadata"]["labels"])
    api, clock = FakeApi({}, {("services", "kube-dns"): old}), Clock()
    created, problems = addons.create_if_absent(api, addons.coredns(HOST, API, SECRET), 30, clock, clock.sleep)
    assert problems == [] and created == ["serviceaccount/coredns", "service/kube-dns", "deployment/coredns"]
    assert api.deleted == [("services", "kube-system", "kube-dns")]
    assert api.existing[("services", "kube-dns")]["spec"]["clusterIP"] == "127.69.0.10"
    assert addons.misplaced(api.existing[("services", "kube-dns")], objects(HOST)["Service"]) is None


def test_up_again_leaves_the_addon_as_it_is_and_says_nothing():
    """A second `up`: kube-dns exists at its address, so a create would meet the allocator's
    Invalid ("already allocated") before the name's AlreadyExists: what exists is looked at first."""
    api, clock = FakeApi({}), Clock()
    assert addons.create_if_absent(api, addons.coredns(CNI, API, SECRET), 30, clock, clock.sleep)[1] == []
    assert addons.create_if_absent(api, addons.coredns(CNI, API, SECRET), 30, clock, clock.sleep) == ([], [])
    assert api.deleted == [] and clock.now == 0.0


def test_a_kube_dns_at_the_right_address_or_not_kubemu_s_is_left_alone():
    kept = old_kube_dns("127.69.0.10", {"k8s-app": "kube-dns"})      # the user's, where it must be
    api, clock = FakeApi({}, {("services", "kube-dns"): kept}), Clock()
    assert addons.create_if_absent(api, addons.coredns(HOST, API, SECRET)[1:2], 30, clock, clock.sleep) == ([], [])
    theirs = old_kube_dns("10.96.0.10", {"k8s-app": "kube-dns"})     # the user's, elsewhere: said once
    api = FakeApi({}, {("services", "kube-dns"): theirs})
    created, problems = addons.create_if_absent(api, addons.coredns(HOST, API, SECRET), 30, clock, clock.sleep)
    assert created == ["serviceaccount/coredns", "deployment/coredns"] and api.deleted == []
    assert problems == ["service/kube-dns in kube-system: clusterIP 10.96.0.10 is not 127.69.0.10, the cluster "
                        "DNS address of this network; not kubemu's addon (no kubernetes.io/cluster-service "
                        "label): left as it is"]
    assert clock.now == 0.0


def test_kubemu_s_coredns_serving_another_mode_s_port_is_recreated():
    """host → CNI mode: the coredns pods must listen on 53 (the new kube-dns' targetPort), not
    10053; kubemu's Deployment is recreated, one without kubemu's label is said and kept."""
    old = {**objects(HOST)["Deployment"], "metadata": {**objects(HOST)["Deployment"]["metadata"], "uid": "d1"}}
    api, clock = FakeApi({}, {("deployments", "coredns"): old}), Clock()
    created, problems = addons.create_if_absent(api, addons.coredns(CNI, API, SECRET), 30, clock, clock.sleep)
    assert problems == [] and "deployment/coredns" in created
    assert api.deleted == [("deployments", "kube-system", "coredns")]
    assert addons.misplaced(api.existing[("deployments", "coredns")], objects(CNI)["Deployment"]) is None
    assert addons.misplaced(objects(CNI)["Deployment"], objects(CNI)["Deployment"]) is None

    theirs = {**old, "metadata": {**old["metadata"], "labels": {"k8s-app": "kube-dns"}}}
    api = FakeApi({}, {("deployments", "coredns"): theirs})
    created, problems = addons.create_if_absent(api, addons.coredns(CNI, API, SECRET), 30, clock, clock.sleep)
    assert "deployment/coredns" not in created and api.deleted == []
    assert problems == ["deployment/coredns in kube-system: DNS served on port 10053, not 53, the DNS port of this "
                        "network; not kubemu's addon (no kubernetes.io/cluster-service label): left as it is"]


def test_a_misplaced_kube_dns_still_being_deleted_is_waited_for():
    old = old_kube_dns("10.96.0.10", {"kubernetes.io/cluster-service": "true"})
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"   # a finalizer holds it
    api, clock = FakeApi({}, {("services", "kube-dns"): old}), Clock()
    created, problems = addons.create_if_absent(api, addons.coredns(HOST, API, SECRET)[1:2], 5, clock, clock.sleep)
    assert created == [] and api.deleted == [] and clock.now == 5.0
    assert problems == ["service/kube-dns in kube-system: Unavailable: the misplaced object is still being deleted"]


def test_an_api_that_never_answers_gives_up_at_the_deadline():
    api, clock = FakeApi({"serviceaccounts": [wire.Unavailable("down")] * 100}), Clock()
    created, problems = addons.create_if_absent(api, addons.coredns(CNI, API, SECRET)[:1], 5, clock, clock.sleep)
    assert created == [] and problems == ["serviceaccount/coredns in kube-system: Unavailable: down"]
    assert clock.now == 5.0


def test_the_dns_pods_stay_off_hollow_nodes():
    """A hollow node runs no process: a DNS pod bound there would be Running and never answer.
    The scheduler's own filters keep the template off the nodes `--hollow-nodes` registers, and
    on the others (the control-plane node's taint tolerated)."""
    from components.scheduling.filters import node_affinity_filter, taint_toleration
    from kubelet.hollow import hollow_configs
    from kubelet.nodestatus import NodeConfig, node_object, parse_taint

    for net in (CNI, HOST):
        pod = {"metadata": {}, "spec": objects(net)["Deployment"]["spec"]["template"]["spec"]}
        (hollow,) = hollow_configs(1, "hollow-node-", "2", "4Gi", 110)
        assert node_affinity_filter(pod, node_object(hollow, 0.0)) == \
            "node(s) didn't match Pod's node affinity/selector"
        plain = NodeConfig("node-1", "2", "4Gi")
        control = NodeConfig("node-0", "2", "4Gi", taints=(parse_taint(f"{addons.CONTROL_PLANE_TAINT}:NoSchedule"),))
        for node in (plain, control):
            obj = node_object(node, 0.0)
            assert (node_affinity_filter(pod, obj), taint_toleration(pod, obj)) == (None, None), node.name


def test_the_default_storage_class_is_created_if_absent():
    sc = addons.storage_class()
    assert sc["metadata"] == {"name": "standard", "labels": {"kubernetes.io/cluster-service": "true"},
                              "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}
    assert (sc["provisioner"], sc["reclaimPolicy"], sc["volumeBindingMode"]) == (
        "rancher.io/local-path", "Delete", "WaitForFirstConsumer")
    api, clock = FakeApi({}), Clock()
    assert addons.create_if_absent(api, [sc], 30, clock, clock.sleep) == (["storageclass/standard"], [])
    assert api.created == [("storageclasses", None, "standard")]     # cluster-scoped
    edited = {**sc, "reclaimPolicy": "Retain"}
    api = FakeApi({}, {("storageclasses", "standard"): edited})
    assert addons.create_if_absent(api, [sc], 30, clock, clock.sleep) == ([], [])
    assert api.existing[("storageclasses", "standard")] is edited      # the user's stays
    api = FakeApi({"storageclasses": [wire.Forbidden("no")]})
    assert addons.create_if_absent(api, [sc], 30, clock, clock.sleep) == (
        [], ["storageclass/standard: Forbidden: no"])


PROXY_SECRET = "/s/pki/wire/system:kube-proxy.secret"


def proxy_objects(net) -> dict:
    return {o["kind"]: o for o in addons.kube_proxy(net, API, PROXY_SECRET, "node-0")}


@pytest.mark.parametrize("net", [CNI, HOST], ids=["cni", "host"])
def test_kubeadm_s_kube_proxy_daemonset(net):
    """kubeadm's kube-proxy addon: a DaemonSet in the host's network of every node, rolled out
    one node at a time, with kubemu's kube-proxy identity from a hostPath volume (and the
    fabric's namespace file with pod networks: kube-proxy enters the fabric by it)."""
    assert [o["kind"] for o in addons.kube_proxy(net, API, PROXY_SECRET, "node-0")] == ["ServiceAccount",
                                                                                         "DaemonSet"]
    ds = proxy_objects(net)["DaemonSet"]
    assert ds["metadata"] == {"name": "kube-proxy", "namespace": "kube-system",
                              "labels": {"k8s-app": "kube-proxy", "kubernetes.io/cluster-service": "true"}}
    spec = ds["spec"]
    assert spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"] == {"k8s-app": "kube-proxy"}
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    pod = spec["template"]["spec"]
    assert (pod["priorityClassName"], pod["serviceAccountName"], pod["hostNetwork"]) == (
        "system-node-critical", "kube-proxy", True)
    assert pod["tolerations"] == [{"operator": "Exists"}]
    (c,) = pod["containers"]
    assert c["image"] == "registry.k8s.io/kube-proxy:v1.32.0" and "command" not in c  # the catalog's entry
    assert c["args"] == ["--api", API, "--wire-credentials", PROXY_SECRET, "--hostname-override=$(NODE_NAME)",
                         *netplan.kube_proxy_flags(net, "node-0")]
    assert c["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                         "fieldPath": "spec.nodeName"}}}]
    fabric = [{"name": "fabric-netns", "hostPath": {"path": "/run/netns/kubemu-abcd1234", "type": "File"}}]
    assert pod["volumes"] == [{"name": "wire-credentials", "hostPath": {"path": PROXY_SECRET, "type": "File"}},
                              *(fabric if net is CNI else [])]
    assert c["volumeMounts"] == [{"name": "wire-credentials", "mountPath": PROXY_SECRET, "readOnly": True},
                                 *([{"name": "fabric-netns", "mountPath": "/run/netns/kubemu-abcd1234"}]
                                   if net is CNI else [])]


@pytest.mark.parametrize("net", [CNI, HOST], ids=["cni", "host"])
def test_each_node_s_kube_proxy_runs_as_its_node_and_only_node_0_s_takes_the_host_side(net, tmp_path):
    """What the kubelet runs from the one template: `$(NODE_NAME)` expanded from the downward
    API, and the host side's flags (the host link; NodePorts on 127.0.0.1 without pod networks)
    kept by node-0's proxy alone, as when each node had a static pod of its own."""
    from components.kube_proxy.__main__ import build_parser, for_this_node
    from kubelet.envvars import container_env, expand_argv
    from kubemu import _wire_auth as wireauth
    from kubemu.api.identity import KUBE_PROXY

    secret = str(wireauth.ensure_secret(tmp_path, KUBE_PROXY))  # the flag reads it
    template = addons.kube_proxy(net, API, secret, "node-0")[1]["spec"]["template"]
    effective = {}
    for node in ("node-0", "node-1"):
        pod = {"metadata": {"namespace": "kube-system", "name": f"kube-proxy-{node}"},
               "spec": {**template["spec"], "nodeName": node}}
        (c,) = pod["spec"]["containers"]
        env = container_env(pod, c, lambda *a: None, [], ["127.0.0.1"])
        args = for_this_node(build_parser().parse_args(expand_argv(c["args"], env.vars)))
        assert args.hostname_override == node
        effective[node] = (args.host_interface, args.host_address, args.nodeport_addresses)
    if net is CNI:
        assert effective == {"node-0": ("host0", "10.244.255.253", []), "node-1": (None, None, [])}
    else:
        assert effective == {"node-0": (None, None, ["127.0.0.1/32"]), "node-1": (None, None, [])}


def test_each_node_s_kube_proxy_asks_the_apiservers_in_its_kubelet_s_order(tmp_path):
    """On an HA cluster the one template gives every node every apiserver, node-0's first; each
    node's proxy then orders them as that node's kubelet does: its own apiserver first on a
    control-plane node, a rotated order on a worker (not node-0's apiserver for everyone)."""
    from components.kube_proxy.__main__ import build_parser, for_this_node
    from kubelet.envvars import container_env, expand_argv
    from kubemu import _wire_auth as wireauth
    from kubemu import cluster
    from kubemu.api.identity import KUBE_PROXY
    from kubemu.statedir import StateDir

    state = StateDir(tmp_path / "state")
    secret = str(wireauth.ensure_secret(tmp_path, KUBE_PROXY))
    template = addons.kube_proxy(HOST, cluster.api_endpoint(state, 3), secret, "node-0")[1]["spec"]["template"]
    for node in cluster.node_names(5):
        pod = {"metadata": {"namespace": "kube-system", "name": f"kube-proxy-{node}"},
               "spec": {**template["spec"], "nodeName": node}}
        (c,) = pod["spec"]["containers"]
        env = container_env(pod, c, lambda *a: None, [], ["127.0.0.1"])
        args = for_this_node(build_parser().parse_args(expand_argv(c["args"], env.vars)))
        assert args.api == cluster.node_api_endpoint(state, node, 3), node
    assert cluster.node_api_endpoint(state, "node-1", 3).split(",")[0] == cluster.apiserver_endpoint(state, "node-1")


def test_kube_proxy_runs_on_the_control_plane_node_and_stays_off_hollow_nodes():
    from components.scheduling.filters import node_affinity_filter, taint_toleration
    from kubelet.hollow import hollow_configs
    from kubelet.nodestatus import NodeConfig, node_object, parse_taint

    pod = {"metadata": {}, "spec": proxy_objects(CNI)["DaemonSet"]["spec"]["template"]["spec"]}
    (hollow,) = hollow_configs(1, "hollow-node-", "2", "4Gi", 110)
    assert node_affinity_filter(pod, node_object(hollow, 0.0)) == "node(s) didn't match Pod's node affinity/selector"
    control = NodeConfig("node-0", "2", "4Gi", taints=(parse_taint(f"{addons.CONTROL_PLANE_TAINT}:NoSchedule"),))
    for node in (NodeConfig("node-1", "2", "4Gi"), control):
        obj = node_object(node, 0.0)
        assert (node_affinity_filter(pod, obj), taint_toleration(pod, obj)) == (None, None), node.name


def test_kubemu_s_kube_proxy_of_another_network_is_recreated():
    """host → CNI mode (or another fabric): the proxies must run with this network's flags; the
    DaemonSet kubemu made is recreated, a user's edit of anything else is kept, one without
    kubemu's label is said and left alone."""
    old = proxy_objects(HOST)["DaemonSet"]
    old = {**old, "metadata": {**old["metadata"], "uid": "p1"}}
    api, clock = FakeApi({}, {("daemonsets", "kube-proxy"): old}), Clock()
    created, problems = addons.create_if_absent(api, addons.kube_proxy(CNI, API, PROXY_SECRET, "node-0"), 30,
                                                clock, clock.sleep)
    assert problems == [] and created == ["serviceaccount/kube-proxy", "daemonset/kube-proxy"]
    assert api.deleted == [("daemonsets", "kube-system", "kube-proxy")]
    assert addons.misplaced(api.existing[("daemonsets", "kube-proxy")], proxy_objects(CNI)["DaemonSet"]) is None

    edited = proxy_objects(CNI)["DaemonSet"]
    edited["spec"]["template"]["spec"]["containers"][0]["args"] += ["--log-level", "DEBUG"]
    assert addons.misplaced(edited, proxy_objects(CNI)["DaemonSet"]) is None
    other_host_side = proxy_objects(CNI)["DaemonSet"]
    other_host_side["spec"]["template"]["spec"]["containers"][0]["args"] = addons.kube_proxy(
        CNI, API, PROXY_SECRET, "node-1")[1]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert addons.misplaced(other_host_side, proxy_objects(CNI)["DaemonSet"]).ours

    theirs = {**old, "metadata": {**old["metadata"], "labels": {"k8s-app": "kube-proxy"}}}
    api = FakeApi({}, {("daemonsets", "kube-proxy"): theirs})
    created, problems = addons.create_if_absent(api, addons.kube_proxy(CNI, API, PROXY_SECRET, "node-0"), 30,
                                                clock, clock.sleep)
    assert created == ["serviceaccount/kube-proxy"] and api.deleted == []
    assert problems == [
        "daemonset/kube-proxy in kube-system: kube-proxy runs with --proxy-mode=userspace --host-side-node=node-0 "
        "--nodeport-addresses=127.0.0.1/32, not --proxy-mode=nftables --cluster-cidr=10.244.0.0/16 "
        "--fabric-netns=/run/netns/kubemu-abcd1234 --host-side-node=node-0 --host-interface=host0 "
        "--host-address=10.244.255.253, the flags of this network; not kubemu's addon (no "
        "kubernetes.io/cluster-service label): left as it is"]


class StatusApi:
    """Answers `get` of the DaemonSet with each of `answers` in turn (the last one for ever)."""

    def __init__(self, answers: list):
        self.answers = answers

    def get(self, resource, name, namespace):
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def ds_with(generation: int, observed: int, desired: int, updated: int, available: int) -> dict:
    return {"kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system",
                                              "generation": generation},
            "spec": {"updateStrategy": {"type": "RollingUpdate"}},
            "status": {"observedGeneration": observed, "desiredNumberScheduled": desired,
                       "updatedNumberScheduled": updated, "numberAvailable": available}}


def test_up_waits_for_kube_proxy_s_rollout():
    """Services answer once every node's proxy runs: `up` waits, as `kubectl rollout status`,
    riding out an API that does not answer yet; at the deadline it says where the rollout is."""
    ds = proxy_objects(CNI)["DaemonSet"]
    api, clock = StatusApi([wire.Unavailable("no leader"), ds_with(1, 0, 0, 0, 0), ds_with(1, 1, 2, 2, 1),
                            ds_with(1, 1, 2, 2, 2)]), Clock()
    assert addons.wait_rolled_out(api, ds, 30, clock, clock.sleep) is None
    assert clock.now == pytest.approx(0.6)
    api, clock = StatusApi([ds_with(1, 1, 2, 1, 1)]), Clock()
    assert addons.wait_rolled_out(api, ds, 5, clock, clock.sleep) == (
        'daemonset/kube-proxy in kube-system: not rolled out within 5s: Waiting for daemon set "kube-proxy" '
        "rollout to finish: 1 out of 2 new pods have been updated...")
    assert clock.now == pytest.approx(5.0)
    # none (its create was refused, and said): nothing to wait for
    assert addons.wait_rolled_out(StatusApi([wire.NotFound("no")]), ds, 5, clock, clock.sleep) is None


def test_the_dns_and_proxy_pods_stay_off_joined_nodes():
    """Their pods read this machine's files and reach its ipc endpoints: on a node of another
    machine (`kubemu join`, labelled kubemu.io/joined) they would fail; the control-plane
    machine's nodes still take them."""
    from components.scheduling.filters import node_affinity_filter
    from kubelet.nodestatus import NodeConfig, node_object

    joined = node_object(NodeConfig("node-0", "2", "4Gi", labels={addons.JOINED_NODE_LABEL: ""}), 0.0)
    local = node_object(NodeConfig("node-1", "2", "4Gi"), 0.0)
    for template in (objects(CNI)["Deployment"], proxy_objects(CNI)["DaemonSet"]):
        pod = {"metadata": {}, "spec": template["spec"]["template"]["spec"]}
        assert node_affinity_filter(pod, joined) == "node(s) didn't match Pod's node affinity/selector"
        assert node_affinity_filter(pod, local) is None
