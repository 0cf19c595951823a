"""What configMap, secret, downwardAPI and projected volumes hold; hostPath type checks; where a
persistentVolumeClaim volume is."""
import base64
import stat

import pytest

from kubelet.configsource import Unavailable
from kubelet.volumes import (ClaimedVolume, File, HostPathAction, VolumeError, claimed_volume, failed_mount,
                             host_path_check, payload, plugin_dir)
from kubemu.api.pod import default_pod

CM = {"kind": "ConfigMap", "data": {"app.conf": "a=1\n", "other": "x"},
      "binaryData": {"logo.png": base64.b64encode(b"\x89PNG\x00").decode()}}
SECRET = {"kind": "Secret", "type": "Opaque", "data": {"password": base64.b64encode(b"pw").decode()}}
OBJECTS = {("configmaps", "ns", "cfg"): CM, ("secrets", "ns", "sec"): SECRET}


def lookup(resource, namespace, name):
    return OBJECTS.get((resource, namespace, name))


def files_of(volume, token=None):
    pod = default_pod({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                                    "labels": {"b": "2", "a": 'say "hi"'}},
                       "spec": {"serviceAccountName": "robot", "volumes": [volume],
                                "containers": [{"name": "app", "command": ["x"], "resources": {
                                    "limits": {"memory": "64Mi"}}}]}})
    return payload(pod, pod["spec"]["volumes"][0], lookup, ["10.244.0.9"], ["10.0.0.1"],
                   {"cpu": "2", "memory": "1Gi"}, token)


def test_a_configmap_volume_holds_every_key_with_the_default_mode():
    assert files_of({"name": "v", "configMap": {"name": "cfg"}}) == {
        "app.conf": File(b"a=1\n", 0o644), "other": File(b"x", 0o644),
        "logo.png": File(b"\x89PNG\x00", 0o644)}


def test_items_pick_keys_put_them_at_paths_with_their_modes():
    volume = {"name": "v", "configMap": {"name": "cfg", "defaultMode": 0o600, "items": [
        {"key": "app.conf", "path": "conf/app.conf"}, {"key": "logo.png", "path": "l", "mode": 0o444}]}}
    assert files_of(volume) == {"conf/app.conf": File(b"a=1\n", 0o600), "l": File(b"\x89PNG\x00", 0o444)}


def test_a_secret_volume_holds_decoded_data():
    assert files_of({"name": "v", "secret": {"secretName": "sec"}}) == {"password": File(b"pw", 0o644)}


@pytest.mark.parametrize("volume, message", [
    ({"name": "v", "configMap": {"name": "gone"}}, 'configmap "gone" not found'),
    ({"name": "v", "secret": {"secretName": "gone"}}, 'secret "gone" not found'),
    ({"name": "v", "configMap": {"name": "cfg", "items": [{"key": "nope", "path": "p"}]}},
     "configmap references non-existent config key: nope"),
    ({"name": "v", "secret": {"secretName": "sec", "items": [{"key": "nope", "path": "p"}]}},
     "references non-existent secret key: nope"),
    ({"name": "v", "projected": {"sources": [{"configMap": {"name": "gone"}},
                                             {"secret": {"name": "gone"}}]}},
     '[configmap "gone" not found, secret "gone" not found]'),
    ({"name": "v", "downwardAPI": {"items": [{"path": "x", "resourceFieldRef": {
        "containerName": "nope", "resource": "limits.cpu"}}]}}, "container nope not found"),
    ({"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
     "kubemu issues ServiceAccount tokens only to a node of a cluster"),
])
def test_errors(volume, message):
    assert files_of(volume) == VolumeError(message)


def test_optional_sources_may_be_missing():
    assert files_of({"name": "v", "configMap": {"name": "gone", "optional": True}}) == {}
    assert files_of({"name": "v", "secret": {"secretName": "sec", "optional": True, "items": [
        {"key": "nope", "path": "p"}, {"key": "password", "path": "pw"}]}}) == {"pw": File(b"pw", 0o644)}


def test_downward_api_files():
    volume = {"name": "v", "downwardAPI": {"defaultMode": 0o640, "items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "./dir/name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o400},
        {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory",
                                             "divisor": "1Mi"}},
        {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu"}}]}}
    assert files_of(volume) == {
        "labels": File(b'a="say \\"hi\\""\nb="2"', 0o640),
        "dir/name": File(b"web", 0o400), "mem": File(b"64", 0o640), "cpu": File(b"2", 0o640)}


def test_projected_merges_sources_with_the_volume_mode_and_a_token():
    calls = []

    def token(namespace, service_account, audience, expiration, pod):
        calls.append((namespace, service_account, audience, expiration, pod["metadata"]["uid"]))
        return "jwt"
    volume = {"name": "v", "projected": {"defaultMode": 0o440, "sources": [
        {"configMap": {"name": "cfg", "items": [{"key": "other", "path": "o"}]}},
        {"secret": {"name": "sec"}},
        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
        {"serviceAccountToken": {"path": "token", "audience": "vault"}}]}}
    assert files_of(volume, token) == {"o": File(b"x", 0o440), "password": File(b"pw", 0o440),
                                       "ns": File(b"ns", 0o440), "token": File(b"jwt", 0o440)}
    assert calls == [("ns", "robot", "vault", 3600, "u1")]


def test_a_source_not_known_yet_fails_the_volume_with_its_reason():
    def unsynced(*_a):
        raise Unavailable("failed to sync secret cache: timed out waiting for the condition")
    pod = {"metadata": {"namespace": "ns"}, "spec": {}}
    assert payload(pod, {"name": "v", "secret": {"secretName": "s"}}, unsynced, [], []) == \
        VolumeError("failed to sync secret cache: timed out waiting for the condition")


def test_failed_mount_is_the_kubelets_event_text():
    assert failed_mount("cfg", VolumeError('configmap "cfg" not found')) == \
        'MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found'


def test_plugin_dirs_are_the_kubelets():
    assert plugin_dir({"name": "a", "configMap": {}}) == "kubernetes.io~configmap"
    assert plugin_dir({"name": "a", "projected": {}}) == "kubernetes.io~projected"
    assert plugin_dir({"name": "a"}) == "kubernetes.io~empty-dir"


DIR, REG, SOCK = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o644, stat.S_IFSOCK | 0o777


@pytest.mark.parametrize("kind, mode, expected", [
    ("", None, HostPathAction.USE),
    ("Directory", DIR, HostPathAction.USE),
    ("Directory", None, VolumeError("hostPath type check failed: /p is not a directory")),
    ("Directory", REG, VolumeError("hostPath type check failed: /p is not a directory")),
    ("DirectoryOrCreate", None, HostPathAction.MAKE_DIRECTORY),
    ("DirectoryOrCreate", REG, VolumeError("hostPath type check failed: /p is not a directory")),
    ("File", REG, HostPathAction.USE),
    ("FileOrCreate", None, HostPathAction.MAKE_FILE),
    ("FileOrCreate", DIR, VolumeError("hostPath type check failed: /p is not a file")),
    ("Socket", SOCK, HostPathAction.USE),
    ("Socket", REG, VolumeError("hostPath type check failed: /p is not a socket file")),
    ("CharDevice", REG, VolumeError("hostPath type check failed: /p is not a character device")),
    ("BlockDevice", None, VolumeError("hostPath type check failed: /p is not a block device")),
])
def test_host_path_types(kind, mode, expected):
    assert host_path_check(kind, "/p", mode) == expected


# --- persistentVolumeClaim ------------------------------------------------------------------------

def bound_claim(uid="c1", volume="pv1", phase="Bound", **meta):
    return {"metadata": {"name": "data", "namespace": "ns", "uid": uid, **meta},
            "spec": {"volumeName": volume}, "status": {"phase": phase}}


def volume_of(claim_uid="c1", **source):
    spec = {"claimRef": {"namespace": "ns", "name": "data", "uid": claim_uid}} if claim_uid else {}
    return {"metadata": {"name": "pv1"}, "spec": {**spec, **source}}


HOST = {"hostPath": {"path": "/vols/pv1", "type": "DirectoryOrCreate"}}


def test_claimed_volume_is_its_persistent_volumes_path():
    assert claimed_volume("ns", "data", bound_claim(), volume_of(**HOST)) == \
        ClaimedVolume("/vols/pv1", "DirectoryOrCreate")
    assert claimed_volume("ns", "data", bound_claim(), volume_of(local={"path": "/mnt/disk"})) == \
        ClaimedVolume("/mnt/disk", "Directory")


@pytest.mark.parametrize("pvc, pv, why", [
    (None, None, 'failed to fetch PVC from API server: persistentvolumeclaims "data" not found'),
    (bound_claim(deletionTimestamp="2024-01-01T00:00:00Z"), volume_of(**HOST),
     "can't start pod because PVC ns/data is being deleted"),
    (bound_claim(phase="Pending", volume=""), None,
     'PVC ns/data has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")'),
    (bound_claim(), None, 'failed to fetch PV pv1 from API server: persistentvolumes "pv1" not found'),
    (bound_claim(), volume_of(claim_uid=None, **HOST),
     "found PV object pv1 but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"),
    (bound_claim(), volume_of(claim_uid="other", **HOST),
     "found PV object pv1 but its pv.Spec.ClaimRef.UID other does not point to claim.UID c1"),
    (bound_claim(), volume_of(nfs={"server": "s", "path": "/"}),
     "PV pv1: kubemu mounts hostPath and local PersistentVolumes only"),
])
def test_claimed_volume_errors(pvc, pv, why):
    assert claimed_volume("ns", "data", pvc, pv) == VolumeError(f"error processing PVC ns/data: {why}")
