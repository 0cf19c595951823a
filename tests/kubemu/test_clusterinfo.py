"""kube-public/cluster-info as kubeadm init writes it."""
from __future__ import annotations

import base64

import yaml

from kubemu import clusterinfo

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_cluster_info_holds_a_kubeconfig_with_one_nameless_cluster_and_no_user():
    cm = clusterinfo.configmap("https://127.0.0.1:6443", CA)
    assert cm["metadata"] == {"name": "cluster-info", "namespace": "kube-public"}
    config = yaml.safe_load(cm["data"]["kubeconfig"])
    assert config == {"apiVersion": "v1", "kind": "Config", "clusters": [
        {"name": "", "cluster": {"server": "https://127.0.0.1:6443",
                                 "certificate-authority-data": base64.b64encode(CA).decode()}}],
        "contexts": None, "current-context": "", "preferences": {}, "users": None}


class FakeAPI:
    def __init__(self, conflicts: int = 0):
        self.objects = {}
        self.conflicts = conflicts  # updates refused with a Conflict before one succeeds

    def create(self, resource, obj, namespace):
        from kubemu.apiclient import AlreadyExists
        key = (resource, namespace, obj["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExists("exists")
        self.objects[key] = obj

    def get(self, resource, name, namespace):
        return self.objects[(resource, namespace, name)]

    def update(self, resource, obj, namespace):
        from kubemu.wire import Conflict
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("the object has been modified", {"reason": "Conflict"})
        self.objects[(resource, namespace, obj["metadata"]["name"])] = obj


KEY = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"


def test_ensure_creates_it_once_and_keeps_it_while_it_says_the_same():
    api = FakeAPI()
    assert clusterinfo.ensure(api, "https://127.0.0.1:6443", CA) == "created"
    assert clusterinfo.ensure(api, "https://127.0.0.1:6443", CA) is None
    [(key, cm)] = api.objects.items()
    assert key == ("configmaps", "kube-public", "cluster-info") and "6443" in cm["data"]["kubeconfig"]


def test_advertised_cluster_info_carries_the_wire_endpoints_and_the_curve_server_key():
    cm = clusterinfo.configmap("https://198.18.0.1:6443", CA, ["tcp://198.18.0.1:6444", "tcp://198.18.0.1:6445"],
                               KEY)
    assert cm["data"]["kubemu-wire-endpoints"] == "tcp://198.18.0.1:6444,tcp://198.18.0.1:6445"
    assert cm["data"]["kubemu-wire-curve-server-key"] == KEY
    assert yaml.safe_load(cm["data"]["kubeconfig"])["clusters"][0]["cluster"]["server"] == "https://198.18.0.1:6443"
    assert set(clusterinfo.configmap("https://127.0.0.1:6443", CA)["data"]) == {"kubeconfig"}


def test_ensure_brings_an_existing_one_in_line_dropping_the_signatures_of_another_kubeconfig():
    """A signature of the old kubeconfig would fail a joiner's check ("failed to verify JWS
    signature"): it goes with the text it signed, and the bootstrap signer signs the new one;
    the wire keys alone changing keeps them (they sign the kubeconfig only)."""
    api = FakeAPI(conflicts=1)  # the bootstrap signer wrote it between the read and the update
    clusterinfo.ensure(api, "https://127.0.0.1:6443", CA)
    [(key, cm)] = api.objects.items()
    cm["data"]["jws-kubeconfig-abcdef"] = "sig"
    cm["data"]["other"] = "kept"
    cm["metadata"]["resourceVersion"] = "7"
    assert clusterinfo.ensure(api, "https://198.18.0.1:6443", CA, ["tcp://198.18.0.1:6444"], KEY) == "updated"
    data = api.objects[key]["data"]
    assert data["kubemu-wire-endpoints"] == "tcp://198.18.0.1:6444" and data["kubemu-wire-curve-server-key"] == KEY
    assert "198.18.0.1" in data["kubeconfig"] and "jws-kubeconfig-abcdef" not in data and data["other"] == "kept"
    assert api.objects[key]["metadata"]["resourceVersion"] == "7"  # the update is conditional on what was read
    data["jws-kubeconfig-abcdef"] = "new sig"  # the signer's, of the new kubeconfig
    more = ["tcp://198.18.0.1:6444", "tcp://198.18.0.1:6447"]  # `node add --control-plane`
    assert clusterinfo.ensure(api, "https://198.18.0.1:6443", CA, more, KEY) == "updated"
    assert api.objects[key]["data"]["jws-kubeconfig-abcdef"] == "new sig"
    # advertised no more: the wire keys go, the kubeconfig names loopback again
    assert clusterinfo.ensure(api, "https://127.0.0.1:6443", CA) == "updated"
    assert set(api.objects[key]["data"]) == {"kubeconfig", "other"}
