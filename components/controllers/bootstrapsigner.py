"""The bootstrap signer's core (k8s pkg/controller/bootstrap/bootstrapsigner.go): the ConfigMap
kube-public/cluster-info carries, beside its `kubeconfig`, one `jws-kubeconfig-<token id>` per
bootstrap token usable for signing: a detached HS256 JWS of the kubeconfig keyed by the token's
secret. A joining node that knows a token reads cluster-info anonymously and trusts the
kubeconfig (its CA) only if the signature for its token verifies.

``sign_cluster_info(configmap, secrets, now) -> [UpdateObject]`` is pure: the cached
cluster-info (None when missing), the cached bootstrap token Secrets and the time in; out, an
update when the signatures are not exactly those of the unexpired signing tokens.
"""
from __future__ import annotations

import copy

from components.controllers import UpdateObject
from components.controllers.podutil import meta
from kubemu import bootstraptoken

NAMESPACE = "kube-public"
CONFIGMAP = "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
JWS_PREFIX = "jws-kubeconfig-"


def signatures(content: str, secrets: list[dict], now: float) -> dict[str, str]:
    """`jws-kubeconfig-<id>` -> signature, for each token that may sign and has not expired."""
    out = {}
    for secret in secrets:
        if meta(secret).get("deletionTimestamp"):
            continue
        token = bootstraptoken.BootstrapToken.from_secret(secret)
        if token is None or token.expired(now) or "signing" not in token.usages:
            continue
        out[JWS_PREFIX + token.id] = bootstraptoken.detached_signature(content, token.id, token.secret)
    return out


def sign_cluster_info(configmap: dict | None, secrets: list[dict], now: float) -> list:
    if configmap is None or meta(configmap).get("deletionTimestamp"):
        return []
    data = configmap.get("data") or {}
    content = data.get(KUBECONFIG_KEY)
    if not isinstance(content, str):
        return []
    want = signatures(content, secrets, now)
    have = {k: v for k, v in data.items() if k.startswith(JWS_PREFIX)}
    if want == have:
        return []
    updated = copy.deepcopy(configmap)
    updated["data"] = {**{k: v for k, v in data.items() if not k.startswith(JWS_PREFIX)}, **want}
    return [UpdateObject(NAMESPACE, updated)]
