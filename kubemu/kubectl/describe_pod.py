"""kubectl describe pod, and the pod template and container sections the workloads share."""
from __future__ import annotations

from fractions import Fraction

from kubemu.api.quantity import canonical, parse_quantity

from .describe import (NONE, Related, Writer, annotations_multiline, controlled_by, events_section,
                       labels_multiline, meta, tolerations_multiline, yes_no)
from .timefmt import rfc1123z, until

PROBES = (("livenessProbe", "Liveness"), ("readinessProbe", "Readiness"), ("startupProbe", "Startup"))


def describe_pod(pod: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec, status = meta(pod), pod.get("spec") or {}, pod.get("status") or {}
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    if spec.get("priority") is not None:
        w.write(0, f"Priority:\t{spec['priority']}\n")
    if spec.get("priorityClassName"):
        w.write(0, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    if spec.get("serviceAccountName"):
        w.write(0, f"Service Account:\t{spec['serviceAccountName']}\n")
    node = spec.get("nodeName")
    w.write(0, f"Node:\t{node}/{status.get('hostIP', '')}\n" if node else f"Node:\t{NONE}\n")
    if status.get("startTime"):
        w.write(0, f"Start Time:\t{rfc1123z(status['startTime'])}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    phase = status.get("phase", "")
    if m.get("deletionTimestamp") and phase not in ("Failed", "Succeeded"):
        w.write(0, f"Status:\tTerminating (lasts {until(m['deletionTimestamp'], now)})\n")
        w.write(0, f"Termination Grace Period:\t{m.get('deletionGracePeriodSeconds', 0)}s\n")
    else:
        w.write(0, f"Status:\t{phase}\n")
    for field, title in (("reason", "Reason"), ("message", "Message")):
        if status.get(field):
            w.write(0, f"{title}:\t{status[field]}\n")
    w.write(0, f"IP:\t{status.get('podIP', '')}\n")
    ips = status.get("podIPs") or ([{"ip": status["podIP"]}] if status.get("podIP") else [])
    if ips:
        w.write(0, "IPs:\n")
        for ip in ips:
            w.write(1, f"IP:\t{ip.get('ip', '')}\n")
    else:
        w.write(0, f"IPs:\t{NONE}\n")
    if controlled_by(pod):
        w.write(0, f"Controlled By:\t{controlled_by(pod)}\n")
    if status.get("nominatedNodeName"):
        w.write(0, f"NominatedNodeName:\t{status['nominatedNodeName']}\n")
    if spec.get("initContainers"):
        containers(w, "Init Containers", spec["initContainers"], status.get("initContainerStatuses"))
    containers(w, "Containers", spec.get("containers") or [], status.get("containerStatuses") or [])
    if status.get("conditions"):
        w.write(0, "Conditions:\n  Type\tStatus\n")
        for c in status["conditions"]:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')} \n")
    volumes(w, spec.get("volumes"))
    w.write(0, f"QoS Class:\t{qos_class(pod)}\n")
    labels_multiline(w, "Node-Selectors", spec.get("nodeSelector"))
    tolerations_multiline(w, "Tolerations", spec.get("tolerations"))
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def pod_template(w: Writer, template: dict) -> None:
    """DescribePodTemplate, as deployments and replica sets show it."""
    m, spec = template.get("metadata") or {}, template.get("spec") or {}
    w.write(0, "Pod Template:\n")
    labels_multiline(w, "  Labels", m.get("labels"))
    if m.get("annotations"):
        annotations_multiline(w, "  Annotations", m["annotations"])
    if spec.get("serviceAccountName"):
        w.write(1, f"Service Account:\t{spec['serviceAccountName']}\n")
    if spec.get("initContainers"):
        containers(w, "Init Containers", spec["initContainers"], None, space="  ")
    containers(w, "Containers", spec.get("containers") or [], None, space="  ")
    volumes(w, spec.get("volumes"), space="  ")
    labels_multiline(w, "  Node-Selectors", spec.get("nodeSelector"))
    tolerations_multiline(w, "  Tolerations", spec.get("tolerations"))


def containers(w: Writer, label: str, specs: list[dict], statuses: list[dict] | None, space: str = "") -> None:
    """describeContainers; `statuses` None for a template (no state to show)."""
    by_name = {s.get("name"): s for s in statuses or []}
    w.write(0, f"{space}{label}:\n" if specs else f"{space}{label}:\t{NONE}\n")
    for c in specs:
        status = by_name.get(c.get("name")) if statuses is not None else None
        w.write(1, f"{' ' if space else ''}{c.get('name', '')}:\n")
        if status is not None:
            w.write(2, f"Container ID:\t{status.get('containerID', '')}\n")
        w.write(2, f"Image:\t{c.get('image', '')}\n")
        if status is not None:
            w.write(2, f"Image ID:\t{status.get('imageID', '')}\n")
        ports = c.get("ports") or []
        for title, field in (("Port", "containerPort"), ("Host Port", "hostPort")):
            text = ", ".join(f"{p.get(field, 0)}/{p.get('protocol', 'TCP')}" for p in ports)
            w.write(2, f"{title}s:\t{text}\n" if "," in text else f"{title}:\t{text or NONE}\n")
        for field, title in (("command", "Command"), ("args", "Args")):
            if c.get(field):
                w.write(2, f"{title}:\n")
                for arg in c[field]:
                    for line in str(arg).split("\n"):
                        w.write(3, f"{line}\n")
        if status is not None:
            container_state(w, status)
        resources(w, c.get("resources") or {})
        for field, title in PROBES:
            if c.get(field):
                w.write(2, f"{title}:\t{probe_text(c[field])}\n")
        env(w, c.get("env") or [])
        mounts = sorted(c.get("volumeMounts") or [], key=lambda v: v.get("mountPath", ""))
        w.write(2, "Mounts:\n" if mounts else f"Mounts:\t{NONE}\n")
        for v in mounts:
            flags = ["ro" if v.get("readOnly") else "rw"] + ([f'path="{v["subPath"]}"'] if v.get("subPath") else [])
            w.write(3, f"{v.get('mountPath', '')} from {v.get('name', '')} ({','.join(flags)})\n")


def container_state(w: Writer, status: dict) -> None:
    state_section(w, "State", status.get("state") or {})
    if (status.get("lastState") or {}).get("terminated"):
        state_section(w, "Last State", status["lastState"])
    w.write(2, f"Ready:\t{yes_no(status.get('ready'))}\n")
    w.write(2, f"Restart Count:\t{status.get('restartCount', 0)}\n")


def state_section(w: Writer, title: str, state: dict) -> None:
    if state.get("running") is not None:
        w.write(2, f"{title}:\tRunning\n")
        w.write(3, f"Started:\t{rfc1123z(state['running'].get('startedAt'))}\n")
    elif state.get("terminated") is not None:
        term = state["terminated"]
        w.write(2, f"{title}:\tTerminated\n")
        for field, label in (("reason", "Reason"), ("message", "Message")):
            if term.get(field):
                w.write(3, f"{label}:\t{term[field]}\n")
        w.write(3, f"Exit Code:\t{term.get('exitCode', 0)}\n")
        if term.get("signal"):
            w.write(3, f"Signal:\t{term['signal']}\n")
        w.write(3, f"Started:\t{rfc1123z(term.get('startedAt'))}\n")
        w.write(3, f"Finished:\t{rfc1123z(term.get('finishedAt'))}\n")
    else:
        w.write(2, f"{title}:\tWaiting\n")
        if (state.get("waiting") or {}).get("reason"):
            w.write(3, f"Reason:\t{state['waiting']['reason']}\n")


def resources(w: Writer, requirements: dict) -> None:
    for field, title in (("limits", "Limits"), ("requests", "Requests")):
        values = requirements.get(field) or {}
        if values:
            w.write(2, f"{title}:\n")
        for name in sorted(values):
            w.write(3, f"{name}:\t{_quantity(values[name])}\n")


def _quantity(value) -> str:
    try:
        return canonical(value)
    except ValueError:
        return str(value)


def probe_text(probe: dict) -> str:
    """DescribeProbe: `http-get http://:8080/healthz delay=0s timeout=1s period=10s ...`."""
    attrs = (f"delay={probe.get('initialDelaySeconds', 0)}s timeout={probe.get('timeoutSeconds', 1)}s "
             f"period={probe.get('periodSeconds', 10)}s #success={probe.get('successThreshold', 1)} "
             f"#failure={probe.get('failureThreshold', 3)}")
    if probe.get("exec") is not None:
        return f"exec [{' '.join(str(a) for a in probe['exec'].get('command') or [])}] {attrs}"
    if probe.get("httpGet") is not None:
        get = probe["httpGet"]
        scheme = str(get.get("scheme", "HTTP")).lower()
        return f"http-get {scheme}://{get.get('host', '')}:{get.get('port', '')}{get.get('path', '')} {attrs}"
    if probe.get("tcpSocket") is not None:
        sock = probe["tcpSocket"]
        return f"tcp-socket {sock.get('host', '')}:{sock.get('port', '')} {attrs}"
    if probe.get("grpc") is not None:
        return f"grpc <pod>:{probe['grpc'].get('port', '')} {probe['grpc'].get('service', '')} {attrs}"
    return f"unknown {attrs}"


def env(w: Writer, variables: list[dict]) -> None:
    w.write(2, "Environment:\n" if variables else f"Environment:\t{NONE}\n")
    for e in variables:
        source = e.get("valueFrom")
        if source is None:
            for i, line in enumerate(str(e.get("value", "")).split("\n")):
                w.write(3, f"{e.get('name', '')}:\t{line}\n" if i == 0 else f"\t{line}\n")
        elif source.get("fieldRef"):
            ref = source["fieldRef"]
            w.write(3, f"{e.get('name', '')}:\t ({ref.get('apiVersion', 'v1')}:{ref.get('fieldPath', '')})\n")
        else:
            kind = next(iter(source), "valueFrom")
            w.write(3, f"{e.get('name', '')}:\t<set from {kind}>\n")


def volumes(w: Writer, vols: list[dict] | None, space: str = "") -> None:
    if not vols:
        w.write(0, f"{space}Volumes:\t{NONE}\n")
        return
    w.write(0, f"{space}Volumes:\n")
    for v in vols:
        w.write(1, f"{space}{v.get('name', '')}:\n")
        kind = next((k for k in v if k != "name"), "")
        w.write(2, f"{space}Type:\t{kind[:1].upper() + kind[1:]}\n")
        for key, value in sorted((v.get(kind) or {}).items()):
            w.write(2, f"{space}{key[:1].upper() + key[1:]}:\t{value}\n")


# --- QoS class -------------------------------------------------------------------------------

def _amounts(values: dict | None) -> dict[str, Fraction]:
    out = {}
    for name in ("cpu", "memory"):
        try:
            amount = parse_quantity((values or {}).get(name, 0))
        except ValueError:
            continue
        if amount:
            out[name] = amount
    return out


def qos_class(pod: dict) -> str:
    """GetPodQOS: BestEffort without requests or limits; Guaranteed when every container
    limits cpu and memory and requests (defaulted to the limits) equal them; else Burstable."""
    spec = pod.get("spec") or {}
    guaranteed, anything = True, False
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        res = c.get("resources") or {}
        limits = _amounts(res.get("limits"))
        requests = {**limits, **_amounts(res.get("requests"))}
        anything = anything or bool(requests or limits)
        if set(limits) != {"cpu", "memory"} or requests != limits:
            guaranteed = False
    if not anything:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
