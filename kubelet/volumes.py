"""What a pod's volumes hold, as the kubelet's volume plugins decide it, pure.

    plugin_dir(volume) -> "kubernetes.io~configmap", ...   (<pod dir>/volumes/<it>/<name>)
    payload(pod, volume, lookup, pod_ips, host_ips, allocatable=None, token=None)
        -> {path: File(data, mode)} | VolumeError       configMap, secret, downwardAPI, projected
    host_path_check(type, mode) -> HostPathAction | VolumeError       hostPath's `type`
    claimed_volume(namespace, claim, pvc, pv) -> ClaimedVolume | VolumeError
        a persistentVolumeClaim volume: where its PersistentVolume is on the node
    failed_mount(volume_name, error) -> the FailedMount Event's message

A configMap or secret volume holds every key (a ConfigMap's data and binaryData; a Secret's
data, base64-decoded), or with `items` only those keys at their paths (a missing key is an
error, unless the source is optional); each file has the item's `mode`, else the volume's
`defaultMode` (0644 when unset). A missing ConfigMap or Secret is an error unless optional
(then the volume is empty). downwardAPI files hold pod fields and container resources;
projected volumes merge their sources' files. Paths are checked when written
(atomicwriter.py), as the kubelet's AtomicWriter does.

A persistentVolumeClaim volume is its claim's volume: the claim (in the pod's namespace) must
be Bound, and its PersistentVolume bound to that very claim (the checks and words of the
kubelet's desired-state populator); the volume's hostPath (or local) path is then mounted as
the hostPath plugin mounts it. A claim not bound yet fails the mount, and the kubelet tries
again, as its volume manager does.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from kubemu.api.pod import DEFAULT_MODE, TOKEN_EXPIRATION_DEFAULT, volume_type

from .configsource import CONFIGMAPS, SECRETS, Lookup, Unavailable, binary_data, not_found
from .downward import DownwardError, field_value, resource_value

FAILED_MOUNT = "FailedMount"  # the Warning Event's reason
PLUGIN_DIRS = {"emptyDir": "kubernetes.io~empty-dir", "hostPath": "kubernetes.io~host-path",
               "configMap": "kubernetes.io~configmap", "secret": "kubernetes.io~secret",
               "downwardAPI": "kubernetes.io~downward-api", "projected": "kubernetes.io~projected",
               # a link to the claimed volume's directory (kubemu's way to name it in the pod)
               "persistentVolumeClaim": "kubernetes.io~local-volume"}
PAYLOAD_KINDS = ("configMap", "secret", "downwardAPI", "projected")  # the kinds payload() fills

# (namespace, service account, audience or None, expiration seconds, pod) -> a token; may raise
# Unavailable
TokenSource = Callable[[str, str, "str | None", int, dict], str]


@dataclass(frozen=True)
class File:
    data: bytes
    mode: int


@dataclass(frozen=True)
class VolumeError:
    message: str


def plugin_dir(volume: dict) -> str:
    return PLUGIN_DIRS[volume_type(volume)]


def failed_mount(volume_name: str, error: VolumeError) -> str:
    return f'MountVolume.SetUp failed for volume "{volume_name}" : {error.message}'


def payload(pod: dict, volume: dict, lookup: Lookup, pod_ips: list[str], host_ips: list[str],
            allocatable: dict | None = None, token: TokenSource | None = None
            ) -> dict[str, File] | VolumeError:
    kind = volume_type(volume)
    source = volume[kind]
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    default_mode = source.get("defaultMode", DEFAULT_MODE)
    try:
        if kind == "configMap":
            return _keyed(lookup, CONFIGMAPS, namespace, source.get("name", ""), source,
                          default_mode)
        if kind == "secret":
            return _keyed(lookup, SECRETS, namespace, source.get("secretName", ""), source,
                          default_mode)
        if kind == "downwardAPI":
            return _downward(pod, source.get("items") or [], default_mode, pod_ips, host_ips,
                             allocatable)
        if kind == "projected":
            return _projected(pod, source, default_mode, lookup, pod_ips, host_ips,
                              allocatable, token)
    except _Failed as failed:
        return VolumeError(failed.message)
    raise ValueError(f"a {kind} volume has no payload")


class _Failed(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _get(lookup: Lookup, resource: str, namespace: str, name: str, optional: bool) -> dict:
    try:
        obj = lookup(resource, namespace, name)
    except Unavailable as err:
        raise _Failed(str(err)) from None
    if obj is None:
        if not optional:
            raise _Failed(not_found(resource, name))
        return {}
    return obj


def _keyed(lookup: Lookup, resource: str, namespace: str, name: str, source: dict,
           default_mode: int) -> dict[str, File]:
    """MakePayload of the configMap and secret plugins."""
    optional = source.get("optional") is True
    data = binary_data(resource, _get(lookup, resource, namespace, name, optional))
    items = source.get("items") or []
    if not items:
        return {k: File(v, default_mode) for k, v in data.items()}
    out = {}
    for item in items:
        if item.get("key") not in data:
            if optional:
                continue
            noun = "configmap references non-existent config key" if resource == CONFIGMAPS \
                else "references non-existent secret key"
            raise _Failed(f"{noun}: {item.get('key')}")
        out[item["path"]] = File(data[item["key"]], item.get("mode", default_mode))
    return out


def _downward(pod: dict, items: list[dict], default_mode: int, pod_ips: list[str],
              host_ips: list[str], allocatable: dict | None) -> dict[str, File]:
    """downwardapi.CollectData: every file, or every error at once."""
    out, errors = {}, []
    for item in items:
        try:
            if item.get("fieldRef"):
                ref = item["fieldRef"]
                text = field_value(pod, ref.get("fieldPath", ""), pod_ips, host_ips,
                                   ref.get("apiVersion") or "v1")
            else:
                ref = item.get("resourceFieldRef") or {}
                text = resource_value(ref, pod, ref.get("containerName", ""), allocatable)
        except DownwardError as err:
            errors.append(str(err))
            continue
        out[os.path.normpath(item["path"])] = File(text.encode(), item.get("mode", default_mode))
    if errors:
        raise _Failed(_aggregate(errors))
    return out


def _projected(pod: dict, source: dict, default_mode: int, lookup: Lookup, pod_ips: list[str],
               host_ips: list[str], allocatable: dict | None, token: TokenSource | None
               ) -> dict[str, File]:
    """The projected plugin's collectData: each source's files merged, errors aggregated."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    namespace = meta.get("namespace") or "default"
    out: dict[str, File] = {}
    errors = []
    for src in source.get("sources") or []:
        try:
            if src.get("configMap") is not None or src.get("secret") is not None:
                resource, ref = ((CONFIGMAPS, src["configMap"]) if src.get("configMap") is not None
                                 else (SECRETS, src["secret"]))
                out.update(_keyed(lookup, resource, namespace, ref.get("name", ""), ref,
                                  default_mode))
            elif src.get("downwardAPI") is not None:
                out.update(_downward(pod, src["downwardAPI"].get("items") or [], default_mode,
                                     pod_ips, host_ips, allocatable))
            elif src.get("serviceAccountToken") is not None:
                tp = src["serviceAccountToken"]
                if token is None:
                    raise _Failed("kubemu issues ServiceAccount tokens only to a node of a cluster")
                try:
                    text = token(*token_request(pod, tp), pod)
                except Unavailable as err:
                    raise _Failed(str(err)) from None
                out[tp["path"]] = File(text.encode(), default_mode)
        except _Failed as failed:
            errors.append(failed.message)
    if errors:
        raise _Failed(_aggregate(errors))
    return out


def token_request(pod: dict, projection: dict) -> tuple[str, str, str | None, int]:
    """What a serviceAccountToken projection asks for: (namespace, service account, audience,
    expiration seconds)."""
    return ((pod.get("metadata") or {}).get("namespace") or "default",
            (pod.get("spec") or {}).get("serviceAccountName") or "default",
            projection.get("audience") or None, projection.get("expirationSeconds", TOKEN_EXPIRATION_DEFAULT))


def token_projections(pod: dict) -> list[dict]:
    """Every serviceAccountToken projection of the pod's projected volumes."""
    return [src["serviceAccountToken"] for volume in (pod.get("spec") or {}).get("volumes") or []
            for src in ((volume.get("projected") or {}).get("sources") or [])
            if isinstance(src, dict) and src.get("serviceAccountToken") is not None]


def _aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate's text: one message as is, several in brackets."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


# --- persistentVolumeClaim --------------------------------------------------------------------

@dataclass(frozen=True)
class ClaimedVolume:
    path: str   # the PersistentVolume's directory on the node
    type: str   # its hostPath type (host_path_check); "Directory" for a local volume


def claimed_volume(namespace: str, claim: str, pvc: dict | None, pv: dict | None) -> ClaimedVolume | VolumeError:
    """The volume behind claim `claim`: `pvc` is the claim as the API has it (None: none), `pv`
    the volume it names (None: none, or not asked for)."""
    def error(why: str) -> VolumeError:
        return VolumeError(f"error processing PVC {namespace}/{claim}: {why}")
    if pvc is None:
        return error(f'failed to fetch PVC from API server: persistentvolumeclaims "{claim}" not found')
    meta, spec = pvc.get("metadata") or {}, pvc.get("spec") or {}
    if meta.get("deletionTimestamp"):
        return error(f"can't start pod because PVC {namespace}/{claim} is being deleted")
    phase, volume = (pvc.get("status") or {}).get("phase") or "", spec.get("volumeName") or ""
    if phase != "Bound" or not volume:
        return error(f'PVC {namespace}/{claim} has non-bound phase ("{phase}") or empty pvc.Spec.VolumeName ("{volume}")')
    if pv is None:
        return error(f'failed to fetch PV {volume} from API server: persistentvolumes "{volume}" not found')
    ref = (pv.get("spec") or {}).get("claimRef")
    if ref is None:
        return error(f"found PV object {volume} but it has a nil pv.Spec.ClaimRef indicating it is not yet "
                     "bound to the claim")
    if ref.get("uid") != meta.get("uid"):
        return error(f"found PV object {volume} but its pv.Spec.ClaimRef.UID {ref.get('uid') or ''} does not "
                     f"point to claim.UID {meta.get('uid') or ''}")
    source = pv.get("spec") or {}
    if isinstance(source.get("hostPath"), dict) and source["hostPath"].get("path"):
        return ClaimedVolume(source["hostPath"]["path"], source["hostPath"].get("type") or "")
    if isinstance(source.get("local"), dict) and source["local"].get("path"):
        return ClaimedVolume(source["local"]["path"], "Directory")   # a local volume must exist
    return error(f"PV {volume}: kubemu mounts hostPath and local PersistentVolumes only")


# --- hostPath (the hostPath plugin's type checker) ----------------------------------------------

class HostPathAction(Enum):
    USE = "use"                  # the path is there, of the right type
    MAKE_DIRECTORY = "mkdir"     # DirectoryOrCreate: mkdir -p, mode 0755
    MAKE_FILE = "touch"          # FileOrCreate: an empty file, mode 0644


_TYPE_TESTS = {"Directory": (stat.S_ISDIR, "a directory"), "File": (stat.S_ISREG, "a file"),
               "Socket": (stat.S_ISSOCK, "a socket file"),
               "CharDevice": (stat.S_ISCHR, "a character device"),
               "BlockDevice": (stat.S_ISBLK, "a block device")}


def host_path_check(kind: str, path: str, mode: int | None) -> HostPathAction | VolumeError:
    """`mode`: the path's st_mode, None when nothing is there. An unset type checks nothing."""
    if not kind:
        return HostPathAction.USE
    if mode is None and kind == "DirectoryOrCreate":
        return HostPathAction.MAKE_DIRECTORY
    if mode is None and kind == "FileOrCreate":
        return HostPathAction.MAKE_FILE
    test, noun = _TYPE_TESTS[kind.removesuffix("OrCreate")]
    if mode is None or not test(mode):
        return VolumeError(f"hostPath type check failed: {path} is not {noun}")
    return HostPathAction.USE
