"""The downward API: a pod's field or a container's resource as the text a container sees,
in an env var (envvars.py) or a downwardAPI volume file (volumes.py).

    field_value(pod, field_path, pod_ips, host_ips) -> str   (raises DownwardError)
    resource_value(selector, pod, container_name, allocatable) -> str   (raises DownwardError)

As the kubelet has them (podFieldSelectorRuntimeValue, fieldpath.ExtractFieldPathAsString,
resource.ExtractResourceValueByContainerNameAndNodeAllocatable), with their error wording.
"""
from __future__ import annotations

import math

from kubemu.api import quantity
from kubemu.api.fielderrors import go_quote
from kubemu.api.pod import (POD_FIELD_LABELS, SUBSCRIPTED_FIELDS, qualified_name_errors,
                            split_subscript)

LIMITED = ("cpu", "memory", "ephemeral-storage")  # a missing limit reads as the node's allocatable


class DownwardError(Exception):
    pass


def format_map(values: dict) -> str:
    """fieldpath.FormatMap: `key="value"` lines, sorted by key, values Go-quoted."""
    return "\n".join(f"{k}={go_quote(str(values[k]))}" for k in sorted(values))


def field_value(pod: dict, field_path: str, pod_ips: list[str], host_ips: list[str],
                api_version: str = "v1") -> str:
    if api_version != "v1":
        raise DownwardError(f"unsupported pod version: {api_version}")
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    subscripted = split_subscript(field_path)
    if subscripted is not None:
        base, sub = subscripted
        if base not in SUBSCRIPTED_FIELDS:
            raise DownwardError(f"field label does not support subscript: {field_path}")
        errors = qualified_name_errors(sub.lower() if base == "metadata.annotations" else sub)
        if errors:
            raise DownwardError(f"invalid key subscript in {field_path}: {';'.join(errors)}")
        return str((meta.get(base.partition(".")[2]) or {}).get(sub, ""))
    if field_path not in POD_FIELD_LABELS:
        raise DownwardError(f"field label not supported: {field_path}")
    simple = {
        "metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": host_ips[0] if host_ips else "",
        "status.hostIPs": ",".join(host_ips),
        "status.podIP": pod_ips[0] if pod_ips else "", "status.podIPs": ",".join(pod_ips),
    }
    if field_path in simple:
        return simple[field_path] or ""
    if field_path in SUBSCRIPTED_FIELDS:
        return format_map(meta.get(field_path.partition(".")[2]) or {})
    raise DownwardError(f"unsupported fieldPath: {field_path}")


def resource_value(selector: dict, pod: dict, container_name: str,
                   allocatable: dict | None = None) -> str:
    """A container's request or limit divided by the divisor, rounded up; a limit it does not
    set is the node's allocatable amount, as the kubelet merges them."""
    spec = pod.get("spec") or {}
    container = next((c for field in ("containers", "initContainers")
                      for c in spec.get(field) or [] if c.get("name") == container_name), None)
    if container is None:
        raise DownwardError(f"container {container_name} not found")
    resource = selector.get("resource") or ""
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or name not in LIMITED:
        raise DownwardError(f"unsupported container resource : {resource}")
    amounts = dict(((container.get("resources") or {}).get(kind)) or {})
    if kind == "limits" and not amounts.get(name) and (allocatable or {}).get(name):
        amounts[name] = allocatable[name]
    value = quantity.parse_quantity(amounts.get(name) or 0)
    divisor = quantity.parse_quantity(selector.get("divisor") or 0) or 1
    if name == "cpu":  # in millicores, as Quantity.MilliValue
        return str(math.ceil(math.ceil(value * 1000) / math.ceil(divisor * 1000)))
    return str(math.ceil(math.ceil(value) / math.ceil(divisor)))
