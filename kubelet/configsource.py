"""How the kubelet's pure modules (envvars.py, volumes.py) read ConfigMaps and Secrets.

    Lookup = (resource, namespace, name) -> the object, or None when the API has none
             resource is CONFIGMAPS or SECRETS; it may raise Unavailable (not known yet)

The kubelet's shell gives them kubelet/apiagent.py's cache (ApiAgent.lookup); a kubelet
without --api has no API objects: NO_OBJECTS.
"""
from __future__ import annotations

from typing import Callable

from kubemu.api.configobjects import decode_base64

CONFIGMAPS, SECRETS = "configmaps", "secrets"

Lookup = Callable[[str, str, str], "dict | None"]


class Unavailable(Exception):
    """The object's state is not known yet (the cache has not heard from the API): try later."""


def NO_OBJECTS(resource: str, namespace: str, name: str) -> dict | None:
    return None


def not_found(resource: str, name: str) -> str:
    """The kubelet's object managers' NotFound: `configmap "x" not found`."""
    return f'{resource.removesuffix("s")} "{name}" not found'


def string_data(resource: str, obj: dict) -> dict[str, str]:
    """What env vars read: a ConfigMap's `data` (not binaryData), a Secret's decoded `data`."""
    if resource == SECRETS:
        return {k: v.decode("utf-8", "surrogateescape")
                for k, v in binary_data(resource, obj).items()}
    return _strings(obj.get("data"))


def binary_data(resource: str, obj: dict) -> dict[str, bytes]:
    """What volume files hold: a ConfigMap's data and binaryData, a Secret's decoded data."""
    if resource == SECRETS:
        return _decoded(obj.get("data"))
    return {**{k: v.encode("utf-8", "surrogatepass") for k, v in _strings(obj.get("data")).items()},
            **_decoded(obj.get("binaryData"))}


def _strings(values) -> dict[str, str]:
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if isinstance(k, str) and isinstance(v, str)}


def _decoded(values) -> dict[str, bytes]:
    out = {}
    for k, v in _strings(values).items():
        try:
            out[k] = decode_base64(v)
        except ValueError:
            continue  # the apiserver validated it: nothing better to do with what it let by
    return out


def references(pod: dict) -> set[tuple[str, str, str]]:
    """(resource, namespace, name) of every ConfigMap and Secret a pod's containers and
    volumes read (podutil.VisitPodConfigmapNames / VisitPodSecretNames)."""
    spec = pod.get("spec") or {}
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    refs: set[tuple[str, str]] = set()
    for ctr in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for source in ctr.get("envFrom") or []:
            if (source.get("configMapRef") or {}).get("name"):
                refs.add((CONFIGMAPS, source["configMapRef"]["name"]))
            if (source.get("secretRef") or {}).get("name"):
                refs.add((SECRETS, source["secretRef"]["name"]))
        for var in ctr.get("env") or []:
            source = var.get("valueFrom") or {}
            if (source.get("configMapKeyRef") or {}).get("name"):
                refs.add((CONFIGMAPS, source["configMapKeyRef"]["name"]))
            if (source.get("secretKeyRef") or {}).get("name"):
                refs.add((SECRETS, source["secretKeyRef"]["name"]))
    for volume in spec.get("volumes") or []:
        if (volume.get("configMap") or {}).get("name"):
            refs.add((CONFIGMAPS, volume["configMap"]["name"]))
        if (volume.get("secret") or {}).get("secretName"):
            refs.add((SECRETS, volume["secret"]["secretName"]))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if (source.get("configMap") or {}).get("name"):
                refs.add((CONFIGMAPS, source["configMap"]["name"]))
            if (source.get("secret") or {}).get("name"):
                refs.add((SECRETS, source["secret"]["name"]))
    return {(resource, namespace, name) for resource, name in refs}
