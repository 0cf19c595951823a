"""components.controllers.localpath: the local-path provisioner's decisions (provisioning a
claim's volume on its selected node; deleting a Released volume and only its own directory)."""
from __future__ import annotations

from components.controllers import CreateObject, DeleteObject, RecordEvent
from components.controllers.localpath import (node_root, owned_directory, sync_claim, sync_volume,
                                             template_parts, volume_node)
from components.controllers.persistentvolume import (ANN_PROVISIONED_BY, ANN_SELECTED_NODE,
                                                     ANN_STORAGE_PROVISIONER)

TEMPLATE = "/state/nodes/{node}/local-path"
CLASSES = {"standard": {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                        "metadata": {"name": "standard"}, "provisioner": "rancher.io/local-path",
                        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}}


def claim(node="node-1", provisioner="rancher.io/local-path", cls="standard", **spec):
    annotations = {}
    if provisioner:
        annotations[ANN_STORAGE_PROVISIONER] = provisioner
    if node:
        annotations[ANN_SELECTED_NODE] = node
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "db", "uid": "u1", "resourceVersion": "9",
                         "annotations": annotations},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}},
                     "storageClassName": cls, "volumeMode": "Filesystem", **spec},
            "status": {"phase": "Pending"}}


def test_provisions_the_claims_volume_on_its_node():
    actions = sync_claim(claim(), CLASSES, {}, TEMPLATE)
    assert [type(a) for a in actions] == [RecordEvent, CreateObject, RecordEvent]
    assert actions[0].reason == "Provisioning"
    assert actions[0].message == 'External provisioner is provisioning volume for claim "db/data"'
    assert (actions[2].reason, actions[2].message) == (
        "ProvisioningSucceeded", "Successfully provisioned volume pvc-u1")
    assert actions[1] == CreateObject(None, {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pvc-u1", "annotations": {ANN_PROVISIONED_BY: "rancher.io/local-path"}},
        "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard",
                 "volumeMode": "Filesystem",
                 "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "db", "name": "data", "uid": "u1",
                              "apiVersion": "v1", "resourceVersion": "9"},
                 "hostPath": {"path": "/state/nodes/node-1/local-path/pvc-u1_db_data", "type": "DirectoryOrCreate"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}}}})


def test_what_it_leaves_alone():
    made = {"pvc-u1": {"metadata": {"name": "pvc-u1"}}}
    assert sync_claim(claim(), CLASSES, made, TEMPLATE) == []                       # made already
    assert sync_claim(claim(provisioner="example.com/other"), CLASSES, {}, TEMPLATE) == []
    assert sync_claim(claim(provisioner=None), CLASSES, {}, TEMPLATE) == []         # not asked yet
    assert sync_claim(claim(cls="gone"), CLASSES, {}, TEMPLATE) == []               # the PV controller says
    assert sync_claim(claim(volumeName="pv9"), CLASSES, {}, TEMPLATE) == []


def test_what_it_refuses():
    def refusal(c):
        (event,) = sync_claim(c, CLASSES, {}, TEMPLATE)
        assert event.reason == "ProvisioningFailed" and event.type == "Warning"
        return event.message
    prefix = 'failed to provision volume with StorageClass "standard": '
    assert refusal(claim(node=None)) == prefix + "configuration error, no node was specified"
    assert refusal(claim(selector={"matchLabels": {"a": "b"}})) == prefix + "claim.Spec.Selector is not supported"
    assert refusal(claim(accessModes=["ReadWriteMany"])) == (
        prefix + "NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes")


def released(policy="Delete", path="/state/nodes/node-1/local-path/pvc-u1_db_data", name="pvc-u1"):
    (create,) = [a for a in sync_claim(claim(), CLASSES, {}, TEMPLATE) if isinstance(a, CreateObject)]
    pv = create.object
    pv["metadata"].update(name=name, uid="pv-uid")
    pv["spec"].update(persistentVolumeReclaimPolicy=policy, hostPath={"path": path, "type": "DirectoryOrCreate"})
    pv["status"] = {"phase": "Released"}
    return pv


def test_a_released_delete_volume_goes_with_its_directory():
    deletion = sync_volume(released(), TEMPLATE)
    assert deletion.directory == "/state/nodes/node-1/local-path/pvc-u1_db_data"
    assert deletion.actions == [DeleteObject("v1", "PersistentVolume", None, "pvc-u1", "pv-uid")]
    assert sync_volume(released(policy="Retain"), TEMPLATE) is None
    bound = released()
    bound["status"] = {"phase": "Bound"}
    assert sync_volume(bound, TEMPLATE) is None
    foreign = released()
    del foreign["metadata"]["annotations"]
    assert sync_volume(foreign, TEMPLATE) is None


def test_only_its_own_directory_is_named_for_removal():
    assert owned_directory(released(path="/etc"), TEMPLATE) is None
    assert owned_directory(released(path="/state/nodes/node-1/local-path/pvc-u1_db_other"), TEMPLATE) is None
    assert owned_directory(released(path="/state/nodes/node-2/local-path/pvc-u1_db_data"), TEMPLATE) is None
    assert owned_directory(released(name="pvc-other"), TEMPLATE) is None
    hand_made = sync_volume(released(path="/srv/data"), TEMPLATE)
    assert hand_made.directory is None and len(hand_made.actions) == 1   # the object goes, the disk stays


def test_a_node_name_that_is_not_one_names_no_directory():
    # "/" or ".." in a node name would name a directory outside the node roots
    for node in ("../../etc", "node-1/../../../etc", "a/b", ".."):
        pv = released(path=f"/state/nodes/{node}/local-path/pvc-u1_db_data")
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = [node]
        assert volume_node(pv) is None, node
        assert owned_directory(pv, TEMPLATE) is None, node
        (event,) = sync_claim(claim(node=node), CLASSES, {}, TEMPLATE)
        assert (event.reason, event.message) == (
            "ProvisioningFailed", 'failed to provision volume with StorageClass "standard": '
                                  f'configuration error, invalid node name "{node}"')


def test_braces_in_the_state_directory_are_not_a_template():
    template = "/st{a}te/x}{/nodes/{node}/local-path"
    assert node_root(template, "node-1") == "/st{a}te/x}{/nodes/node-1/local-path"
    (create,) = [a for a in sync_claim(claim(), CLASSES, {}, template) if isinstance(a, CreateObject)]
    assert create.object["spec"]["hostPath"]["path"] == "/st{a}te/x}{/nodes/node-1/local-path/pvc-u1_db_data"
    assert template_parts(template) == ("/st{a}te/x}{/nodes/", "/local-path")
