"""Node IPAM's reconcile core: kube-controller-manager's range allocator
(k8s pkg/controller/nodeipam/ipam/range_allocator.go over cidrset/cidr_set.go), which gives
every node a block of the cluster CIDR as ``spec.podCIDR`` (``--allocate-node-cidrs``).

``sync_node_cidrs(nodes, settings, state) -> NodeIPAMSync`` is pure. The cluster CIDR is cut
into ``1 << (node_mask - cluster prefix)`` blocks; block *i* is the cluster's base address
``| i << (32 - node_mask)``. A pass:

1. **Occupies** the reserved blocks (``reserved_blocks``): those the service CIDR overlaps
   (filterOutServiceRange) and, kubemu's one addition, the host link's block
   (``kubemu.netplan.host_link``: the host's veth into the pod network lives there);
2. **Occupies** every node's ``spec.podCIDRs`` (all the blocks an entry covers, as
   CidrSet.Occupy). An entry that does not parse or lies outside the cluster CIDR is the
   allocator's fatal error in Kubernetes; here that node is skipped, with one Warning Event
   ``InvalidPodCIDR`` carrying Kubernetes' error text, and everyone else goes on;
3. **Allocates** for each node without podCIDRs (by name): the first free block scanning
   round-robin from ``next_candidate`` (CidrSet.AllocateNext; then ``next_candidate`` = that
   block + 1), written as a patch of ``spec.podCIDR`` + ``spec.podCIDRs`` with the node's uid
   as a precondition (PatchNodeCIDRs; the apiserver refuses changing a podCIDR once set, so
   no resourceVersion is needed). None free: the Event ``CIDRNotAvailable`` ("Node <name>
   status is now: CIDRNotAvailable", RecordNodeStatusChange) and a retry after
   ``RETRY_AFTER`` seconds.

The state carried from one pass to the next (``NodeIPAMState``) is the round-robin cursor,
the blocks patched but not yet seen in the cache (so that a pass running before the informer
shows a write never hands the block out twice), and the invalid podCIDRs already reported.
Everything else is recomputed from the nodes each pass, so a deleted node's blocks are free
at the next pass (ReleaseCIDR), and a restart starts from the nodes as they are (the cursor
back at 0, as in Kubernetes). The shell calls ``forget(state, name)`` when a patch failed:
the reservation is released and the next pass allocates again.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from components.controllers import PatchObject, RecordEvent
from components.controllers.podutil import meta
from kubemu.api.objects import node_pod_cidrs
from kubemu.netplan import DEFAULT_NODE_MASK, host_link

RETRY_AFTER = 10.0          # seconds until a node that found no free block is tried again
CIDR_NOT_AVAILABLE = "CIDRNotAvailable"
INVALID_POD_CIDR = "InvalidPodCIDR"
NO_CIDRS_LEFT = ("CIDR allocation failed; there are no remaining CIDRs left to allocate in "
                 "the accepted range")


@dataclass(frozen=True)
class NodeIPAMSettings:
    cluster_cidr: ipaddress.IPv4Network
    node_mask: int = DEFAULT_NODE_MASK
    service_cidr: ipaddress.IPv4Network | None = None

    @classmethod
    def parse(cls, cluster_cidr: str | None, node_mask: int | None = None,
              service_cidr: str | None = None) -> "NodeIPAMSettings":
        """From kube-controller-manager's flags; ValueError with its complaint when unusable."""
        if not (cluster_cidr or "").strip():
            raise ValueError("Controller: Must specify --cluster-cidr if --allocate-node-cidrs "
                             "is set")
        cluster = _ipv4_network(cluster_cidr, "--cluster-cidr")
        mask = DEFAULT_NODE_MASK if node_mask is None else node_mask
        if not cluster.prefixlen <= mask <= 32:
            raise ValueError("Controller: Invalid --cluster-cidr, mask size of cluster CIDR "
                             "must be less than or equal to --node-cidr-mask-size configured "
                             "for CIDR family")
        service = _ipv4_network(service_cidr, "--service-cluster-ip-range") \
            if (service_cidr or "").strip() else None
        return cls(cluster, mask, service)

    @property
    def max_cidrs(self) -> int:
        return 1 << (self.node_mask - self.cluster_cidr.prefixlen)

    def block(self, index: int) -> ipaddress.IPv4Network:
        """indexToCIDRBlock."""
        base = int(self.cluster_cidr.network_address) | (index << (32 - self.node_mask))
        return ipaddress.IPv4Network((base, self.node_mask))


def _ipv4_network(text: str, flag: str) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.ip_network(text.strip(), strict=False)
    except ValueError as err:
        raise ValueError(f"invalid {flag} {text!r}: {err}") from None
    if not isinstance(net, ipaddress.IPv4Network):
        raise ValueError(f"invalid {flag} {text!r}: kubemu's pod network is IPv4 only")
    return net


class OutOfRange(ValueError):
    pass


def block_indices(settings: NodeIPAMSettings, cidr: ipaddress._BaseNetwork) -> range:
    """The blocks `cidr` covers (CidrSet.getBeginningAndEndIndices): all of them when it is
    as large as the cluster CIDR or larger; OutOfRange (Kubernetes' words) when it does not
    overlap the cluster CIDR."""
    cluster = settings.cluster_cidr
    if cidr.version != cluster.version or not cluster.overlaps(cidr):
        raise OutOfRange(f"cidr {cidr} is out the range of cluster cidr {cluster}")
    if cidr.prefixlen <= cluster.prefixlen:
        return range(settings.max_cidrs)
    shift = 32 - settings.node_mask
    base = int(cluster.network_address)
    begin = (base ^ int(cidr.network_address)) >> shift
    end = (base ^ int(cidr.broadcast_address)) >> shift
    return range(begin, end + 1)


def reserved_blocks(settings: NodeIPAMSettings) -> frozenset[int]:
    """Never a node's: the service CIDR's blocks where it overlaps the cluster CIDR, and the
    host link's block."""
    used: set[int] = set()
    if settings.service_cidr is not None:
        try:
            used.update(block_indices(settings, settings.service_cidr))
        except OutOfRange:
            pass  # no overlap: nothing to filter out
    link = host_link(str(settings.cluster_cidr), settings.node_mask).block
    used.update(block_indices(settings, link))
    return frozenset(used)


@dataclass(frozen=True)
class NodeIPAMState:
    next_candidate: int = 0
    # node name -> the podCIDR patched onto it that the cache does not show yet
    pending: Mapping[str, str] = field(default_factory=dict)
    # (node name, its podCIDRs) already reported as invalid
    reported: frozenset = frozenset()


@dataclass
class NodeIPAMSync:
    actions: list
    state: NodeIPAMState
    assigned: dict[str, str]         # node name -> the podCIDR this pass patches onto it
    problems: list[str]              # the errors Kubernetes would log, one line each
    requeue_after: float | None = None


def forget(state: NodeIPAMState, name: str) -> NodeIPAMState:
    """The patch of `name` failed: release its reservation (the next pass allocates again)."""
    pending = {n: c for n, c in state.pending.items() if n != name}
    return NodeIPAMState(state.next_candidate, pending, state.reported)


def _occupied_by(node: dict, settings: NodeIPAMSettings) -> set[int]:
    """The blocks a node's podCIDRs cover (occupyCIDRs), or ValueError with Kubernetes'
    error text."""
    name = meta(node).get("name")
    used: set[int] = set()
    for idx, text in enumerate(node_pod_cidrs(node)):
        try:
            cidr = ipaddress.ip_network(text, strict=False)
        except (TypeError, ValueError):
            raise ValueError(f"failed to parse node {name}, CIDR {text}") from None
        if idx >= 1:  # one cluster CIDR: no second (dual-stack) set to hold it
            raise ValueError(f"node:{name} has an allocated cidr: {text} at index:{idx} that "
                             "does not exist in cluster cidrs configuration")
        try:
            used.update(block_indices(settings, cidr))
        except OutOfRange as err:
            raise ValueError(f"failed to mark cidr[{cidr}] at idx [{idx}] as occupied for "
                             f"node: {name}: {err}") from None
    return used


def _allocate_next(used: set[int], settings: NodeIPAMSettings, cursor: int) -> int | None:
    """CidrSet.AllocateNext: the first free block from `cursor`, round-robin."""
    total = settings.max_cidrs
    if len(used) >= total:
        return None
    candidate = cursor % total
    for _ in range(total):
        if candidate not in used:
            return candidate
        candidate = (candidate + 1) % total
    return None


def sync_node_cidrs(nodes: Iterable[dict], settings: NodeIPAMSettings,
                    state: NodeIPAMState | None = None,
                    reserved: frozenset[int] | None = None) -> NodeIPAMSync:
    state = state or NodeIPAMState()
    used = set(reserved_blocks(settings) if reserved is None else reserved)
    nodes = sorted(nodes, key=lambda n: meta(n).get("name") or "")
    actions: list = []
    problems: list[str] = []
    reported: set = set()
    pending: dict[str, str] = {}
    waiting: list[dict] = []

    for node in nodes:
        name = meta(node).get("name") or ""
        cidrs = node_pod_cidrs(node)
        if not cidrs:
            if name in state.pending:  # patched, not in the cache yet: keep the block
                pending[name] = state.pending[name]
                used.update(block_indices(settings, ipaddress.ip_network(pending[name])))
            else:
                waiting.append(node)
            continue
        # a node that has podCIDRs needs no reservation any more (if someone else set other
        # ones meanwhile, ours is released, as updateCIDRsAllocation does)
        try:
            used |= _occupied_by(node, settings)
        except ValueError as err:
            key = (name, tuple(map(str, cidrs)))
            reported.add(key)
            if key not in state.reported:
                problems.append(str(err))
                actions.append(RecordEvent("default", "Node", name, "Warning", INVALID_POD_CIDR,
                                           str(err)))

    cursor = state.next_candidate
    assigned: dict[str, str] = {}
    retry = None
    for node in waiting:
        name = meta(node).get("name") or ""
        index = _allocate_next(used, settings, cursor)
        if index is None:
            problems.append(f"failed to allocate cidr from cluster cidr at idx:0: {NO_CIDRS_LEFT}")
            actions.append(RecordEvent("default", "Node", name, "Normal", CIDR_NOT_AVAILABLE,
                                       f"Node {name} status is now: {CIDR_NOT_AVAILABLE}"))
            retry = RETRY_AFTER
            continue
        used.add(index)
        cursor = (index + 1) % settings.max_cidrs
        cidr = str(settings.block(index))
        assigned[name] = pending[name] = cidr
        actions.append(PatchObject("v1", "Node", None, name, meta(node).get("uid") or "",
                                   {"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}}))
    return NodeIPAMSync(actions, NodeIPAMState(cursor, pending, frozenset(reported)), assigned,
                        problems, retry)


__all__ = ["NodeIPAMSettings", "NodeIPAMState", "NodeIPAMSync", "sync_node_cidrs", "forget",
           "reserved_blocks", "block_indices", "OutOfRange", "CIDR_NOT_AVAILABLE",
           "INVALID_POD_CIDR", "RETRY_AFTER", "DEFAULT_NODE_MASK"]
