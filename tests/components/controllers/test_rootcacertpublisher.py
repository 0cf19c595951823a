"""The root CA publisher's core: kube-root-ca.crt with the CA in every active namespace, made
when missing, set back when changed."""
from __future__ import annotations

from components.controllers import CreateObject, UpdateObject
from components.controllers.rootcacertpublisher import (DESCRIPTION, DESCRIPTION_ANNOTATION,
                                                        sync_root_ca)

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def namespace(name="team", *, deleting=False):
    meta = {"name": name, "uid": "ns-uid"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "status": {"phase": "Active"}}


def published(data=None, annotations=None):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube-root-ca.crt", "namespace": "team", "uid": "cm-uid",
                         "resourceVersion": "7",
                         "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}
                         if annotations is None else annotations},
            "data": {"ca.crt": CA} if data is None else data}


def test_a_missing_configmap_is_created_with_the_ca_and_its_description():
    assert sync_root_ca(namespace(), None, CA) == [CreateObject("team", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": "team",
                     "annotations": {"kubernetes.io/description": DESCRIPTION}},
        "data": {"ca.crt": CA}})]
    assert DESCRIPTION.startswith("Contains a CA bundle that can be used to verify the "
                                  "kube-apiserver")


def test_the_right_configmap_needs_nothing():
    assert sync_root_ca(namespace(), published(), CA) == []


def test_changed_data_is_set_back_on_the_cached_version():
    cm = published({"ca.crt": "forged", "extra": "x"}, {"mine": "kept"})
    [action] = sync_root_ca(namespace(), cm, CA)
    assert isinstance(action, UpdateObject) and action.namespace == "team"
    assert action.object["data"] == {"ca.crt": CA}
    assert action.object["metadata"]["resourceVersion"] == "7"
    assert action.object["metadata"]["annotations"] == {"mine": "kept",
                                                        DESCRIPTION_ANNOTATION: DESCRIPTION}
    assert cm["data"] == {"ca.crt": "forged", "extra": "x"}  # the cache's copy is untouched


def test_a_missing_description_is_set_back():
    [action] = sync_root_ca(namespace(), published(annotations={}), CA)
    assert action.object["metadata"]["annotations"] == {DESCRIPTION_ANNOTATION: DESCRIPTION}


def test_a_new_ca_is_published():
    [action] = sync_root_ca(namespace(), published(), "NEW CA")
    assert action.object["data"] == {"ca.crt": "NEW CA"}


def test_gone_or_terminating_namespaces_get_nothing():
    assert sync_root_ca(None, None, CA) == []
    assert sync_root_ca(namespace(deleting=True), None, CA) == []
