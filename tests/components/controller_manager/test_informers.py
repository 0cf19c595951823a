"""The controller-manager's shared informers: one per resource, and the lookups across them."""
from __future__ import annotations

from components.controller_manager.informers import SharedInformers


def _obj(name: str, uid: str, owner_uid: str | None = None) -> dict:
    meta = {"name": name, "namespace": "default", "uid": uid}
    if owner_uid:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": "web", "uid": owner_uid,
                                    "controller": True}]
    return {"metadata": meta}


def test_lookups_by_uid_and_owner_see_every_informer_made_before_the_start():
    informers = SharedInformers(None)
    assert informers.informer("pods") is informers.informer("pods")
    informers.informer("nodes")           # no uid index: never asked
    assert informers.by_uid("rs-uid") is None and not informers.has_dependents("rs-uid")
    # an informer made after a lookup is looked in all the same
    informers.informer("replicasets").indexer.add(_obj("web", "rs-uid"))
    informers.informer("pods").indexer.add(_obj("web-1", "pod-uid", owner_uid="rs-uid"))
    assert informers.by_uid("rs-uid")["metadata"]["name"] == "web"
    assert informers.by_uid("pod-uid")["metadata"]["name"] == "web-1"
    assert informers.has_dependents("rs-uid") and not informers.has_dependents("pod-uid")
    assert informers.by_uid("nobody") is None


def test_a_kind_only_says_where_to_look_first():
    informers = SharedInformers(None)
    informers.informer("pods").indexer.add(_obj("web-1", "pod-uid"))
    informers.informer("replicasets").indexer.add(_obj("web", "rs-uid"))
    informers.informer("nodes")
    assert informers.by_uid("rs-uid", "ReplicaSet")["metadata"]["name"] == "web"
    # an ownerReference naming the wrong kind, an unwatched one, or none: the uid decides
    assert informers.by_uid("rs-uid", "Pod")["metadata"]["name"] == "web"
    assert informers.by_uid("rs-uid", "Node")["metadata"]["name"] == "web"
    assert informers.by_uid("rs-uid", "NoSuchKind")["metadata"]["name"] == "web"
    assert informers.by_uid("gone", "ReplicaSet") is None
