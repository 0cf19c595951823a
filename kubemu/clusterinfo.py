"""kube-public/cluster-info: what a joining node reads before it can authenticate (kubeadm init's
bootstrap-token phase, CreateBootstrapConfigMapIfNotExists).

    configmap(server, ca_pem, wire_endpoints, wire_server_key) -> the ConfigMap    (pure)
    brought_in_line(existing, want) -> the ConfigMap to write, or None              (pure)
    ensure(api, server, ca_pem, wire_endpoints, wire_server_key)  (`up` calls it once the API answers)

The ConfigMap's `kubeconfig` names one cluster (no name, no user: kubeadm's shape) with the API's
address and the cluster CA. Anyone may read it (kubeadm's Role kubeadm:bootstrap-signer-clusterinfo
for system:anonymous); the controller-manager's bootstrap signer adds a `jws-kubeconfig-<id>`
signature per bootstrap token, by which a joining node that holds a token trusts its CA
(and pins it with --discovery-token-ca-cert-hash); `ensure` drops them with the kubeconfig
they signed.

kubemu adds the wire beyond loopback when the API is advertised (`up
--apiserver-advertise-address`): `kubemu-wire-endpoints`, every apiserver's tcp:// endpoint
comma-joined (node-0's first), and `kubemu-wire-curve-server-key`, the CURVE server's public key
(Z85). A joining node trusts them only from a read whose TLS it verified against the pinned CA.
"""
from __future__ import annotations

import base64

import yaml

from components.controllers.bootstrapsigner import CONFIGMAP, JWS_PREFIX, KUBECONFIG_KEY, NAMESPACE


def kubeconfig(server: str, ca_pem: bytes) -> str:
    """The kubeconfig text cluster-info carries, as clientcmd.Write writes kubeadm's."""
    return yaml.safe_dump({
        "apiVersion": "v1",
        "clusters": [{"cluster": {"certificate-authority-data": base64.b64encode(ca_pem).decode(),
                                  "server": server},
                      "name": ""}],
        "contexts": None, "current-context": "", "kind": "Config", "preferences": {},
        "users": None}, sort_keys=False)


WIRE_ENDPOINTS_KEY = "kubemu-wire-endpoints"
WIRE_SERVER_KEY_KEY = "kubemu-wire-curve-server-key"
MANAGED_KEYS = (KUBECONFIG_KEY, WIRE_ENDPOINTS_KEY, WIRE_SERVER_KEY_KEY)  # what `up` writes; the rest is the signer's


def configmap(server: str, ca_pem: bytes, wire_endpoints=(), wire_server_key: str | None = None) -> dict:
    data = {KUBECONFIG_KEY: kubeconfig(server, ca_pem)}
    if wire_endpoints:
        data[WIRE_ENDPOINTS_KEY] = ",".join(wire_endpoints)
    if wire_server_key:
        data[WIRE_SERVER_KEY_KEY] = wire_server_key
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": NAMESPACE}, "data": data}


def brought_in_line(existing: dict, want: dict) -> dict | None:
    """`existing` with `want`'s kubeconfig and wire keys (a key `want` lacks removed), the
    other keys kept; None when nothing differs. The bootstrap signer's signatures sign the
    kubeconfig: a changed one drops them (the signer signs it anew; meanwhile a joiner waits
    for its token's signature instead of failing on one of the old text)."""
    data = dict(existing.get("data") or {})
    wanted = want["data"]
    if all(data.get(k) == wanted.get(k) for k in MANAGED_KEYS):
        return None
    if data.get(KUBECONFIG_KEY) != wanted[KUBECONFIG_KEY]:
        data = {k: v for k, v in data.items() if not k.startswith(JWS_PREFIX)}
    for k in MANAGED_KEYS:
        data.pop(k, None)
    return {**existing, "data": {**data, **wanted}}


def ensure(api, server: str, ca_pem: bytes, wire_endpoints=(), wire_server_key: str | None = None) -> str | None:
    """Create cluster-info if it is missing, or bring it in line with what `up` says (a
    SyncApiClient `api`): "created", "updated", or None when it already said that."""
    from kubemu.apiclient import AlreadyExists, retry_on_conflict_sync
    want = configmap(server, ca_pem, wire_endpoints, wire_server_key)

    def attempt() -> str | None:
        try:
            api.create("configmaps", want, NAMESPACE)
            return "created"
        except AlreadyExists:
            pass
        updated = brought_in_line(api.get("configmaps", CONFIGMAP, NAMESPACE), want)
        if updated is None:
            return None
        api.update("configmaps", updated, NAMESPACE)  # a Conflict (the signer wrote meanwhile): again
        return "updated"
    return retry_on_conflict_sync(attempt)
