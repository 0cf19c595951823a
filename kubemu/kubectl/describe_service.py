"""kubectl describe service (its endpoints read from the Service's EndpointSlices as kubectl
reads them), endpoints and endpointslice."""
from __future__ import annotations

from kubemu.api.labels import format_labels
from kubemu.api.service import SERVICE_NAME_LABEL, endpoint_ready

from .describe import NONE, Related, Writer, annotations_multiline, events_section, labels_multiline, meta
from .printers import MAX_LISTED, host_port


def format_endpointslices(slices: list[dict], port_names: set[str] | None = None) -> str:
    """describe's formatEndpointSlices: `ip:port` of the ready endpoints for the ports named in
    `port_names` (all if None; bare IPs for a slice without ports), at most MAX_LISTED, then
    `+ N more...`; `<none>` without slices, "" when they hold nothing ready. Like kubectl, the
    list counts as cut off as soon as an endpoint (ready or not) comes after the third."""
    if not slices:
        return NONE
    listed: list[str] = []
    more, count = False, 0

    def add(endpoint: dict, port=None) -> None:
        nonlocal more, count
        if len(listed) == MAX_LISTED:
            more = True
        addresses = endpoint.get("addresses") or []
        if not endpoint_ready(endpoint) or not addresses:
            return
        if not more:
            listed.append(str(addresses[0]) if port is None else host_port(str(addresses[0]), port))
        count += 1

    for slice_ in slices:
        ports = slice_.get("ports") or []
        if not ports:
            for endpoint in slice_.get("endpoints") or []:
                add(endpoint)
        for port in ports:
            if port_names is None or (port.get("name") or "") in port_names:
                for endpoint in slice_.get("endpoints") or []:
                    add(endpoint, port.get("port"))
    text = ",".join(listed)
    return f"{text} + {count - MAX_LISTED} more..." if more else text


def _target_port(port: dict) -> str:
    target = port.get("targetPort", 0)
    return f"{target}/{port.get('protocol', '')}"


def describe_service(svc: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec = meta(svc), svc.get("spec") or {}
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, f"Selector:\t{format_labels(spec.get('selector')) or NONE}\n")
    w.write(0, f"Type:\t{spec.get('type', '')}\n")
    if spec.get("ipFamilyPolicy") is not None:
        w.write(0, f"IP Family Policy:\t{spec['ipFamilyPolicy']}\n")
    w.write(0, f"IP Families:\t{','.join(spec.get('ipFamilies') or []) or NONE}\n")
    w.write(0, f"IP:\t{spec.get('clusterIP', '')}\n")
    w.write(0, f"IPs:\t{','.join(spec.get('clusterIPs') or []) or NONE}\n")
    if spec.get("externalIPs"):
        w.write(0, f"External IPs:\t{','.join(spec['externalIPs'])}\n")
    if spec.get("loadBalancerIP"):
        w.write(0, f"Desired LoadBalancer IP:\t{spec['loadBalancerIP']}\n")
    if spec.get("externalName"):
        w.write(0, f"External Name:\t{spec['externalName']}\n")
    if ingress:
        w.write(0, "LoadBalancer Ingress:\t" + ", ".join(
            (f"{i['ip']} ({i['ipMode']})" if i.get("ipMode") else i["ip"]) if i.get("ip") else i.get("hostname", "")
            for i in ingress) + "\n")
    for port in spec.get("ports") or []:
        name = port.get("name") or "<unset>"
        protocol = port.get("protocol", "")
        w.write(0, f"Port:\t{name}\t{port.get('port', 0)}/{protocol}\n")
        w.write(0, f"TargetPort:\t{_target_port(port)}\n")
        if port.get("nodePort"):
            w.write(0, f"NodePort:\t{name}\t{port['nodePort']}/{protocol}\n")
        w.write(0, f"Endpoints:\t{format_endpointslices(related.endpointslices, {port.get('name') or ''})}\n")
    w.write(0, f"Session Affinity:\t{spec.get('sessionAffinity', '')}\n")
    if spec.get("externalTrafficPolicy"):
        w.write(0, f"External Traffic Policy:\t{spec['externalTrafficPolicy']}\n")
    if spec.get("internalTrafficPolicy") is not None:
        w.write(0, f"Internal Traffic Policy:\t{spec['internalTrafficPolicy']}\n")
    if spec.get("healthCheckNodePort"):
        w.write(0, f"HealthCheck NodePort:\t{spec['healthCheckNodePort']}\n")
    if spec.get("loadBalancerSourceRanges"):
        w.write(0, f"LoadBalancer Source Ranges:\t{','.join(spec['loadBalancerSourceRanges'])}\n")
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def describe_endpoints(ep: dict, related: Related, now: float) -> str:
    w = Writer()
    m = meta(ep)
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, "Subsets:\n")
    for subset in ep.get("subsets") or []:
        for title, key in (("Addresses", "addresses"), ("NotReadyAddresses", "notReadyAddresses")):
            w.write(1, f"{title}:\t{','.join(a.get('ip', '') for a in subset.get(key) or []) or NONE}\n")
        if subset.get("ports"):
            w.write(1, "Ports:\n")
            w.write(2, "Name\tPort\tProtocol\n")
            w.write(2, "----\t----\t--------\n")
            for port in subset["ports"]:
                w.write(2, f"{port.get('name') or '<unset>'}\t{port.get('port', 0)}\t{port.get('protocol', '')}\n")
        w.write(0, "\n")
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def _or_unset(value) -> str:
    return "<unset>" if value is None else str(value)


def describe_endpointslice(eps: dict, related: Related, now: float) -> str:
    w = Writer()
    m = meta(eps)
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, f"AddressType:\t{eps.get('addressType', '')}\n")
    if not eps.get("ports"):
        w.write(0, "Ports: <unset>\n")
    else:
        w.write(0, "Ports:\n")
        w.write(1, "Name\tPort\tProtocol\n")
        w.write(1, "----\t----\t--------\n")
        for port in eps["ports"]:
            w.write(1, f"{port.get('name') or '<unset>'}\t{_or_unset(port.get('port'))}\t{port.get('protocol', '')}\n")
    if not eps.get("endpoints"):
        w.write(0, "Endpoints: <none>\n")
    else:
        w.write(0, "Endpoints:\n")
        for endpoint in eps["endpoints"]:
            w.write(1, f"- Addresses:\t{', '.join(endpoint.get('addresses') or []) or NONE}\n")
            ready = (endpoint.get("conditions") or {}).get("ready")
            w.write(2, "Conditions:\n")
            w.write(3, f"Ready:\t{_or_unset(None if ready is None else str(bool(ready)).lower())}\n")
            w.write(2, f"Hostname:\t{_or_unset(endpoint.get('hostname'))}\n")
            ref = endpoint.get("targetRef")
            if ref is not None:
                w.write(2, f"TargetRef:\t{ref.get('kind', '')}/{ref.get('name', '')}\n")
            w.write(2, f"NodeName:\t{_or_unset(endpoint.get('nodeName'))}\n")
            w.write(2, f"Zone:\t{_or_unset(endpoint.get('zone'))}\n")
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()
