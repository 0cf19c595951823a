"""kubectl expose's Service, built from the object exposed and the flags (pkg/cmd/expose and
polymorphichelpers' selector, port and protocol introspection). Pure: an object in, a Service
manifest out, or the CommandError kubectl words.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .session import CommandError

DNS1035_LABEL_MAX = 63  # a Service's name is a DNS-1035 label: the exposed name is cut to fit
EXPOSABLE = ("Pod", "Service", "Deployment", "ReplicaSet")  # canBeExposed's kinds kubemu serves
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass
class ExposeFlags:
    port: str = ""
    target_port: str = ""
    name: str = ""
    type: str = ""
    protocol: str = ""
    selector: str = ""
    labels: str = ""
    external_ip: str = ""
    session_affinity: str = ""
    cluster_ip: str = ""
    load_balancer_ip: str = ""


def group_kind(obj: dict) -> str:
    """schema.GroupKind's string: `Node`, `Deployment.apps`."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return f"{obj.get('kind', '')}.{group}" if group else str(obj.get("kind", ""))


def make_labels(labels: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def selector_for(obj: dict) -> str:
    """mapBasedSelectorForObject: a pod's labels, a Service's selector, a Deployment's or
    ReplicaSet's matchLabels (a selector with expressions cannot be a Service's)."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "Pod":
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if not labels:
            raise ValueError("the pod has no labels and cannot be exposed")
        return make_labels(labels)
    if kind == "Service":
        if spec.get("selector") is None:
            raise ValueError("the service has no pod selector set")
        return make_labels(spec["selector"])
    selector = spec.get("selector") or {}
    what = "deployment" if kind == "Deployment" else "replicaset"
    if not selector.get("matchLabels"):
        raise ValueError(f"invalid {what}: no selectors, therefore cannot be exposed")
    if selector.get("matchExpressions"):
        raise ValueError(f'couldn\'t convert expressions - "{_go_requirements(selector["matchExpressions"])}" '
                         "to map-based selector format")
    return make_labels(selector["matchLabels"])


def _go_requirements(expressions: list) -> str:
    """Go's %+v of []LabelSelectorRequirement: [{Key:a Operator:In Values:[x y]}]."""
    return "[" + " ".join(f"{{Key:{e.get('key', '')} Operator:{e.get('operator', '')} "
                          f"Values:[{' '.join(str(v) for v in e.get('values') or [])}]}}"
                          for e in expressions if isinstance(e, dict)) + "]"


def _pod_spec(obj: dict) -> dict:
    spec = obj.get("spec") or {}
    return spec if obj.get("kind") == "Pod" else (spec.get("template") or {}).get("spec") or {}


def _ports_and_protocols(obj: dict) -> tuple[list[str], dict[str, list[str]]]:
    """portsForObject (each port once, in order) and multiProtocolsForObject (port -> the
    protocols it is declared with, each once, TCP when unset): a Service's ports, else its pods'
    container ports."""
    if obj.get("kind") == "Service":
        declared = [(p.get("port"), p.get("protocol")) for p in (obj.get("spec") or {}).get("ports") or []]
    else:
        declared = [(p.get("containerPort"), p.get("protocol"))
                    for c in _pod_spec(obj).get("containers") or [] for p in c.get("ports") or []]
    ports: list[str] = []
    protocols: dict[str, list[str]] = {}
    for number, protocol in declared:
        key = str(number)
        if key not in ports:
            ports.append(key)
        found = protocols.setdefault(key, [])
        if (protocol or "TCP") not in found:  # kubectl lists a repeat twice, then the server refuses
            found.append(protocol or "TCP")
    return ports, protocols


def parse_labels(spec: str) -> dict[str, str]:
    """expose's parseLabels: `k=v,k2=v2` only (no set-based selectors)."""
    labels = {}
    for item in spec.split(","):
        parts = item.split("=")
        if len(parts) != 2:
            raise CommandError(f"unexpected label spec: {item}")
        if not parts[0]:
            raise CommandError("unexpected empty label key")
        labels[parts[0]] = parts[1]
    return labels


def _atoi(text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise CommandError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def int_or_string(text: str) -> int | str:
    """intstr.Parse: a number, else the name."""
    return int(text) if _INTEGER.fullmatch(text) else text


def _service_ports(flags: ExposeFlags, ports_text: str, protocols: dict[str, list[str]]) -> list[dict]:
    """createService's ports: one per number (`port-N` names when several); a port the object
    declares with several protocols becomes one port each (`port-N-tcp`) unless --protocol
    says which."""
    numbers = ports_text.split(",") if ports_text else []
    out: list[dict] = []
    for i, text in enumerate(numbers):
        port = _atoi(text)
        name = f"port-{i + 1}" if len(numbers) > 1 else ""
        protocol = flags.protocol
        if not protocol:
            found = protocols.get(text, [])
            if len(found) > 1:
                out += [{"name": f"port-{i + 1}-{p.lower()}", "port": port, "protocol": p} for p in found]
                continue
            protocol = found[0] if found else "TCP"
        out.append({"name": name, "port": port, "protocol": protocol})
    target = int_or_string(flags.target_port) if flags.target_port else None
    for p in out:
        p["targetPort"] = p["port"] if target is None else target
        if not p["name"]:
            del p["name"]
    return out


def exposed_service(obj: dict, flags: ExposeFlags) -> dict:
    """The Service `kubectl expose` creates for `obj`."""
    if obj.get("kind") not in EXPOSABLE:
        raise CommandError(f"cannot expose a {group_kind(obj)}")
    meta = obj.get("metadata") or {}
    selector_text = flags.selector
    if not selector_text:
        try:
            selector_text = selector_for(obj)
        except ValueError as err:
            raise CommandError(f"couldn't retrieve selectors via --selector flag or introspection: {err}") from None
    ports, protocols = _ports_and_protocols(obj)
    port_text = flags.port
    if not port_text:
        if not ports and flags.cluster_ip != "None":
            raise CommandError("couldn't find port via --port flag or introspection")
        port_text = ",".join(ports)
    labels_text = flags.labels or make_labels(meta.get("labels") or {})
    if not selector_text:
        raise CommandError("selector must be specified")
    selector = parse_labels(selector_text)
    labels = parse_labels(labels_text) if labels_text else None
    name = flags.name or str(meta.get("name") or "")[:DNS1035_LABEL_MAX]
    if not name:
        raise CommandError("name must be specified")
    spec: dict = {"selector": selector, "ports": _service_ports(flags, port_text, protocols)}
    if flags.external_ip:
        spec["externalIPs"] = [flags.external_ip]
    if flags.type:
        spec["type"] = flags.type
    if flags.type == "LoadBalancer" and flags.load_balancer_ip:
        spec["loadBalancerIP"] = flags.load_balancer_ip
    if flags.session_affinity:
        if flags.session_affinity not in ("None", "ClientIP"):
            raise CommandError(f"unknown session affinity: {flags.session_affinity}")
        spec["sessionAffinity"] = flags.session_affinity
    if flags.cluster_ip:
        spec["clusterIP"] = flags.cluster_ip
    metadata: dict = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}
