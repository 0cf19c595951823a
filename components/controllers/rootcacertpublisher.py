"""The root CA publisher's reconcile core (k8s pkg/controller/certificates/rootcacertpublisher):
every active namespace holds the ConfigMap `kube-root-ca.crt` whose `ca.crt` is the cluster's
CA bundle, so that pods can verify the apiserver at kubernetes.default.svc.

``sync_root_ca(namespace, configmap, root_ca) -> [CreateObject | UpdateObject]`` is pure: the
namespace (None when gone), its cached ConfigMap of that name (None when missing) and the CA
PEM in; out, a create when it is missing, an update when its data or its description
annotation is not what the publisher writes (someone changed it), else nothing.
"""
from __future__ import annotations

import copy

from components.controllers import CreateObject, UpdateObject
from components.controllers.podutil import meta
from components.controllers.serviceaccounts import is_active

CONFIGMAP = "kube-root-ca.crt"
CA_KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using "
               "internal endpoints such as the internal service IP or kubernetes.default.svc. "
               "No other usage is guaranteed across distributions of Kubernetes clusters.")


def sync_root_ca(namespace: dict | None, configmap: dict | None, root_ca: str) -> list:
    if not is_active(namespace):
        return []
    ns = meta(namespace).get("name", "")
    data = {CA_KEY: root_ca}
    if configmap is None:
        return [CreateObject(ns, {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": CONFIGMAP, "namespace": ns,
                                               "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                                  "data": data})]
    annotations = meta(configmap).get("annotations") or {}
    if configmap.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
        return []
    fixed = copy.deepcopy(configmap)
    fixed["data"] = data
    fixed["metadata"]["annotations"] = {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}
    return [UpdateObject(ns, fixed)]
