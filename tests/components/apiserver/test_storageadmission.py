"""components.apiserver.storageadmission: the DefaultStorageClass and StorageObjectInUseProtection
admissions, pure and through the handlers' create path (in-memory storage)."""
from __future__ import annotations

from components.apiserver.storageadmission import admit_claim, protect
from kubemu.api.storage import DEFAULT_CLASS_ANNOTATION
from kubemu.apiclient import NotFound

from .test_handlers import run


def klass(name: str, *, default: bool = False, created: str = "2026-01-01T00:00:00Z") -> dict:
    meta = {"name": name, "creationTimestamp": created}
    if default:
        meta["annotations"] = {DEFAULT_CLASS_ANNOTATION: "true"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
            "provisioner": "rancher.io/local-path"}


def claim(name: str = "data", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     **spec}}


def test_a_claim_without_a_class_gets_the_default_one():
    c = claim()
    admit_claim(c, [klass("slow"), klass("standard", default=True)])
    assert c["spec"]["storageClassName"] == "standard"


def test_several_defaults_the_newest_wins():
    c = claim()
    admit_claim(c, [klass("old", default=True), klass("new", default=True, created="2026-05-01T00:00:00Z")])
    assert c["spec"]["storageClassName"] == "new"


def test_a_chosen_class_no_class_or_no_default_is_left_alone():
    classes = [klass("standard", default=True)]
    for c, want in ((claim(storageClassName="fast"), "fast"), (claim(storageClassName=""), "")):
        admit_claim(c, classes)
        assert c["spec"]["storageClassName"] == want
    beta = claim()
    beta["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "gold"}
    admit_claim(beta, classes)
    assert "storageClassName" not in beta["spec"]
    none = claim()
    admit_claim(none, [klass("plain")])
    assert "storageClassName" not in none["spec"]


def test_the_create_path_admits_claims():
    async def body(api):
        await api.create("storageclasses", klass("standard", default=True))
        defaulted = await api.create("persistentvolumeclaims", claim("a"))
        missing = await api.create("persistentvolumeclaims", claim("b", storageClassName="nope"))
        return defaulted["spec"].get("storageClassName"), missing["spec"]["storageClassName"]
    # a class that does not exist is accepted: the PV controller reports it
    assert run(body) == ("standard", "nope")

    async def without_classes(api):
        return (await api.create("persistentvolumeclaims", claim("c")))["spec"].get("storageClassName")
    assert run(without_classes) is None


def volume(name: str = "pv1") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/srv/pv1"}}}


def test_claims_and_volumes_get_their_protection_finalizer_once():
    c = claim()
    c["metadata"]["finalizers"] = ["example.com/mine"]
    protect(c)
    assert c["metadata"]["finalizers"] == ["example.com/mine", "kubernetes.io/pvc-protection"]
    protect(c)
    assert c["metadata"]["finalizers"] == ["example.com/mine", "kubernetes.io/pvc-protection"]
    v = volume()
    protect(v)
    assert v["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]


def test_a_protected_claim_is_deleted_only_once_its_finalizer_is_removed():
    async def body(api):
        made = await api.create("persistentvolumeclaims", claim("a"))
        pv = await api.create("persistentvolumes", volume())
        await api.delete("persistentvolumeclaims", "a", "default")
        terminating = await api.get("persistentvolumeclaims", "a", "default")
        # as the pvc-protection controller removes it (the executor's RemoveFinalizer)
        await api.patch("persistentvolumeclaims", "a",
                        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["kubernetes.io/pvc-protection"],
                                      "uid": made["metadata"]["uid"]}}, "default", patch_type="strategic")
        try:
            await api.get("persistentvolumeclaims", "a", "default")
            gone = False
        except NotFound:
            gone = True
        return (made["metadata"]["finalizers"], pv["metadata"]["finalizers"],
                bool(terminating["metadata"].get("deletionTimestamp")), gone)
    assert run(body) == (["kubernetes.io/pvc-protection"], ["kubernetes.io/pv-protection"], True, True)
