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
    assert c["args"][-6:] == ["--port", "10053", "--health-port", "10054", "--ready-port", "10055"]
    assert (c["readinessProbe"]["httpGet"]["port"], c["livenessProbe"]["httpGet"]["port"]) == (10055, 10054)
    svc = objs["Service"]["spec"]
    assert svc["clusterIP"] == "127.69.0.10"  # the tenth address of the cluster's loopback block
    assert [(p["port"], p["targetPort"]) for p in svc["ports"][:2]] == [(53, 10053), (53, 10053)]


class FakeApi:
    def __init__(self, answers: dict[str, list]):
        self.answers, self.created = answers, []

    def create(self, resource, obj, namespace):
        queue = self.answers.get(resource) or []
        answer = queue.pop(0) if queue else None
        if isinstance(answer, Exception):
            raise answer
        self.created.append((resource, namespace, obj["metadata"]["name"]))
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
        "serviceaccounts": [AlreadyExists("serviceaccounts \"coredns\" already exists", {"reason": "AlreadyExists"})],
        "services": [wire.Unavailable("the store has no leader"), wire.OutcomeUnknown("timed out")],
    }), Clock()
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
