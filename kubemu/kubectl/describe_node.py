"""kubectl describe node: conditions, addresses, capacity, system info, the node's pods and
what they ask for of its allocatable resources."""
from __future__ import annotations

from fractions import Fraction

from kubemu.api.quantity import canonical, cpu_millis, format_cpu, format_memory, memory_bytes

from .describe import NONE, Related, Writer, annotations_multiline, events_section, labels_multiline, meta
from .printers import node_roles
from .timefmt import rfc1123z, since

SYSTEM_INFO = (("Machine ID", "machineID"), ("System UUID", "systemUUID"), ("Boot ID", "bootID"),
               ("Kernel Version", "kernelVersion"), ("OS Image", "osImage"),
               ("Operating System", "operatingSystem"), ("Architecture", "architecture"),
               ("Container Runtime Version", "containerRuntimeVersion"),
               ("Kubelet Version", "kubeletVersion"), ("Kube-Proxy Version", "kubeProxyVersion"))


def describe_node(node: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec, status = meta(node), node.get("spec") or {}, node.get("status") or {}
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Roles:\t{','.join(node_roles(node)) or NONE}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, f"CreationTimestamp:\t{rfc1123z(m.get('creationTimestamp'))}\n")
    _taints(w, spec.get("taints") or [])
    w.write(0, f"Unschedulable:\t{'true' if spec.get('unschedulable') else 'false'}\n")
    if related.lease is not None:
        lease = related.lease.get("spec") or {}
        w.write(0, "Lease:\n")
        w.write(1, f"HolderIdentity:\t{lease.get('holderIdentity') or '<unset>'}\n")
        w.write(1, f"AcquireTime:\t{rfc1123z(lease['acquireTime']) if lease.get('acquireTime') else '<unset>'}\n")
        w.write(1, f"RenewTime:\t{rfc1123z(lease['renewTime']) if lease.get('renewTime') else '<unset>'}\n")
    if status.get("conditions"):
        w.write(0, "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n")
        w.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
        for c in status["conditions"]:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')} \t{rfc1123z(c.get('lastHeartbeatTime'))} \t"
                       f"{rfc1123z(c.get('lastTransitionTime'))} \t{c.get('reason', '')} \t{c.get('message', '')}\n")
    w.write(0, "Addresses:\n")
    for a in status.get("addresses") or []:
        w.write(1, f"{a.get('type', '')}:\t{a.get('address', '')}\n")
    for field, title in (("capacity", "Capacity"), ("allocatable", "Allocatable")):
        if status.get(field):
            w.write(0, f"{title}:\n")
            for name in sorted(status[field]):
                w.write(1, f"{name}:\t{_canonical(status[field][name])}\n")
    w.write(0, "System Info:\n")
    info = status.get("nodeInfo") or {}
    for title, field in SYSTEM_INFO:
        w.write(0, f"  {title}:\t{info.get(field, '')}\n")
    if spec.get("podCIDR"):
        w.write(0, f"PodCIDR:\t{spec['podCIDR']}\n")
    if spec.get("podCIDRs"):
        w.write(0, f"PodCIDRs:\t{','.join(spec['podCIDRs'])}\n")
    _pods(w, node, related.pods, now)
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def _canonical(value) -> str:
    try:
        return canonical(value)
    except ValueError:
        return str(value)


def _taints(w: Writer, taints: list[dict]) -> None:
    w.write(0, "Taints:\t")
    if not taints:
        w.write(0, NONE + "\n")
    for i, t in enumerate(taints):
        value = f"={t['value']}" if t.get("value") else ""
        w.write(0, f"{'' if i == 0 else chr(9)}{t.get('key', '')}{value}:{t.get('effect', '')}\n")


def pod_requests_and_limits(pod: dict) -> tuple[dict[str, int], dict[str, int]]:
    """PodRequestsAndLimits for cpu (millicores) and memory (bytes): the sum over the app
    containers, raised to any init container's own (they run one at a time, first)."""
    spec = pod.get("spec") or {}
    totals: tuple[dict[str, int], dict[str, int]] = ({"cpu": 0, "memory": 0}, {"cpu": 0, "memory": 0})
    for c in spec.get("containers") or []:
        for total, amounts in zip(totals, _container_amounts(c)):
            for name in total:
                total[name] += amounts[name]
    for c in spec.get("initContainers") or []:
        for total, amounts in zip(totals, _container_amounts(c)):
            for name in total:
                total[name] = max(total[name], amounts[name])
    return totals


def _container_amounts(container: dict) -> tuple[dict[str, int], dict[str, int]]:
    res = container.get("resources") or {}
    limits = _parsed(res.get("limits"))
    # a container's requests default to its limits
    requests = {name: _parsed(res.get("requests")).get(name) or limits[name] for name in limits}
    return requests, limits


def _parsed(values: dict | None) -> dict[str, int]:
    out = {"cpu": 0, "memory": 0}
    for name, convert in (("cpu", cpu_millis), ("memory", memory_bytes)):
        try:
            out[name] = convert((values or {}).get(name, 0))
        except ValueError:
            pass
    return out


def _percent(amount: int, allocatable: int) -> int:
    return int(Fraction(amount * 100, allocatable)) if allocatable else 0


def _pods(w: Writer, node: dict, pods: list[dict], now: float) -> None:
    status = node.get("status") or {}
    allocatable = _parsed(status.get("allocatable") or status.get("capacity"))
    w.write(0, f"Non-terminated Pods:\t({len(pods)} in total)\n")
    w.write(1, "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n")
    w.write(1, "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n")
    total_requests, total_limits = {"cpu": 0, "memory": 0}, {"cpu": 0, "memory": 0}
    for pod in pods:
        requests, limits = pod_requests_and_limits(pod)
        cells = []
        for name, fmt in (("cpu", format_cpu), ("memory", format_memory)):
            total_requests[name] += requests[name]
            total_limits[name] += limits[name]
            cells += [f"{fmt(requests[name])} ({_percent(requests[name], allocatable[name])}%)",
                      f"{fmt(limits[name])} ({_percent(limits[name], allocatable[name])}%)"]
        m = meta(pod)
        w.write(1, f"{m.get('namespace', '')}\t{m.get('name', '')}\t\t{chr(9).join(cells)}\t"
                   f"{since(m.get('creationTimestamp'), now)}\n")
    w.write(0, "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n")
    w.write(1, "Resource\tRequests\tLimits\n")
    w.write(1, "--------\t--------\t------\n")
    for name, fmt in (("cpu", format_cpu), ("memory", format_memory)):
        w.write(1, f"{name}\t{fmt(total_requests[name])} ({_percent(total_requests[name], allocatable[name])}%)\t"
                   f"{fmt(total_limits[name])} ({_percent(total_limits[name], allocatable[name])}%)\n")
