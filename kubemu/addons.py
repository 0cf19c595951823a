"""kubeadm's addon phase: the cluster DNS as kubeadm deploys CoreDNS (ServiceAccount `coredns`,
Deployment `coredns`, Service `kube-dns` at the service CIDR's tenth address, all in
kube-system), played by kubemu's DNS component (`python -m components.dns`, the image catalog's
entry for CoreDNS's image); and the default StorageClass `standard`, kind's (provisioner
`rancher.io/local-path`, which kubemu's controller-manager plays; reclaimPolicy Delete;
volumeBindingMode WaitForFirstConsumer); and kube-proxy as kubeadm's kube-proxy addon deploys it
(ServiceAccount `kube-proxy`, DaemonSet `kube-proxy` in kube-system, on every node, the
control-plane node too). `kubemu up` creates them once every node is Ready, then waits for
kube-proxy's rollout: Services answer once its pods run.

Create-if-absent, as `kubeadm init` on a cluster that has them: what is there already (a user's
edit, a Deployment scaled down, a Service changed) is never overwritten; a deleted one comes back
at the next `up`. One exception: what depends on the network, which `up` on a reused state
directory may change (the mode, `--service-cidr`): `kube-dns` must have the ClusterIP the kubelets'
`--cluster-dns` names (the service CIDR's tenth address), the `coredns` pods must listen on
the mode's DNS port (the Service's targetPort), and the `kube-proxy` pods must run with the
network's flags (netplan.kube_proxy_flags). An object that does not (`misplaced`; a
clusterIP cannot be changed in place) is deleted and created again when it is kubemu's addon:
it carries the `kubernetes.io/cluster-service: "true"` label, the mark of the objects the
cluster's addon manager owned (an older kubemu put it on kube-dns only: its coredns Deployment
counts as the user's). Else it is left alone and said in one warning line of `up`.
`coredns()` and `misplaced()` are pure; `create_if_absent()` is the shell over an API client.

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
from .api.storage import DEFAULT_CLASS_ANNOTATION

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
# Nodes of other machines (`kubemu join`) carry this label (kubemu/cluster.py kubelet_args): the
# addons' pods read this machine's files (credentials, the fabric's namespace) and reach its ipc
# endpoints, so they are kept off them as off the hollow nodes.
JOINED_NODE_LABEL = "kubemu.io/joined"
RESOURCES = {"cpu": "100m", "memory": "70Mi"}       # kubeadm's requests (its 170Mi limit left out:
#                                                     a Python server's footprint is not CoreDNS's)
# The label the cluster's addon manager owned its objects by; kubemu's addon objects carry it.
ADDON_LABEL = "kubernetes.io/cluster-service"
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
    meta = {"namespace": NAMESPACE, "labels": {**LABELS, ADDON_LABEL: "true"}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}}
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", **meta, "labels": {**meta["labels"], "kubernetes.io/name": "CoreDNS"},
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
                 # kubeadm's maxUnavailable 1; on the host's network no surge: a new pod could not
                 # bind the ports the old one holds
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                     "maxUnavailable": 1, **({} if net.mode == netplan.CNI else {"maxSurge": 0})}},
                 "selector": {"matchLabels": dict(LABELS)},
                 "template": {"metadata": {"labels": dict(LABELS)}, "spec": {
                     "priorityClassName": "system-cluster-critical", "serviceAccountName": ACCOUNT,
                     "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                                     {"key": CONTROL_PLANE_TAINT, "effect": "NoSchedule"}],
                     "nodeSelector": {"kubernetes.io/os": "linux"},
                     "affinity": ON_LOCAL_NODES,
                     "dnsPolicy": "Default",  # the DNS server does not ask itself
                     "containers": [container]}}}}
    return [account, service, deployment]


# The default StorageClass, kind's: rancher's local-path provisioner (kubemu's runs in the
# controller-manager), volumes bound once the scheduler has placed their first pod.
STORAGE_CLASS = "standard"
LOCAL_PATH_PROVISIONER = "rancher.io/local-path"


def storage_class() -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS, "labels": {ADDON_LABEL: "true"},
                         "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
            "provisioner": LOCAL_PATH_PROVISIONER, "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"}


# kubeadm's kube-proxy addon: a DaemonSet in the host's network of every node. Its pods' wire
# identity is kubemu's kube-proxy user (the credentials file, from the state directory by a
# hostPath volume), bound to system:node-proxier as kubeadm binds kube-proxy's.
PROXY_NAME = "kube-proxy"
PROXY_LABELS = {"k8s-app": "kube-proxy"}
PROXY_IMAGE = "registry.k8s.io/kube-proxy:v1.32.0"  # the image catalog runs components.kube_proxy
CREDENTIALS_VOLUME = "wire-credentials"
FABRIC_VOLUME = "fabric-netns"
ON_LOCAL_NODES = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": HOLLOW_NODE_LABEL, "operator": "DoesNotExist"},
                                                {"key": JOINED_NODE_LABEL, "operator": "DoesNotExist"}]}]}}}


def kube_proxy(net: netplan.Record, api: str, credentials: str, host_side_node: str) -> list[dict]:
    """The kube-proxy addon's objects, in the order they are created. One template for every
    node: each pod's `--hostname-override` is its node's name (the downward API's spec.nodeName,
    expanded in its args by the kubelet); the flags of the host's side are given to all, and
    kept by `host_side_node`'s proxy alone (netplan.kube_proxy_flags). With pod networks the
    fabric's namespace file is a hostPath volume too: a container's mount namespace keeps only
    the namespace files it names (kubelet/shim.py), and kube-proxy enters the fabric by it."""
    args = ["--api", api, "--wire-credentials", credentials, "--hostname-override=$(NODE_NAME)",
            *netplan.kube_proxy_flags(net, host_side_node)]
    volumes = [{"name": CREDENTIALS_VOLUME, "hostPath": {"path": credentials, "type": "File"}}]
    mounts = [{"name": CREDENTIALS_VOLUME, "mountPath": credentials, "readOnly": True}]
    if net.mode == netplan.CNI:
        volumes.append({"name": FABRIC_VOLUME, "hostPath": {"path": net.netns_path, "type": "File"}})
        mounts.append({"name": FABRIC_VOLUME, "mountPath": net.netns_path})
    container = {"name": PROXY_NAME, "image": PROXY_IMAGE, "imagePullPolicy": "IfNotPresent", "args": args,
                 "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                          "fieldPath": "spec.nodeName"}}}],
                 "volumeMounts": mounts}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": PROXY_NAME, "namespace": NAMESPACE}}
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": PROXY_NAME, "namespace": NAMESPACE, "labels": {**PROXY_LABELS, ADDON_LABEL: "true"}},
        "spec": {"selector": {"matchLabels": dict(PROXY_LABELS)},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                 "template": {"metadata": {"labels": dict(PROXY_LABELS)}, "spec": {
                     "priorityClassName": "system-node-critical", "serviceAccountName": PROXY_NAME,
                     "hostNetwork": True, "terminationGracePeriodSeconds": 30,
                     "tolerations": [{"operator": "Exists"}],  # every taint: the control-plane node's too
                     "nodeSelector": {"kubernetes.io/os": "linux"},
                     "affinity": ON_LOCAL_NODES,
                     "containers": [container], "volumes": volumes}}}}
    return [account, daemonset]


def kube_proxy_pod(api: apiclient.SyncApiClient, node: str) -> dict | None:
    """The kube-proxy pod of `node` (one not being deleted), None while it has none."""
    listed = api.list("pods", NAMESPACE, label_selector=",".join(f"{k}={v}" for k, v in PROXY_LABELS.items()),
                      field_selector=f"spec.nodeName={node}")
    return next((p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")), None)


RESOURCE = {"ServiceAccount": "serviceaccounts", "Service": "services", "Deployment": "deployments",
            "StorageClass": "storageclasses", "DaemonSet": "daemonsets"}


@dataclass(frozen=True)
class Misplaced:
    """An existing object that cannot serve as the addon's: `why`, and whether kubemu made it
    (then it is recreated; else it is left alone and `why` said)."""
    why: str
    ours: bool


def _first_container(workload: dict) -> dict:
    containers = (((workload.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")
    return containers[0] if isinstance(containers, list) and containers and isinstance(containers[0], dict) else {}


def _dns_port(deployment: dict) -> object:
    """The containerPort named `dns` of the Deployment's first container (None without one)."""
    first = _first_container(deployment)
    ports = first.get("ports") if isinstance(first.get("ports"), list) else []
    return next((p.get("containerPort") for p in ports if isinstance(p, dict) and p.get("name") == "dns"), None)


def _network_flags(daemonset: dict) -> list[str]:
    """The network's flags (netplan.KUBE_PROXY_NETWORK_FLAGS, `--flag value` or `--flag=value`) in the args of
    the DaemonSet's first container, as `--flag=value` in their order."""
    args = _first_container(daemonset).get("args")
    args = [a for a in args if isinstance(a, str)] if isinstance(args, list) else []
    found = []
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in netplan.KUBE_PROXY_NETWORK_FLAGS:
            found.append(f"{flag}={value if eq else (args[i + 1] if i + 1 < len(args) else '')}")
    return found


def misplaced(existing: dict, wanted: dict) -> Misplaced | None:
    """Whether `existing`, the object of `wanted`'s name, does not fit this network: a Service
    whose clusterIP is not the wanted one, a Deployment whose DNS port is not the wanted one, a
    DaemonSet whose kube-proxy network flags are not the wanted ones."""
    if wanted["kind"] == "Service":
        want = (wanted.get("spec") or {}).get("clusterIP")
        have = (existing.get("spec") or {}).get("clusterIP")
        why = f"clusterIP {have} is not {want}, the cluster DNS address of this network"
    elif wanted["kind"] == "Deployment":
        want, have = _dns_port(wanted), _dns_port(existing)
        why = f"DNS served on port {have}, not {want}, the DNS port of this network"
    elif wanted["kind"] == "DaemonSet":
        want, have = " ".join(_network_flags(wanted)), " ".join(_network_flags(existing))
        why = f"kube-proxy runs with {have or 'no network flags'}, not {want}, the flags of this network"
    else:
        return None
    if want is None or have == want:
        return None
    labels = (existing.get("metadata") or {}).get("labels") or {}
    return Misplaced(why, isinstance(labels, dict) and labels.get(ADDON_LABEL) == "true")


CREATED, RECREATE = "created", "recreate"


def create_if_absent(api: apiclient.SyncApiClient, objects: list[dict], timeout: float,
                     clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
                     ) -> tuple[list[str], list[str]]:
    """Create each object unless one of its name exists (a `misplaced` one of kubemu's is
    deleted and created again); (what was created, one line per object the API refused, that
    could not be created within `timeout`, or that is misplaced and not kubemu's). An
    unavailable API is tried again; a refusal is not."""
    deadline = clock() + timeout
    created, problems = [], []
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        what = f"{obj['kind'].lower()}/{obj['metadata']['name']}"
        where = f"{what} in {namespace}" if namespace else what
        while True:
            try:
                outcome = _apply(api, RESOURCE[obj["kind"]], obj)
            except wire.WireError as err:  # unavailable, or changed meanwhile (AlreadyExists, NotFound, Conflict)
                if isinstance(err, REFUSED) or clock() >= deadline:
                    problems.append(f"{where}: {err}")
                    break
                sleep(0.5)
                continue
            if outcome == RECREATE:
                continue
            if outcome == CREATED:
                created.append(what)
            elif outcome is not None:
                problems.append(f"{where}: {outcome}")
            break
    return created, problems


def _apply(api: apiclient.SyncApiClient, resource: str, obj: dict) -> str | None:
    """One step for `obj`: CREATED; None when the object of its name stays; RECREATE once that
    one is deleted; else the problem line. Raises the API's error, or Unavailable while a
    misplaced object is being deleted.

    It looks before it creates: for a Service whose clusterIP is taken the apiserver answers
    with the allocation's Invalid before the name's AlreadyExists (kube-apiserver allocates
    first), which would hide the object already there."""
    name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
    try:
        existing = api.get(resource, name, namespace)
    except wire.NotFound:
        api.create(resource, obj, namespace)
        return CREATED
    wrong = misplaced(existing, obj)
    if wrong is None:
        return None
    if not wrong.ours:
        return f"{wrong.why}; not kubemu's addon (no {ADDON_LABEL} label): left as it is"
    meta = existing.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        raise wire.Unavailable("the misplaced object is still being deleted")
    api.delete(resource, name, namespace, preconditions={"uid": meta["uid"]} if meta.get("uid") else None)
    return RECREATE


def wait_rolled_out(api: apiclient.SyncApiClient, daemonset: dict, timeout: float,
                    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
                    ) -> str | None:
    """Wait until the DaemonSet of `daemonset`'s name has rolled out, as `kubectl rollout status`
    says it (kubemu/kubectl/rollout_status.py): a pod updated and available on every node it
    should run on. None once it has, or when there is none (a refused create was said already);
    else, at the deadline, its last state as one line. An unavailable API is tried again."""
    from .kubectl.rollout_status import daemonset_status  # only `up` waits

    name, namespace = daemonset["metadata"]["name"], daemonset["metadata"].get("namespace")
    where = f"daemonset/{name} in {namespace}"
    deadline = clock() + timeout
    last = "the API did not answer"
    while True:
        try:
            status = daemonset_status(api.get(RESOURCE["DaemonSet"], name, namespace))
        except wire.NotFound:
            return None
        except wire.WireError as err:
            if isinstance(err, REFUSED):
                return f"{where}: {err}"
            last = str(err)
        else:
            if status.done:
                return None
            last = status.message
        if clock() >= deadline:
            return f"{where}: not rolled out within {timeout:g}s: {last}"
        sleep(0.2)
