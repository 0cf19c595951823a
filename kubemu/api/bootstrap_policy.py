"""The default RBAC policy kube-apiserver bootstraps (its rbac/bootstrap-roles post-start hook),
cut to the kinds kubemu serves, and the binding kubeadm adds for its admin.

    bootstrap_objects() -> [ClusterRole..., ClusterRoleBinding...]  (created if absent at start)

As in Kubernetes (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), every object is
labelled `kubernetes.io/bootstrapping: rbac-defaults` and annotated
`rbac.authorization.kubernetes.io/autoupdate: "true"`, and:

  * cluster-admin may do anything; bound to the group system:masters;
  * admin, edit and view are aggregated from system:aggregate-to-admin/-edit/-view (and from
    any ClusterRole labelled `rbac.authorization.k8s.io/aggregate-to-<role>: "true"`); edit
    is aggregated into admin and view into edit. view reads everything but Secrets; edit
    writes workloads, ServiceAccounts, ConfigMaps and Secrets; admin adds Roles and
    RoleBindings. Bind them in a namespace with a RoleBinding;
  * system:basic-user (create SelfSubjectAccessReviews, SelfSubjectRulesReviews and
    SelfSubjectReviews) and system:discovery (the discovery and OpenAPI paths, /version and
    the health checks) for every authenticated user; system:public-info-viewer (/version and
    the health checks) for everyone, authenticated or not;
  * system:kube-scheduler and system:kube-controller-manager for the users of those names;
  * system:node for the group system:nodes;
  * system:node-proxier (kube-proxy: reads Services, Endpoints, EndpointSlices and Nodes, writes
    Events) for the user system:kube-proxy, as kubeadm binds it (kubeadm:node-proxier);
  * system:coredns (the cluster DNS reads Services, Endpoints, EndpointSlices, Pods and
    Namespaces) for the ServiceAccount kube-system/coredns, as kubeadm's CoreDNS addon binds it;
  * TLS bootstrapping: system:node-bootstrapper (create and read CertificateSigningRequests)
    and system:certificates.k8s.io:certificatesigningrequests:nodeclient (the CSR approver
    approves kubelet client certificates for whoever holds it) for kubeadm's bootstrap token
    group system:bootstrappers:kubeadm:default-node-token (kubeadm:kubelet-bootstrap,
    kubeadm:node-autoapprove-bootstrap, and kubeadm:get-nodes to look its node up), and
    ...:selfnodeclient for system:nodes (kubeadm:node-autoapprove-certificate-rotation);
    the Role kubeadm:bootstrap-signer-clusterinfo in kube-public lets system:anonymous get the
    ConfigMap cluster-info, which a joining node reads before it can authenticate.

Where kubemu differs, and why:

  * the rules name only kinds kubemu serves (no StatefulSets, Jobs, Ingresses, ...);
  * kubemu's controller-manager acts under its one identity (kube-controller-manager with
    --use-service-account-credentials=false), so system:kube-controller-manager also holds
    what Kubernetes grants its controllers' own roles (system:controller:deployment-controller,
    replicaset-controller, namespace-controller, generic-garbage-collector, node-controller,
    root-ca-cert-publisher, service-account-controller, endpoint-controller,
    endpointslice-controller, certificate-controller, bootstrap-signer, token-cleaner);
  * kubeadm authorizes kubelets with the Node authorizer (each kubelet reaches only its own
    node and pods) and leaves system:node unbound; kubemu has no Node authorizer and binds
    system:node to the group system:nodes, as Kubernetes did before 1.8: a kubelet may read
    and write every node's objects.
"""
from __future__ import annotations

import copy

from .certificates import KUBE_APISERVER_CLIENT, KUBE_APISERVER_CLIENT_KUBELET
from .identity import (ADMIN_GROUP, ANONYMOUS, AUTHENTICATED, CONTROLLER_MANAGER, KUBE_PROXY, NODES, SCHEDULER,
                       SYSTEM_MASTERS, UNAUTHENTICATED)

API_VERSION = "rbac.authorization.k8s.io/v1"
GROUP = "rbac.authorization.k8s.io"
LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"

READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete", "deletecollection")
READ_WRITE = READ + WRITE

CORE, APPS, COORDINATION = "", "apps", "coordination.k8s.io"
BATCH, POLICY, STORAGE = "batch", "policy", "storage.k8s.io"
AUTHENTICATION, AUTHORIZATION, AUTOSCALING = ("authentication.k8s.io", "authorization.k8s.io",
                                              "autoscaling")
EVENTS_GROUP = "events.k8s.io"
DISCOVERY = "discovery.k8s.io"
NODE_PROXIER = "system:node-proxier"
COREDNS = "system:coredns"
COREDNS_ACCOUNT = ("kube-system", "coredns")  # kubeadm's CoreDNS addon's ServiceAccount
METRICS = "metrics.k8s.io"
CERTIFICATES = "certificates.k8s.io"
NODE_BOOTSTRAPPER = "system:node-bootstrapper"
NODE_CLIENT = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
SELF_NODE_CLIENT = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
BOOTSTRAP_TOKEN_GROUP = "system:bootstrappers:kubeadm:default-node-token"  # kubeadm's tokens' group
CLUSTER_INFO_ROLE = "kubeadm:bootstrap-signer-clusterinfo"


def rule(verbs, groups=(), resources=(), names=(), urls=()) -> dict:
    """A PolicyRule (rbacv1helpers.NewRule(...).Groups(...).Resources(...).Names(...).URLs(...))."""
    out = {"verbs": list(verbs)}
    for key, values in (("apiGroups", groups), ("resources", resources),
                        ("resourceNames", names), ("nonResourceURLs", urls)):
        if values:
            out[key] = list(values)
    return out


def events_rule() -> dict:
    return rule(("create", "update", "patch"), (CORE, EVENTS_GROUP), ("events",))


def cluster_role(name: str, rules: list[dict] | None = None, *, labels: dict | None = None,
                 aggregate_from: str | None = None) -> dict:
    meta = {"name": name, "labels": {**(labels or {}), **LABELS},
            "annotations": dict(ANNOTATIONS)}
    role: dict = {"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": meta}
    if aggregate_from:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {AGGREGATE_TO + aggregate_from: "true"}}]}
    else:
        role["rules"] = rules or []
    return role


def cluster_role_binding(name: str, role: str, *, groups=(), users=(), service_accounts=(),
                         defaults: bool = True) -> dict:
    meta: dict = {"name": name}
    if defaults:
        meta.update(labels=dict(LABELS), annotations=dict(ANNOTATIONS))
    subjects = [{"kind": "Group", "apiGroup": GROUP, "name": g} for g in groups] + \
               [{"kind": "User", "apiGroup": GROUP, "name": u} for u in users] + \
               [{"kind": "ServiceAccount", "namespace": ns, "name": n} for ns, n in service_accounts]
    return {"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
            "subjects": subjects}


def role(name: str, namespace: str, rules: list[dict]) -> dict:
    """A namespaced Role (kubeadm's own: not a bootstrap default)."""
    return {"apiVersion": API_VERSION, "kind": "Role",
            "metadata": {"name": name, "namespace": namespace}, "rules": rules}


def role_binding(name: str, namespace: str, role_name: str, *, users=()) -> dict:
    return {"apiVersion": API_VERSION, "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": role_name},
            "subjects": [{"kind": "User", "apiGroup": GROUP, "name": u} for u in users]}


def _aggregated_to(role: str) -> dict:
    return {AGGREGATE_TO + role: "true"}


def _cluster_roles() -> list[dict]:
    health = ("/livez", "/readyz", "/healthz", "/version", "/version/")
    return [
        cluster_role("cluster-admin", [rule(("*",), ("*",), ("*",)), rule(("*",), urls=("*",))]),
        cluster_role("system:discovery", [rule(("get",), urls=(
            *health, "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"))]),
        cluster_role("system:public-info-viewer", [rule(("get",), urls=health)]),
        cluster_role("system:basic-user", [
            rule(("create",), (AUTHORIZATION,), ("selfsubjectaccessreviews",
                                                 "selfsubjectrulesreviews")),
            rule(("create",), (AUTHENTICATION,), ("selfsubjectreviews",)),
        ]),
        cluster_role("admin", aggregate_from="admin"),
        cluster_role("edit", labels=_aggregated_to("admin"), aggregate_from="edit"),
        cluster_role("view", labels=_aggregated_to("edit"), aggregate_from="view"),
        cluster_role("system:aggregate-to-admin", labels=_aggregated_to("admin"), rules=[
            rule(("create",), (AUTHORIZATION,), ("localsubjectaccessreviews",)),
            rule(READ_WRITE, (GROUP,), ("roles", "rolebindings")),
        ]),
        cluster_role("system:aggregate-to-edit", labels=_aggregated_to("edit"), rules=[
            rule(READ, (CORE,), ("secrets", "pods/attach", "pods/exec", "pods/portforward")),
            rule(("impersonate",), (CORE,), ("serviceaccounts",)),
            rule(WRITE, (CORE,), ("pods", "pods/attach", "pods/exec", "pods/portforward")),
            rule(("create",), (CORE,), ("pods/eviction",)),
            rule(WRITE, (CORE,), ("serviceaccounts", "configmaps", "secrets", "services",
                                  "endpoints")),
            rule(("create",), (CORE,), ("serviceaccounts/token",)),
            rule(WRITE, (APPS,), ("deployments", "deployments/scale", "deployments/rollback",
                                  "replicasets", "replicasets/scale", "statefulsets",
                                  "statefulsets/scale", "daemonsets")),
            rule(WRITE, (BATCH,), ("jobs", "cronjobs")),
            rule(WRITE, (CORE,), ("persistentvolumeclaims",)),
            rule(WRITE, (POLICY,), ("poddisruptionbudgets",)),
        ]),
        cluster_role("system:aggregate-to-view", labels=_aggregated_to("view"), rules=[
            rule(READ, (CORE,), ("pods", "serviceaccounts", "configmaps")),
            rule(READ, (CORE,), ("services", "services/status", "endpoints")),
            rule(READ, (DISCOVERY,), ("endpointslices",)),
            rule(READ, (CORE,), ("events", "pods/status", "namespaces/status", "pods/log")),
            # reading namespaces in a namespace means reading *that* namespace
            rule(READ, (CORE,), ("namespaces",)),
            rule(READ, (APPS,), ("deployments", "deployments/status", "deployments/scale",
                                 "replicasets", "replicasets/status", "replicasets/scale",
                                 "statefulsets", "statefulsets/status", "statefulsets/scale",
                                 "daemonsets", "daemonsets/status", "controllerrevisions")),
            rule(READ, (BATCH,), ("jobs", "jobs/status", "cronjobs", "cronjobs/status")),
            rule(READ, (CORE,), ("persistentvolumeclaims", "persistentvolumeclaims/status")),
            rule(READ, (POLICY,), ("poddisruptionbudgets", "poddisruptionbudgets/status")),
        ]),
        # metrics-server's role (kubemu serves metrics.k8s.io itself): kubectl top for view and up
        cluster_role("system:aggregated-metrics-reader", labels={
            **_aggregated_to("admin"), **_aggregated_to("edit"), **_aggregated_to("view")}, rules=[
            rule(READ, (METRICS,), ("pods", "nodes")),
        ]),
        cluster_role("system:node", [
            rule(("create",), (AUTHENTICATION,), ("tokenreviews",)),
            rule(("create",), (AUTHORIZATION,), ("subjectaccessreviews",
                                                 "localsubjectaccessreviews")),
            # nodes register and report themselves
            rule(("create", "get", "list", "watch"), (CORE,), ("nodes",)),
            rule(("update", "patch"), (CORE,), ("nodes/status",)),
            rule(("update", "patch"), (CORE,), ("nodes",)),
            rule(("create", "update", "patch"), (CORE,), ("events",)),
            # the pods bound to them, mirror pods of static pods, and their status
            rule(READ, (CORE,), ("pods",)),
            rule(("create", "delete"), (CORE,), ("pods",)),
            rule(("update", "patch"), (CORE,), ("pods/status",)),
            rule(("create",), (CORE,), ("pods/eviction",)),
            rule(READ, (CORE,), ("secrets", "configmaps")),
            # a pod's service environment variables
            rule(READ, (CORE,), ("services",)),
            # the claims and volumes its pods mount
            rule(("get",), (CORE,), ("persistentvolumeclaims", "persistentvolumes")),
            rule(("create",), (CORE,), ("serviceaccounts/token",)),
            # the node heartbeat in kube-node-lease
            rule(("get", "create", "update", "patch", "delete"), (COORDINATION,), ("leases",)),
            # its client certificate's renewal
            rule(("create", "get", "list", "watch"), (CERTIFICATES,), ("certificatesigningrequests",)),
        ]),
        cluster_role(NODE_BOOTSTRAPPER, [
            rule(("create", "get", "list", "watch"), (CERTIFICATES,), ("certificatesigningrequests",)),
        ]),
        cluster_role(NODE_CLIENT, [
            rule(("create",), (CERTIFICATES,), ("certificatesigningrequests/nodeclient",)),
        ]),
        cluster_role(SELF_NODE_CLIENT, [
            rule(("create",), (CERTIFICATES,), ("certificatesigningrequests/selfnodeclient",)),
        ]),
        cluster_role(SCHEDULER, [
            events_rule(),
            rule(("create",), (COORDINATION,), ("leases",)),
            rule(("get", "update"), (COORDINATION,), ("leases",), names=("kube-scheduler",)),
            rule(READ, (CORE,), ("nodes",)),
            rule(("get", "list", "watch", "delete"), (CORE,), ("pods",)),
            rule(("create",), (CORE,), ("pods/binding", "bindings")),
            rule(("patch", "update"), (CORE,), ("pods/status",)),
            rule(READ, (APPS,), ("replicasets", "statefulsets")),
            # VolumeBinding: claims, volumes, classes; WaitForFirstConsumer's selected node
            rule(READ, (CORE,), ("persistentvolumeclaims", "persistentvolumes")),
            rule(("patch", "update"), (CORE,), ("persistentvolumeclaims", "persistentvolumes")),
            rule(READ, (STORAGE,), ("storageclasses",)),
            rule(READ, (POLICY,), ("poddisruptionbudgets",)),
            rule(("create",), (AUTHENTICATION,), ("tokenreviews",)),
            rule(("create",), (AUTHORIZATION,), ("subjectaccessreviews",)),
        ]),
        cluster_role(CONTROLLER_MANAGER, [
            events_rule(),
            rule(("create",), (COORDINATION,), ("leases",)),
            rule(("get", "update"), (COORDINATION,), ("leases",),
                 names=("kube-controller-manager",)),
            rule(("create",), (CORE,), ("secrets", "serviceaccounts")),
            rule(("delete",), (CORE,), ("secrets",)),
            rule(("get",), (CORE,), ("namespaces", "secrets", "serviceaccounts", "configmaps")),
            rule(("update",), (CORE,), ("secrets", "serviceaccounts")),
            rule(("create",), (AUTHENTICATION,), ("tokenreviews",)),
            rule(("create",), (AUTHORIZATION,), ("subjectaccessreviews",)),
            rule(("list", "watch"), ("*",), ("*",)),  # every shared informer
            rule(("create",), (CORE,), ("serviceaccounts/token",)),
            # what Kubernetes grants the controllers' own roles (see the module docstring):
            # generic-garbage-collector and namespace-controller read, change and delete any
            # object (status subresources and namespaces/finalize included), ...
            rule(("get", "list", "watch", "patch", "update", "delete", "deletecollection"),
                 ("*",), ("*",)),
            # ... the replicaset and deployment controllers create pods and ReplicaSets, ...
            rule(("create",), (CORE,), ("pods",)),
            rule(("create",), (APPS,), ("replicasets",)),
            # ... root-ca-cert-publisher creates kube-root-ca.crt in every namespace, ...
            rule(("create",), (CORE,), ("configmaps",)),
            # ... and the endpoint and endpointslice controllers write a Service's endpoints
            rule(("create",), (CORE,), ("endpoints",)),
            rule(("create",), (DISCOVERY,), ("endpointslices",)),
            # ... and the workload, volume and disruption controllers theirs
            rule(("create",), (APPS,), ("controllerrevisions",)),
            rule(("create",), (BATCH,), ("jobs",)),
            rule(("create",), (CORE,), ("persistentvolumeclaims", "persistentvolumes")),
            # ... and certificate-controller approves kubelet client certificates and signs
            # for the signers the controller-manager runs
            rule(("approve",), (CERTIFICATES,), ("signers",), names=(KUBE_APISERVER_CLIENT_KUBELET,)),
            rule(("sign",), (CERTIFICATES,), ("signers",),
                 names=(KUBE_APISERVER_CLIENT_KUBELET, KUBE_APISERVER_CLIENT)),
        ]),
        cluster_role(NODE_PROXIER, [
            rule(READ, (CORE,), ("services", "endpoints", "nodes")),
            rule(READ, (DISCOVERY,), ("endpointslices",)),
            events_rule(),
        ]),
        cluster_role(COREDNS, [
            rule(("list", "watch"), (CORE,), ("endpoints", "services", "pods", "namespaces")),
            rule(("list", "watch"), (DISCOVERY,), ("endpointslices",)),
        ]),
    ]


def _cluster_role_bindings() -> list[dict]:
    return [
        cluster_role_binding("cluster-admin", "cluster-admin", groups=(SYSTEM_MASTERS,)),
        cluster_role_binding("system:discovery", "system:discovery", groups=(AUTHENTICATED,)),
        cluster_role_binding("system:basic-user", "system:basic-user", groups=(AUTHENTICATED,)),
        cluster_role_binding("system:public-info-viewer", "system:public-info-viewer",
                             groups=(AUTHENTICATED, UNAUTHENTICATED)),
        cluster_role_binding(SCHEDULER, SCHEDULER, users=(SCHEDULER,)),
        cluster_role_binding(CONTROLLER_MANAGER, CONTROLLER_MANAGER, users=(CONTROLLER_MANAGER,)),
        cluster_role_binding("system:node", "system:node", groups=(NODES,)),
        cluster_role_binding(NODE_PROXIER, NODE_PROXIER, users=(KUBE_PROXY,)),
        cluster_role_binding(COREDNS, COREDNS, service_accounts=(COREDNS_ACCOUNT,)),
        # kubeadm init (>= 1.29): admin.conf's group, and not a bootstrap default
        cluster_role_binding(ADMIN_GROUP, "cluster-admin", groups=(ADMIN_GROUP,),
                             defaults=False),
        # kubeadm init's bootstrap-token phase (TLS bootstrapping; see the module docstring)
        cluster_role_binding("kubeadm:kubelet-bootstrap", NODE_BOOTSTRAPPER,
                             groups=(BOOTSTRAP_TOKEN_GROUP,), defaults=False),
        cluster_role_binding("kubeadm:node-autoapprove-bootstrap", NODE_CLIENT,
                             groups=(BOOTSTRAP_TOKEN_GROUP,), defaults=False),
        cluster_role_binding("kubeadm:node-autoapprove-certificate-rotation", SELF_NODE_CLIENT,
                             groups=(NODES,), defaults=False),
        cluster_role_binding("kubeadm:get-nodes", "kubeadm:get-nodes",
                             groups=(BOOTSTRAP_TOKEN_GROUP,), defaults=False),
    ]


def _kubeadm_objects() -> list[dict]:
    """kubeadm's own roles for bootstrapping (not labelled as bootstrap defaults)."""
    get_nodes = cluster_role("kubeadm:get-nodes", [rule(("get",), (CORE,), ("nodes",))])
    for field in ("labels", "annotations"):
        get_nodes["metadata"].pop(field)
    return [get_nodes,
            role(CLUSTER_INFO_ROLE, "kube-public",
                 [rule(("get",), (CORE,), ("configmaps",), names=("cluster-info",))]),
            role_binding(CLUSTER_INFO_ROLE, "kube-public", CLUSTER_INFO_ROLE, users=(ANONYMOUS,))]


_OBJECTS = _cluster_roles() + _kubeadm_objects() + _cluster_role_bindings()


def bootstrap_objects() -> list[dict]:
    """The roles, then the bindings, as new objects (the caller may keep them)."""
    return copy.deepcopy(_OBJECTS)


__all__ = ["bootstrap_objects", "rule", "SCHEDULER", "CONTROLLER_MANAGER", "NODE_PROXIER", "COREDNS"]
