"""kubeadm's addon phase: the cluster DNS as kubeadm deploys CoreDNS (ServiceAccount `coredns`,
Deployment `coredns`, Service `kube-dns` at the service CIDR's tenth address, all in
kube-system), played by kubemu's DNS component (`python -m components.dns`, the image catalog's
entry for CoreDNS's image). `kubemu up` creates them once every node is Ready.

Create-if-absent, as `kubeadm init` on a cluster that has them: what is there already (a user's
edit, a Deployment scaled down, a Service changed) is never overwritten; a deleted one comes back
at the next `up`. `coredns()` is pure; `create_if_absent()` is the shell over an API client.

Without pod networks every pod shares the host's network: the DNS server listens on unprivileged
ports (10053, kube-dns's own, and 10054/10055 for its health and readiness) and runs one replica,
since a second one in the same network could not bind them.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from . import apiclient, netplan, wire
from .api.identity import service_account_username

NAMESPACE = "kube-system"
ACCOUNT = "coredns"                                 # kubeadm's ServiceAccount for CoreDNS
IDENTITY = service_account_username(NAMESPACE, ACCOUNT)  # the DNS pods' wire identity
IMAGE = "registry.k8s.io/coredns/coredns:v1.11.3"   # kubeadm 1.32's CoreDNS
LABELS = {"k8s-app": "kube-dns"}
REPLICAS = 2                                        # kubeadm's
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
# Hollow nodes (`kubemu up --hollow-nodes`) run no process: a DNS pod bound there would be
# Running and never answer. They carry this label (kubelet/hollow.py); the Deployment requires
# its absence, as addons are kept off virtual-kubelet nodes.
HOLLOW_NODE_LABEL = "kubemu.io/hollow"
RESOURCES = {"cpu": "100m", "memory": "70Mi"}       # kubeadm's requests (its 170Mi limit left out:
#                                                     a Python server's footprint is not CoreDNS's)
# Errors a later try may not meet: the API answered, and said no.
REFUSED = (wire.Invalid, wire.Forbidden, wire.Unauthorized, wire.BadRequest)


@dataclass(frozen=True)
class DnsPorts:
    dns: int
    health: int
    ready: int


POD_NETWORK_PORTS = DnsPorts(53, 8080, 8181)      # CoreDNS's, in the pod's own network
HOST_NETWORK_PORTS = DnsPorts(10053, 10054, 10055)  # the host's network: unprivileged, off common ports


def dns_ports(net: netplan.Record) -> DnsPorts:
    return POD_NETWORK_PORTS if net.mode == netplan.CNI else HOST_NETWORK_PORTS


def coredns(net: netplan.Record, api: str, credentials: str) -> list[dict]:
    """The DNS addon's objects, in the order they are created. `api`: the apiserver's wire
    endpoint (an ipc:// socket: Unix sockets are reachable from a pod's network namespace, the
    pod sees the host's files); `credentials`: the DNS pods' wire secret file."""
    ports = dns_ports(net)
    args = ["--api", api, "--wire-credentials", credentials, "--cluster-domain", netplan.CLUSTER_DOMAIN]
    if ports != POD_NETWORK_PORTS:
        args += ["--port", str(ports.dns), "--health-port", str(ports.health), "--ready-port", str(ports.ready)]
    meta = {"namespace": NAMESPACE, "labels": dict(LABELS)}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}}
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", **meta,
                     "labels": {**LABELS, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
                     "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
        "spec": {"selector": dict(LABELS), "clusterIP": netplan.dns_service_ip(net),
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": ports.dns},
                           {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": ports.dns},
                           {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153}]}}
    container = {
        "name": "coredns", "image": IMAGE, "imagePullPolicy": "IfNotPresent", "args": args,
        "resources": {"requests": dict(RESOURCES)},
        "ports": [{"name": "dns", "containerPort": ports.dns, "protocol": "UDP"},
                  {"name": "dns-tcp", "containerPort": ports.dns, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": 9153, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/health", "port": ports.health, "scheme": "HTTP"},
                          "initialDelaySeconds": 60, "timeoutSeconds": 5, "successThreshold": 1,
                          "failureThreshold": 5},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": ports.ready, "scheme": "HTTP"}}}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "coredns", **meta},
        "spec": {"replicas": REPLICAS if net.mode == netplan.CNI else 1,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                 "selector": {"matchLabels": dict(LABELS)},
                 "template": {"metadata": {"labels": dict(LABELS)}, "spec": {
                     "priorityClassName": "system-cluster-critical", "serviceAccountName": ACCOUNT,
                     "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                                     {"key": CONTROL_PLANE_TAINT, "effect": "NoSchedule"}],
                     "nodeSelector": {"kubernetes.io/os": "linux"},
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{"matchExpressions": [
                             {"key": HOLLOW_NODE_LABEL, "operator": "DoesNotExist"}]}]}}},
                     "dnsPolicy": "Default",  # the DNS server does not ask itself
                     "containers": [container]}}}}
    return [account, service, deployment]


RESOURCE = {"ServiceAccount": "serviceaccounts", "Service": "services", "Deployment": "deployments"}


def create_if_absent(api: apiclient.SyncApiClient, objects: list[dict], timeout: float,
                     clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
                     ) -> tuple[list[str], list[str]]:
    """Create each object unless one of its name exists; (what was created, one line per object
    the API refused or that could not be created within `timeout`). An unavailable API is
    tried again; a refusal is not."""
    deadline = clock() + timeout
    created, problems = [], []
    for obj in objects:
        what = f"{obj['kind'].lower()}/{obj['metadata']['name']}"
        while True:
            try:
                api.create(RESOURCE[obj["kind"]], obj, obj["metadata"]["namespace"])
            except wire.WireError as err:
                if apiclient.is_already_exists(err):
                    break
                if isinstance(err, REFUSED) or clock() >= deadline:
                    problems.append(f"{what} in {NAMESPACE}: {err}")
                    break
                sleep(0.5)
                continue
            created.append(what)
            break
    return created, problems
