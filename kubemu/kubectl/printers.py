"""kubectl get's columns: one row of cells per object, computed as kubectl's printers do
(pkg/printers/internalversion/printers.go). Pure: objects and the time in, strings out.

Each kind has column definitions with a priority; priority 1 columns show only with -o wide.
"""
from __future__ import annotations

from typing import Callable

from kubemu.api.labels import format_labels
from kubemu.api.meta import format_selector

from kubemu.api import quantity
from kubemu.api.storage import is_default_class, storage_class_of

from .timefmt import human_duration, parse_time, since

NONE = "<none>"
NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
NODE_ROLE_LABEL = "kubernetes.io/role"
NODE_UNREACHABLE_REASON = "NodeLost"

Row = list[str]
RowFunc = Callable[[dict, float], Row]


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def _status(obj: dict) -> dict:
    return obj.get("status") or {}


def _age(obj: dict, now: float) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


# --- pods ----------------------------------------------------------------------------------

def _state(container: dict, which: str = "state") -> dict:
    return container.get(which) or {}


def _terminated_reason(term: dict, prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + term["reason"]
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def _is_restartable_init(container: dict | None) -> bool:
    return bool(container) and container.get("restartPolicy") == "Always"


def _condition_true(status: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in status.get("conditions") or [])


def pod_status_and_counts(pod: dict) -> tuple[str, int, int, int, float | None]:
    """printPod's STATUS reason, ready and total containers, restarts and the last restart's
    time: the first failing init container, else the last app container that is waiting or
    terminated, `Terminating` while deleted, else the phase."""
    spec, status = _spec(pod), _status(pod)
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
           for c in status.get("conditions") or []):
        reason = "SchedulingGated"
    inits = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(_is_restartable_init(c) for c in inits.values())
    ready = restarts = sidecar_restarts = 0
    last_restart = sidecar_last_restart = None

    def later(current: float | None, cs: dict) -> float | None:
        finished = parse_time((_state(cs, "lastState").get("terminated") or {}).get("finishedAt"))
        return finished if finished is not None and (current is None or finished > current) else current

    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        last_restart = later(last_restart, cs)
        sidecar = _is_restartable_init(inits.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            sidecar_last_restart = later(sidecar_last_restart, cs)
        term, waiting = _state(cs).get("terminated"), _state(cs).get("waiting")
        if term is not None and term.get("exitCode", 0) == 0:
            continue
        if sidecar and cs.get("started"):
            ready += bool(cs.get("ready"))
            continue
        if term is not None:
            reason = _terminated_reason(term, "Init:")
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break
    if not initializing or _condition_true(status, "Initialized"):
        restarts, last_restart = sidecar_restarts, sidecar_last_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            last_restart = later(last_restart, cs)
            state = _state(cs)
            if (state.get("waiting") or {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated") is not None:
                reason = _terminated_reason(state["terminated"])
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(status, "Ready") else "NotReady"
    if _meta(pod).get("deletionTimestamp"):
        if status.get("reason") == NODE_UNREACHABLE_REASON:
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return reason, ready, total, restarts, last_restart


def pod_row(pod: dict, now: float) -> Row:
    reason, ready, total, restarts, last_restart = pod_status_and_counts(pod)
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({since(last_restart, now)} ago)"
    spec, status = _spec(pod), _status(pod)
    ips = status.get("podIPs") or []
    ip = (ips[0].get("ip") if ips else status.get("podIP")) or NONE
    gates = spec.get("readinessGates") or []
    gates_text = NONE
    if gates:
        true = sum(_condition_true(status, g.get("conditionType")) for g in gates)
        gates_text = f"{true}/{len(gates)}"
    return [_meta(pod).get("name", ""), f"{ready}/{total}", reason, restarts_text, _age(pod, now),
            ip, spec.get("nodeName") or NONE, status.get("nominatedNodeName") or NONE, gates_text]


# --- nodes ---------------------------------------------------------------------------------

def node_roles(node: dict) -> list[str]:
    roles = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith(NODE_ROLE_PREFIX) and key[len(NODE_ROLE_PREFIX):]:
            roles.add(key[len(NODE_ROLE_PREFIX):])
        elif key == NODE_ROLE_LABEL and value:
            roles.add(value)
    return sorted(roles)


def node_status_text(node: dict) -> str:
    """Ready / NotReady (a False or Unknown Ready condition) / Unknown (none), then
    `,SchedulingDisabled` when cordoned."""
    ready = next((c for c in _status(node).get("conditions") or [] if c.get("type") == "Ready"), None)
    parts = ["Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"]
    if _spec(node).get("unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def _address(node: dict, kind: str) -> str:
    return next((a.get("address") for a in _status(node).get("addresses") or [] if a.get("type") == kind),
                NONE)


def node_row(node: dict, now: float) -> Row:
    info = _status(node).get("nodeInfo") or {}
    return [_meta(node).get("name", ""), node_status_text(node), ",".join(node_roles(node)) or NONE,
            _age(node, now), info.get("kubeletVersion", ""),
            _address(node, "InternalIP"), _address(node, "ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


# --- workloads -----------------------------------------------------------------------------

def _template_cells(obj: dict) -> list[str]:
    """CONTAINERS, IMAGES and SELECTOR (-o wide)."""
    containers = (((_spec(obj).get("template") or {}).get("spec") or {}).get("containers")) or []
    return [",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
            format_selector(_spec(obj).get("selector")) or NONE]


def _count(obj: dict, field: str) -> str:
    return str(int(_status(obj).get(field) or 0))


def _desired(obj: dict) -> int:
    replicas = _spec(obj).get("replicas")
    return 1 if replicas is None else int(replicas)


def deployment_row(d: dict, now: float) -> Row:
    return [_meta(d).get("name", ""), f"{_count(d, 'readyReplicas')}/{_desired(d)}",
            _count(d, "updatedReplicas"), _count(d, "availableReplicas"), _age(d, now), *_template_cells(d)]


def replicaset_row(rs: dict, now: float) -> Row:
    return [_meta(rs).get("name", ""), str(_desired(rs)), _count(rs, "replicas"), _count(rs, "readyReplicas"),
            _age(rs, now), *_template_cells(rs)]


def statefulset_row(sts: dict, now: float) -> Row:
    return [_meta(sts).get("name", ""), f"{_count(sts, 'readyReplicas')}/{_desired(sts)}", _age(sts, now),
            *_template_cells(sts)[:2]]


def daemonset_row(ds: dict, now: float) -> Row:
    pod_spec = ((_spec(ds).get("template") or {}).get("spec")) or {}
    return [_meta(ds).get("name", ""), *(_count(ds, f) for f in (
        "desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled",
        "numberAvailable")), format_labels(pod_spec.get("nodeSelector")) or NONE, _age(ds, now),
        *_template_cells(ds)]


def controller_of(obj: dict) -> str:
    """The controller as kubectl names it, `statefulset.apps/web` (formatResourceName), or <none>."""
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            group = (ref.get("apiVersion") or "").rpartition("/")[0]
            kind = ref.get("kind", "") + (f".{group}" if group else "")
            return f"{kind.lower()}/{ref.get('name', '')}"
    return NONE


def controllerrevision_row(rev: dict, now: float) -> Row:
    return [_meta(rev).get("name", ""), controller_of(rev), str(int(rev.get("revision") or 0)), _age(rev, now)]


# printJob's STATUS: the first true condition of these (Terminating while deleted, in between).
_JOB_STATUSES = (("Complete", "Complete"), ("Failed", "Failed"), ("", "Terminating"),
                 ("Suspended", "Suspended"), ("FailureTarget", "FailureTarget"),
                 ("SuccessCriteriaMet", "SuccessCriteriaMet"))


def job_status_text(job: dict) -> str:
    for ctype, text in _JOB_STATUSES:
        if (ctype and _condition_true(_status(job), ctype)) or (not ctype and _meta(job).get("deletionTimestamp")):
            return text
    return "Running"


def job_completions(job: dict) -> str:
    """`succeeded/completions`; a work queue (no completions) is `n/1`, `n/1 of <parallelism>`."""
    succeeded = _count(job, "succeeded")
    completions, parallelism = _spec(job).get("completions"), _spec(job).get("parallelism") or 0
    if completions is not None:
        return f"{succeeded}/{completions}"
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def job_duration(job: dict, now: float) -> str:
    start = parse_time(_status(job).get("startTime"))
    if start is None:
        return ""
    end = parse_time(_status(job).get("completionTime"))
    return human_duration((now if end is None else end) - start)


def job_row(job: dict, now: float) -> Row:
    return [_meta(job).get("name", ""), job_status_text(job), job_completions(job), job_duration(job, now),
            _age(job, now), *_template_cells(job)]


def _bool_text(value) -> str:
    """printBoolPtr: True, False, or <unset>."""
    return "<unset>" if value is None else str(bool(value))


def cronjob_row(cj: dict, now: float) -> Row:
    spec, status = _spec(cj), _status(cj)
    last = status.get("lastScheduleTime")
    return [_meta(cj).get("name", ""), spec.get("schedule", ""), spec.get("timeZone") or NONE,
            _bool_text(spec.get("suspend")), str(len(status.get("active") or [])),
            since(last, now) if last else NONE, _age(cj, now),
            *_template_cells(spec.get("jobTemplate") or {})]


_ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
                 ("ReadWriteOncePod", "RWOP"))


def access_modes_text(modes) -> str:
    """helper.GetAccessModesAsString: the short names, in this fixed order."""
    modes = modes or []
    return ",".join(short for mode, short in _ACCESS_MODES if mode in modes)


def storage_text(resources) -> str:
    """The `storage` quantity of a capacity or request list (0 when absent)."""
    value = (resources or {}).get("storage")
    return quantity.canonical(value) if value is not None else "0"


def _phase(obj: dict) -> str:
    return "Terminating" if _meta(obj).get("deletionTimestamp") else _status(obj).get("phase") or ""


def persistentvolume_row(pv: dict, now: float) -> Row:
    spec = _spec(pv)
    ref = spec.get("claimRef")
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if isinstance(ref, dict) else ""
    return [_meta(pv).get("name", ""), storage_text(spec.get("capacity")), access_modes_text(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""), _phase(pv), claim, storage_class_of(pv),
            spec.get("volumeAttributesClassName") or "<unset>", _status(pv).get("reason", ""), _age(pv, now),
            spec.get("volumeMode") or "<unset>"]


def persistentvolumeclaim_row(pvc: dict, now: float) -> Row:
    spec, status = _spec(pvc), _status(pvc)
    bound = bool(spec.get("volumeName"))
    return [_meta(pvc).get("name", ""), _phase(pvc), spec.get("volumeName", ""),
            storage_text(status.get("capacity")) if bound else "",
            access_modes_text(status.get("accessModes")) if bound else "", storage_class_of(pvc),
            spec.get("volumeAttributesClassName") or "<unset>", _age(pvc, now), spec.get("volumeMode") or "<unset>"]


def storageclass_row(sc: dict, now: float) -> Row:
    name = _meta(sc).get("name", "") + (" (default)" if is_default_class(sc) else "")
    return [name, sc.get("provisioner", ""), sc.get("reclaimPolicy") or "Delete",
            sc.get("volumeBindingMode") or "Immediate", str(bool(sc.get("allowVolumeExpansion"))).lower(),
            _age(sc, now)]


def poddisruptionbudget_row(pdb: dict, now: float) -> Row:
    spec = _spec(pdb)
    bounds = [str(spec[f]) if spec.get(f) is not None else "N/A" for f in ("minAvailable", "maxUnavailable")]
    return [_meta(pdb).get("name", ""), *bounds, _count(pdb, "disruptionsAllowed"), _age(pdb, now)]


# --- services ------------------------------------------------------------------------------

def load_balancer_addresses(svc: dict) -> str:
    """loadBalancerStatusStringer: the ingress points' IPs (else hostnames), sorted and
    deduplicated. Never clipped: the apiserver's Table is printed wide, and kubectl prints
    what the server sends."""
    found = {i.get("ip") or i.get("hostname") for i in (_status(svc).get("loadBalancer") or {}).get("ingress") or []
             if isinstance(i, dict)}
    return ",".join(sorted(a for a in found if a))


def service_external_ip(svc: dict) -> str:
    """getServiceExternalIP: externalIPs; a LoadBalancer's ingress (`<pending>` while it has
    none) before them; an ExternalName Service's name."""
    spec = _spec(svc)
    kind, external = spec.get("type"), ",".join(str(ip) for ip in spec.get("externalIPs") or [])
    if kind in ("ClusterIP", "NodePort"):
        return external or NONE
    if kind == "LoadBalancer":
        ingress = load_balancer_addresses(svc)
        return ",".join(a for a in (ingress, external) if a) or "<pending>"
    if kind == "ExternalName":
        return spec.get("externalName") or ""
    return "<unknown>"


def service_ports(svc: dict) -> str:
    """makePortString: `80/TCP`, `80:30080/TCP` with a NodePort, comma-joined."""
    pieces = []
    for p in _spec(svc).get("ports") or []:
        node_port = p.get("nodePort") or 0
        pieces.append(f"{p.get('port')}:{node_port}/{p.get('protocol', '')}" if node_port > 0
                      else f"{p.get('port')}/{p.get('protocol', '')}")
    return ",".join(pieces)


def service_row(svc: dict, now: float) -> Row:
    spec = _spec(svc)
    cluster_ips = spec.get("clusterIPs") or []
    return [_meta(svc).get("name", ""), str(spec.get("type") or ""), cluster_ips[0] if cluster_ips else NONE,
            service_external_ip(svc), service_ports(svc) or NONE, _age(svc, now),
            format_labels(spec.get("selector")) or NONE]


MAX_LISTED = 3  # kubectl lists this many endpoints or ports, then `+ N more...`


def _listed(items: list[str], count: int) -> str:
    """The first MAX_LISTED of `count` items, then how many more there are."""
    text = ",".join(items[:MAX_LISTED])
    return f"{text} + {count - MAX_LISTED} more..." if count > MAX_LISTED else text


def host_port(address: str, port) -> str:
    """net.JoinHostPort: an IPv6 address in brackets."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def format_endpoints(endpoints: dict) -> str:
    """formatEndpoints: `ip:port` of each ready address for every port (bare IPs for a subset
    without ports), `<none>` without subsets."""
    subsets = endpoints.get("subsets") or []
    if not subsets:
        return NONE
    listed: list[str] = []
    for subset in subsets:
        addresses = [a.get("ip", "") for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        if not ports:
            listed += addresses
        for port in ports:
            listed += [host_port(ip, port.get("port")) for ip in addresses]
    return _listed(listed, len(listed))


def _listed_or_unset(items: list[str]) -> str:
    """listWithMoreString: `<unset>` when there is nothing."""
    return _listed(items, len(items)) or "<unset>"


def endpointslice_ports(slice_: dict) -> str:
    """formatDiscoveryPorts: each port's number, else its name, else `*`."""
    return _listed_or_unset([str(p["port"]) if p.get("port") is not None else p.get("name") or "*"
                             for p in slice_.get("ports") or []])


def endpointslice_endpoints(slice_: dict) -> str:
    """formatDiscoveryEndpoints: every address of every endpoint, ready or not."""
    return _listed_or_unset([str(a) for e in slice_.get("endpoints") or [] for a in e.get("addresses") or []])


def endpoints_row(endpoints: dict, now: float) -> Row:
    return [_meta(endpoints).get("name", ""), format_endpoints(endpoints), _age(endpoints, now)]


def endpointslice_row(slice_: dict, now: float) -> Row:
    return [_meta(slice_).get("name", ""), str(slice_.get("addressType") or ""), endpointslice_ports(slice_),
            endpointslice_endpoints(slice_), _age(slice_, now)]


# --- the rest ------------------------------------------------------------------------------

def namespace_row(ns: dict, now: float) -> Row:
    return [_meta(ns).get("name", ""), _status(ns).get("phase", ""), _age(ns, now)]


def lease_row(lease: dict, now: float) -> Row:
    return [_meta(lease).get("name", ""), _spec(lease).get("holderIdentity") or "", _age(lease, now)]


def ipaddress_row(ip: dict, now: float) -> Row:
    """PARENTREF as kubectl prints it: <resource>[.<group>][/<namespace>]/<name>."""
    ref = _spec(ip).get("parentRef")
    parent = "<none>"
    if isinstance(ref, dict):
        resource = ".".join(str(p) for p in (ref.get("resource"), ref.get("group")) if p).lower()
        parent = "/".join(str(p) for p in (resource, ref.get("namespace"), ref.get("name")) if p)
    return [_meta(ip).get("name", ""), parent, _age(ip, now)]


def csr_row(csr: dict, now: float) -> Row:
    from kubemu.api.certificates import display_condition  # cryptography only when CSRs are shown
    seconds = _spec(csr).get("expirationSeconds")
    duration = human_duration(seconds) if isinstance(seconds, int) else NONE
    return [_meta(csr).get("name", ""), _age(csr, now), _spec(csr).get("signerName", ""),
            _spec(csr).get("username", ""), duration, display_condition(csr)]


def event_times(event: dict, now: float) -> tuple[str, str, int]:
    """LAST SEEN, FIRST SEEN and the count, from the old (count, first/lastTimestamp) or the
    new (eventTime, series) fields."""
    first = since(event.get("firstTimestamp") or event.get("eventTime"), now)
    last = since(event["lastTimestamp"], now) if event.get("lastTimestamp") else first
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series:
        last, count = since(series.get("lastObservedTime"), now), int(series.get("count") or 0)
    return last, first, count or 1


def sort_events(events: list[dict]) -> list[dict]:
    """SortableEvents: by last seen time."""
    def last(e: dict) -> float:
        series = e.get("series") or {}
        ts = parse_time(series.get("lastObservedTime") or e.get("lastTimestamp") or e.get("eventTime")
                        or e.get("firstTimestamp"))
        return ts if ts is not None else 0.0
    return sorted(events, key=last)


def event_interval(event: dict, now: float) -> str:
    """`5s`, or `5s (x3 over 2m)` for a repeated event (kubectl's getInterval)."""
    last, first, count = event_times(event, now)
    return f"{last} (x{count} over {first})" if count > 1 else first


def event_object(event: dict) -> str:
    ref = event.get("involvedObject") or {}
    kind = (ref.get("kind") or "").lower()
    return f"{kind}/{ref['name']}" if ref.get("name") else kind


def event_source(event: dict) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingController") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else component


def event_row(event: dict, now: float) -> Row:
    last, first, count = event_times(event, now)
    return [last, event.get("type", ""), event.get("reason", ""), event_object(event),
            (event.get("involvedObject") or {}).get("fieldPath", ""), event_source(event),
            (event.get("message") or "").strip(), first, str(count), _meta(event).get("name", "")]


def event_summary_row(event: dict, now: float) -> Row:
    """A row of `kubectl events`: LAST SEEN (with repeats), TYPE, REASON, OBJECT as Kind/name,
    MESSAGE."""
    ref = event.get("involvedObject") or {}
    return [event_interval(event, now), event.get("type", ""), event.get("reason", ""),
            f"{ref.get('kind', '')}/{ref.get('name', '')}", (event.get("message") or "").strip()]


EVENT_SUMMARY_HEADERS = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]

# --- the table -----------------------------------------------------------------------------

# kind -> ([(header, priority)], row function); priority 1 shows only with -o wide
PRINTERS: dict[str, tuple[list[tuple[str, int]], RowFunc]] = {
    "Pod": ([("NAME", 0), ("READY", 0), ("STATUS", 0), ("RESTARTS", 0), ("AGE", 0), ("IP", 1),
             ("NODE", 1), ("NOMINATED NODE", 1), ("READINESS GATES", 1)], pod_row),
    "Node": ([("NAME", 0), ("STATUS", 0), ("ROLES", 0), ("AGE", 0), ("VERSION", 0), ("INTERNAL-IP", 1),
              ("EXTERNAL-IP", 1), ("OS-IMAGE", 1), ("KERNEL-VERSION", 1), ("CONTAINER-RUNTIME", 1)], node_row),
    "Deployment": ([("NAME", 0), ("READY", 0), ("UP-TO-DATE", 0), ("AVAILABLE", 0), ("AGE", 0),
                    ("CONTAINERS", 1), ("IMAGES", 1), ("SELECTOR", 1)], deployment_row),
    "ReplicaSet": ([("NAME", 0), ("DESIRED", 0), ("CURRENT", 0), ("READY", 0), ("AGE", 0),
                    ("CONTAINERS", 1), ("IMAGES", 1), ("SELECTOR", 1)], replicaset_row),
    "StatefulSet": ([("NAME", 0), ("READY", 0), ("AGE", 0), ("CONTAINERS", 1), ("IMAGES", 1)], statefulset_row),
    "DaemonSet": ([("NAME", 0), ("DESIRED", 0), ("CURRENT", 0), ("READY", 0), ("UP-TO-DATE", 0), ("AVAILABLE", 0),
                   ("NODE SELECTOR", 0), ("AGE", 0), ("CONTAINERS", 1), ("IMAGES", 1), ("SELECTOR", 1)],
                  daemonset_row),
    "ControllerRevision": ([("NAME", 0), ("CONTROLLER", 0), ("REVISION", 0), ("AGE", 0)], controllerrevision_row),
    "Job": ([("NAME", 0), ("STATUS", 0), ("COMPLETIONS", 0), ("DURATION", 0), ("AGE", 0), ("CONTAINERS", 1),
             ("IMAGES", 1), ("SELECTOR", 1)], job_row),
    "CronJob": ([("NAME", 0), ("SCHEDULE", 0), ("TIMEZONE", 0), ("SUSPEND", 0), ("ACTIVE", 0), ("LAST SCHEDULE", 0),
                 ("AGE", 0), ("CONTAINERS", 1), ("IMAGES", 1), ("SELECTOR", 1)], cronjob_row),
    "PersistentVolume": ([("NAME", 0), ("CAPACITY", 0), ("ACCESS MODES", 0), ("RECLAIM POLICY", 0), ("STATUS", 0),
                          ("CLAIM", 0), ("STORAGECLASS", 0), ("VOLUMEATTRIBUTESCLASS", 0), ("REASON", 0),
                          ("AGE", 0), ("VOLUMEMODE", 1)], persistentvolume_row),
    "PersistentVolumeClaim": ([("NAME", 0), ("STATUS", 0), ("VOLUME", 0), ("CAPACITY", 0), ("ACCESS MODES", 0),
                               ("STORAGECLASS", 0), ("VOLUMEATTRIBUTESCLASS", 0), ("AGE", 0), ("VOLUMEMODE", 1)],
                              persistentvolumeclaim_row),
    "StorageClass": ([("NAME", 0), ("PROVISIONER", 0), ("RECLAIMPOLICY", 0), ("VOLUMEBINDINGMODE", 0),
                      ("ALLOWVOLUMEEXPANSION", 0), ("AGE", 0)], storageclass_row),
    "PodDisruptionBudget": ([("NAME", 0), ("MIN AVAILABLE", 0), ("MAX UNAVAILABLE", 0), ("ALLOWED DISRUPTIONS", 0),
                             ("AGE", 0)], poddisruptionbudget_row),
    "Service": ([("NAME", 0), ("TYPE", 0), ("CLUSTER-IP", 0), ("EXTERNAL-IP", 0), ("PORT(S)", 0), ("AGE", 0),
                 ("SELECTOR", 1)], service_row),
    "Endpoints": ([("NAME", 0), ("ENDPOINTS", 0), ("AGE", 0)], endpoints_row),
    "EndpointSlice": ([("NAME", 0), ("ADDRESSTYPE", 0), ("PORTS", 0), ("ENDPOINTS", 0), ("AGE", 0)],
                      endpointslice_row),
    "Namespace": ([("NAME", 0), ("STATUS", 0), ("AGE", 0)], namespace_row),
    "Lease": ([("NAME", 0), ("HOLDER", 0), ("AGE", 0)], lease_row),
    "IPAddress": ([("NAME", 0), ("PARENTREF", 0), ("AGE", 0)], ipaddress_row),
    "CertificateSigningRequest": ([("NAME", 0), ("AGE", 0), ("SIGNERNAME", 0), ("REQUESTOR", 0),
                                   ("REQUESTEDDURATION", 0), ("CONDITION", 0)], csr_row),
    "Event": ([("LAST SEEN", 0), ("TYPE", 0), ("REASON", 0), ("OBJECT", 0), ("SUBOBJECT", 1),
               ("SOURCE", 1), ("MESSAGE", 0), ("FIRST SEEN", 1), ("COUNT", 1), ("NAME", 1)], event_row),
}

# The columns of a kind kubectl has no printer for (kubectl's default table).
DEFAULT_PRINTER: tuple[list[tuple[str, int]], RowFunc] = (
    [("NAME", 0), ("AGE", 0)], lambda obj, now: [_meta(obj).get("name", ""), _age(obj, now)])


def _printer(kind: str) -> tuple[list[tuple[str, int]], RowFunc]:
    return PRINTERS.get(kind, DEFAULT_PRINTER)


def _shown(columns: list[tuple[str, int]], wide: bool) -> list[int]:
    return [i for i, (_, priority) in enumerate(columns) if wide or priority == 0]


def headers(kind: str, wide: bool = False) -> list[str]:
    columns, _ = _printer(kind)
    return [columns[i][0] for i in _shown(columns, wide)]


def row(kind: str, obj: dict, now: float, wide: bool = False) -> Row:
    columns, func = _printer(kind)
    cells = func(obj, now)
    return [cells[i] for i in _shown(columns, wide)]


def name_column(kind: str, wide: bool = False) -> int | None:
    """The index of the shown NAME cell, if any (multi-kind output prefixes it with `kind/`)."""
    shown = headers(kind, wide)
    return shown.index("NAME") if "NAME" in shown else None


def labels_text(obj: dict) -> str:
    """--show-labels' LABELS cell: k=v pairs sorted by key, comma-joined."""
    return format_labels(_meta(obj).get("labels")) or NONE

