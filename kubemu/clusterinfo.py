"""kube-public/cluster-info: what a joining node reads before it can authenticate (kubeadm init's
bootstrap-token phase, CreateBootstrapConfigMapIfNotExists).

    configmap(server, ca_pem) -> the ConfigMap             (pure)
    ensure(api, server, ca_pem)                              (`up` calls it once the API answers)

The ConfigMap's `kubeconfig` names one cluster (no name, no user: kubeadm's shape) with the API's
address and the cluster CA. Anyone may read it (kubeadm's Role kubeadm:bootstrap-signer-clusterinfo
for system:anonymous); the controller-manager's bootstrap signer adds a `jws-kubeconfig-<id>`
signature per bootstrap token, by which a joining node that holds a token trusts its CA
(and pins it with --discovery-token-ca-cert-hash).
"""
from __future__ import annotations

import base64

import yaml

from components.controllers.bootstrapsigner import CONFIGMAP, KUBECONFIG_KEY, NAMESPACE


def kubeconfig(server: str, ca_pem: bytes) -> str:
    """The kubeconfig text cluster-info carries, as clientcmd.Write writes kubeadm's."""
    return yaml.safe_dump({
        "apiVersion": "v1",
        "clusters": [{"cluster": {"certificate-authority-data": base64.b64encode(ca_pem).decode(),
                                  "server": server},
                      "name": ""}],
        "contexts": None, "current-context": "", "kind": "Config", "preferences": {},
        "users": None}, sort_keys=False)


def configmap(server: str, ca_pem: bytes) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": NAMESPACE},
            "data": {KUBECONFIG_KEY: kubeconfig(server, ca_pem)}}


def ensure(api, server: str, ca_pem: bytes) -> bool:
    """Create cluster-info if it is missing (a SyncApiClient `api`); True if created. An
    existing one is kept, as kubeadm keeps it."""
    from kubemu.apiclient import AlreadyExists
    try:
        api.create("configmaps", configmap(server, ca_pem), NAMESPACE)
    except AlreadyExists:
        return False
    return True
