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
    def __init__(self):
        self.objects = {}

    def create(self, resource, obj, namespace):
        from kubemu.apiclient import AlreadyExists
        key = (resource, namespace, obj["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExists("exists")
        self.objects[key] = obj


def test_ensure_creates_it_once_and_keeps_what_is_there():
    api = FakeAPI()
    assert clusterinfo.ensure(api, "https://127.0.0.1:6443", CA)
    assert not clusterinfo.ensure(api, "https://127.0.0.1:7443", CA)
    [(key, cm)] = api.objects.items()
    assert key == ("configmaps", "kube-public", "cluster-info") and "6443" in cm["data"]["kubeconfig"]
