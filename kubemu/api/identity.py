"""Who is asking: the authenticated user as Kubernetes' user.Info has it, and the well-known names.

Both of the apiserver's transports (HTTPS and the ZeroMQ wire) resolve a request to one UserInfo
before anything else looks at it; authorization, the audit log and the review APIs read only that.
"""
from __future__ import annotations

from dataclasses import dataclass, field

SYSTEM_MASTERS = "system:masters"            # bypasses authorization
AUTHENTICATED = "system:authenticated"       # added to every authenticated user's groups
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
NODES = "system:nodes"
NODE_PREFIX = "system:node:"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
ADMIN_GROUP = "kubeadm:cluster-admins"       # kubeadm >= 1.29's admin.conf group, bound to cluster-admin
# kubemu's own users (kubeadm's names): the same on their certificates and their wire identities
ADMIN = "kubernetes-admin"
SCHEDULER = "system:kube-scheduler"
CONTROLLER_MANAGER = "system:kube-controller-manager"
KUBE_PROXY = "system:kube-proxy"                # bound to system:node-proxier, as kube-proxy's kubeconfig user


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict:
        """authentication.k8s.io/v1 UserInfo, as TokenReview and SelfSubjectReview show it."""
        out: dict = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


def authenticated(name: str, groups=(), uid: str = "", extra=None) -> UserInfo:
    """A user as an authenticator returns it: system:authenticated joins its groups."""
    gs = tuple(dict.fromkeys((*groups, AUTHENTICATED)))
    return UserInfo(name, gs, uid, dict(extra or {}))


def service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}")
