"""What a kubelet tells the API about its node and its static pods, as pure functions.

    node_object(config, now)          the Node it registers (kubelet's initialNode + setters)
    node_status(config, now, prev)    its status: capacity/allocatable, conditions, addresses,
                                      nodeInfo; lastTransitionTime kept while a condition holds
    lease_object(node, duration, now) its Lease in kube-node-lease (the heartbeat)
    mirror_pod(static_pod)            the read-only API copy of a static pod
    is_mirror_pod(pod)

Times are seconds since the epoch, passed in. Kubernetes' names: Ready's reason KubeletReady,
message "kubelet is posting ready status"; MemoryPressure/DiskPressure/PIDPressure False with
KubeletHasSufficientMemory / KubeletHasNoDiskPressure / KubeletHasSufficientPID.

The pod network (NodeNetwork): until the node's network config is written (it needs the node's
spec.podCIDR), Ready is False with the kubelet's KubeletNotReady and the runtime's
NETWORK_NOT_READY, as a real node without a CNI config reports. When pods share the host's
network instead (no privileges for pod networks, or `--network host`), the node says so in a
NetworkUnavailable condition, status False (the node does work, and True would taint it
node.kubernetes.io/network-unavailable), reason KubemuHostNetwork and the why as its message:
the place network plugins (flannel, Calico) report on a node's network, and what
`kubectl describe node` shows.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from kubemu.api.times import format_micro_time, format_time

from .manifests import CONFIG_HASH

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
LEASE_NAMESPACE = "kube-node-lease"
NODE_IP = "127.0.0.1"
KUBELET_VERSION = "v1.31.0-kubemu"
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"
# What containerd tells the kubelet while it has no network config (the kubelet's Ready message).
NETWORK_NOT_READY = ("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                     "message:Network plugin returns error: cni plugin not initialized")
HOST_NETWORK_REASON = "KubemuHostNetwork"

_CONDITIONS = (
    # type, status while healthy, reason, message
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


@dataclass(frozen=True)
class NodeConfig:
    name: str
    cpu: str                      # capacity, a quantity ("2", "1500m")
    memory: str                   # capacity, a quantity ("4Gi")
    pods: int = 110               # the kubelet's --max-pods
    labels: dict = field(default_factory=dict)
    taints: tuple = ()            # --register-with-taints, as Taint dicts
    os_image: str = "kubemu"
    kernel_version: str = ""
    runtime: str = "kubemu://shim"
    allocatable: dict = field(default_factory=dict)  # what differs from capacity (the enforced memory)


@dataclass(frozen=True)
class NodeNetwork:
    """The node's pod network as the kubelet sees it."""
    ready: bool = True
    host_reason: str | None = None  # pods share the host's network: why (shown on the node)


def default_labels(config: NodeConfig) -> dict:
    return {"kubernetes.io/hostname": config.name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", **config.labels}


def node_status(config: NodeConfig, now: float, previous: dict | None = None,
                network: NodeNetwork = NodeNetwork()) -> dict:
    """The status the kubelet posts: every condition healthy with a fresh heartbeat (Ready
    only once the pod network is), its lastTransitionTime carried over from `previous` while
    its status does not change."""
    before = {c.get("type"): c for c in ((previous or {}).get("conditions") or [])}
    conditions = []
    table = list(_CONDITIONS)
    if not network.ready:
        table[-1] = ("Ready", "False", "KubeletNotReady", NETWORK_NOT_READY)
    if network.host_reason:
        table.insert(0, ("NetworkUnavailable", "False", HOST_NETWORK_REASON,
                         f"pods share the host's network: {network.host_reason}"))
    for ctype, status, reason, message in table:
        old = before.get(ctype)
        since = old.get("lastTransitionTime") if old and old.get("status") == status else None
        conditions.append({"type": ctype, "status": status, "reason": reason, "message": message,
                           "lastHeartbeatTime": format_time(now),
                           "lastTransitionTime": since or format_time(now)})
    capacity = {"cpu": config.cpu, "memory": config.memory, "pods": str(config.pods)}
    return {
        "capacity": capacity,
        "allocatable": {**capacity, **config.allocatable},
        "conditions": conditions,
        "addresses": [{"type": "InternalIP", "address": NODE_IP},
                      {"type": "Hostname", "address": config.name}],
        "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
                     "operatingSystem": "linux", "architecture": "amd64", "osImage": config.os_image,
                     "kernelVersion": config.kernel_version, "containerRuntimeVersion": config.runtime},
    }


def node_object(config: NodeConfig, now: float, network: NodeNetwork = NodeNetwork()) -> dict:
    spec: dict = {}
    if config.taints:
        spec["taints"] = [dict(t) for t in config.taints]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": config.name, "labels": default_labels(config)},
            "spec": spec, "status": node_status(config, now, network=network)}


def lease_object(node: str, duration: int, now: float) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": LEASE_NAMESPACE},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": int(duration),
                     "renewTime": format_micro_time(now)}}


def parse_taint(text: str) -> dict:
    """`key[=value]:Effect`, the kubelet's --register-with-taints syntax."""
    key_value, sep, effect = text.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not key_value:
        raise ValueError(f"invalid taint {text!r}: want key[=value]:NoSchedule|PreferNoSchedule|NoExecute")
    key, _, value = key_value.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def is_mirror_pod(pod: dict) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def mirror_pod(static_pod: dict) -> dict:
    """The API copy of a static pod: same name, namespace, labels and spec; annotated with the
    static pod's config hash, so a mirror of an older manifest can be told apart and replaced.
    The apiserver gives it a uid of its own."""
    meta = static_pod["metadata"]
    annotations = dict(meta.get("annotations") or {})
    annotations[MIRROR_ANNOTATION] = annotations.get(CONFIG_HASH) or meta.get("uid", "")
    mirror_meta = {"name": meta["name"], "namespace": meta["namespace"], "annotations": annotations}
    if meta.get("labels"):
        mirror_meta["labels"] = dict(meta["labels"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": mirror_meta,
            "spec": copy.deepcopy(static_pod["spec"])}


def mirror_matches(mirror: dict, static_pod: dict) -> bool:
    """A live mirror pod made from this very manifest."""
    annotations = (mirror.get("metadata") or {}).get("annotations") or {}
    want = (static_pod["metadata"].get("annotations") or {}).get(CONFIG_HASH) or static_pod["metadata"].get("uid")
    return annotations.get(MIRROR_ANNOTATION) == want and not (mirror.get("metadata") or {}).get("deletionTimestamp")
