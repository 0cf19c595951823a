"""The VolumeBinding plugin's decisions over fake claims, volumes and classes."""
from __future__ import annotations

from components.scheduling import framework
from components.scheduling import volumebinding as vb
from components.scheduling.filters import FILTERS

HOSTNAME = "kubernetes.io/hostname"


class FakeCluster:
    def __init__(self, pvcs=(), pvs=(), classes=()):
        self.pvcs = {vb.claim_key(c): c for c in pvcs}
        self.pvs_ = {v["metadata"]["name"]: v for v in pvs}
        self.classes = {c["metadata"]["name"]: c for c in classes}

    def pvc(self, namespace, name):
        return self.pvcs.get(f"{namespace}/{name}")

    def pv(self, name):
        return self.pvs_.get(name)

    def storage_class(self, name):
        return self.classes.get(name)

    def pvs(self):
        return list(self.pvs_.values())


def node(name, **labels):
    return {"metadata": {"name": name, "labels": {HOSTNAME: name, **labels}}, "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}


NODES = [node("n1"), node("n2"), node("n3")]


def pod(*claims, name="p"):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c"}],
                     "volumes": [{"name": "cfg", "emptyDir": {}}]
                     + [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]}}


def sc(name, mode="WaitForFirstConsumer", provisioner="rancher.io/local-path", **extra):
    return {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode, **extra}


def pvc(name, cls="standard", size="1Gi", volume=None, annotations=None, **status):
    obj = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "5",
                        "annotations": dict(annotations or {})},
           "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": size}}},
           "status": {"phase": "Pending", **status}}
    if volume:
        obj["spec"]["volumeName"] = volume
        obj["metadata"]["annotations"][vb.ANN_BIND_COMPLETED] = "yes"
        obj["status"]["phase"] = "Bound"
    return obj


def pv(name, on=None, cls="standard", size="1Gi", phase="Available", claim=None):
    obj = {"metadata": {"name": name, "resourceVersion": "7"},
           "spec": {"storageClassName": cls, "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                    "hostPath": {"path": f"/data/{name}"}},
           "status": {"phase": phase}}
    if on:
        obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [on]}]}]}}
    if claim:
        obj["spec"]["claimRef"] = {"namespace": "default", "name": claim, "uid": f"uid-{claim}"}
    return obj


def run(p, cluster):
    """The scheduling cycle with VolumeBinding: (chosen node or None, message)."""
    state = vb.pre_filter(p, cluster)
    if isinstance(state, str):
        result = framework.rejected(p, NODES, vb.FILTER_NAME, state)
    else:
        result = framework.schedule(p, NODES, {}, filters=FILTERS + [vb.volume_filter(state, cluster)])
    return result.node, result.message


def test_missing_claim_is_unschedulable_before_the_filters():
    node, message = run(pod("data"), FakeCluster())
    assert node is None
    assert message == ('0/3 nodes are available: persistentvolumeclaim "data" not found. '
                       "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


def test_lost_or_deleting_claims():
    lost = pvc("data", volume="gone")
    lost["status"]["phase"] = "Lost"
    assert vb.pre_filter(pod("data"), FakeCluster([lost])) == \
        'persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"'
    deleting = pvc("data")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert vb.pre_filter(pod("data"), FakeCluster([deleting], classes=[sc("standard")])) == \
        'persistentvolumeclaim "data" is being deleted'


def test_unbound_immediate_claim_waits_for_the_pv_controller():
    for classes in ([sc("standard", mode="Immediate")], [], [sc("other")]):   # Immediate, or no such class
        assert vb.pre_filter(pod("data"), FakeCluster([pvc("data")], classes=classes)) == vb.ERR_UNBOUND_IMMEDIATE
    node, message = run(pod("data"), FakeCluster([pvc("data", cls="fast")]))
    assert node is None and message.startswith(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: ")
    # a claim pre-bound to a volume (volumeName set, binding not complete) is immediate too
    prebound = pvc("data")
    prebound["spec"]["volumeName"] = "v1"
    assert vb.pre_filter(pod("data"), FakeCluster([prebound], classes=[sc("standard")])) == vb.ERR_UNBOUND_IMMEDIATE


def test_bound_claim_keeps_the_pod_on_its_volume_node():
    cluster = FakeCluster([pvc("data", volume="v1")], [pv("v1", on="n2", phase="Bound", claim="data")],
                          [sc("standard")])
    assert run(pod("data"), cluster) == ("n2", "")
    state = vb.pre_filter(pod("data"), cluster)
    reasons, plan = vb.find_pod_volumes(state, NODES[0], cluster)
    assert reasons == [vb.ERR_NODE_CONFLICT] and not plan
    assert vb.find_pod_volumes(state, NODES[1], cluster) == ([], vb.Plan("n2"))


def test_bound_claim_on_a_node_that_cannot_take_the_pod():
    cluster = FakeCluster([pvc("data", volume="v1")], [pv("v1", on="n9", phase="Bound", claim="data")])
    node, message = run(pod("data"), cluster)
    assert node is None
    assert message == ("0/3 nodes are available: 3 node(s) had volume node affinity conflict. "
                       "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


def test_bound_claim_whose_volume_is_gone():
    node, message = run(pod("data"), FakeCluster([pvc("data", volume="v1")]))
    assert node is None and message.startswith(f"0/3 nodes are available: 3 {vb.ERR_PV_NOT_EXIST}.")


def test_a_volume_without_node_affinity_fits_everywhere():
    cluster = FakeCluster([pvc("data", volume="v1")], [pv("v1", phase="Bound", claim="data")])
    assert run(pod("data"), cluster)[0] in ("n1", "n2", "n3")


def test_wait_for_first_consumer_with_a_provisioner_fits_every_node_and_plans_provisioning():
    claim = pvc("data")
    cluster = FakeCluster([claim], classes=[sc("standard")])
    state = vb.pre_filter(pod("data"), cluster)
    assert state == vb.PodClaims((), (claim,))
    for n in NODES:
        reasons, plan = vb.find_pod_volumes(state, n, cluster)
        assert reasons == [] and plan.provisions == [claim] and plan.bindings == []


def test_no_provisioner_and_no_volume_is_a_bind_conflict():
    for cls in (sc("standard", provisioner=vb.NOT_SUPPORTED_PROVISIONER), sc("standard", provisioner="")):
        node, message = run(pod("data"), FakeCluster([pvc("data")], classes=[cls]))
        assert node is None
        assert message.startswith(f"0/3 nodes are available: 3 {vb.ERR_BIND_CONFLICT}.")


def test_allowed_topologies_limit_provisioning():
    cls = sc("standard", allowedTopologies=[{"matchLabelExpressions": [{"key": HOSTNAME, "values": ["n3"]}]}])
    assert run(pod("data"), FakeCluster([pvc("data")], classes=[cls])) == ("n3", "")


def test_an_available_local_volume_pins_the_node_and_is_bound_statically():
    claim = pvc("data")
    cluster = FakeCluster([claim], [pv("big", on="n1", size="5Gi"), pv("small", on="n1", size="2Gi"),
                                    pv("tiny", on="n2", size="100Mi")],
                          [sc("standard", provisioner=vb.NOT_SUPPORTED_PROVISIONER)])
    assert run(pod("data"), cluster)[0] == "n1"    # tiny is too small, n3 has none
    reasons, plan = vb.find_pod_volumes(vb.pre_filter(pod("data"), cluster), NODES[0], cluster)
    assert reasons == [] and [(v["metadata"]["name"], c["metadata"]["name"]) for v, c in plan.bindings] == \
        [("small", "data")]   # the smallest that fits


def test_matching_rules():
    claim = pvc("data")
    ok = pv("v", on="n1")
    assert vb.find_matching_volume(claim, [ok], NODES[0], set(), True) is ok
    assert vb.find_matching_volume(claim, [ok], NODES[0], {"v"}, True) is None          # chosen already
    assert vb.find_matching_volume(claim, [pv("v", cls="x")], NODES[0], set(), True) is None
    assert vb.find_matching_volume(claim, [pv("v", phase="Released")], NODES[0], set(), True) is None
    assert vb.find_matching_volume(claim, [pv("v", claim="other")], NODES[0], set(), True) is None
    rwx = pvc("data")
    rwx["spec"]["accessModes"] = ["ReadWriteMany"]
    assert vb.find_matching_volume(rwx, [ok], NODES[0], set(), True) is None
    block = pv("v")
    block["spec"]["volumeMode"] = "Block"
    assert vb.find_matching_volume(claim, [block], NODES[0], set(), True) is None
    labelled = pvc("data")
    labelled["spec"]["selector"] = {"matchLabels": {"tier": "db"}}
    assert vb.find_matching_volume(labelled, [ok], NODES[0], set(), True) is None
    # pre-bound to this claim: chosen whatever its phase, unless it does not fit the node
    pre = pv("v", on="n1", phase="Bound", claim="data")
    assert vb.find_matching_volume(claim, [ok, pre], NODES[0], set(), True) is pre
    assert vb.find_matching_volume(claim, [pre], NODES[1], set(), True) is None
    # the PV controller (no node) leaves a delayed claim's volumes to the scheduler
    assert vb.find_matching_volume(claim, [ok], None, set(), True) is None
    assert vb.find_matching_volume(claim, [ok], None, set(), False) is ok


def test_a_claim_with_a_selected_node_fits_only_there():
    claim = pvc("data", annotations={vb.ANN_SELECTED_NODE: "n2"})
    assert run(pod("data"), FakeCluster([claim], classes=[sc("standard")])) == ("n2", "")


def test_pvc_filter_comes_after_the_others():
    """A node failing an earlier filter reports that filter's reason, as upstream's order says."""
    cluster = FakeCluster([pvc("data", volume="v1")], [pv("v1", on="n2", phase="Bound", claim="data")])
    p = pod("data")
    p["spec"]["nodeSelector"] = {"zone": "a"}
    node_, message = run(p, cluster)
    assert node_ is None and message.startswith(
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.")


def test_no_nodes():
    assert framework.rejected(pod("x"), [], vb.FILTER_NAME, "whatever").message == framework.NO_NODES_AVAILABLE


def test_preemption_never_in_a_prefilter_rejection():
    p = pod("data")
    p["spec"]["preemptionPolicy"] = "Never"
    assert run(p, FakeCluster())[1] == ('0/3 nodes are available: persistentvolumeclaim "data" not found. '
                                        "preemption: not eligible due to preemptionPolicy=Never.")


# --- PreBind ----------------------------------------------------------------------------------

def test_patches():
    claim, volume = pvc("data"), pv("v1", on="n1")
    assert vb.select_node_patch(claim, "n1") == {
        "metadata": {"resourceVersion": "5", "annotations": {vb.ANN_SELECTED_NODE: "n1"}}}
    patch = vb.bind_volume_patch(volume, claim)
    assert patch["metadata"] == {"resourceVersion": "7", "annotations": {vb.ANN_BOUND_BY_CONTROLLER: "yes"}}
    assert patch["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                         "namespace": "default", "name": "data", "uid": "uid-data",
                                         "resourceVersion": "5"}


def test_check_bindings_for_a_provisioned_claim():
    claim = pvc("data")
    plan = vb.Plan("n1", provisions=[claim], written={("pvc", "default/data"): "6"})
    n1 = NODES[0]
    assert vb.check_bindings(n1, plan, FakeCluster([claim])) is False       # the informer lags our write
    selected = pvc("data", annotations={vb.ANN_SELECTED_NODE: "n1"})
    selected["metadata"]["resourceVersion"] = "6"
    assert vb.check_bindings(n1, plan, FakeCluster([selected])) is False    # not bound yet
    done = pvc("data", volume="pvc-1", annotations={vb.ANN_SELECTED_NODE: "n1"})
    done["metadata"]["resourceVersion"] = "9"
    assert vb.check_bindings(n1, plan, FakeCluster([done])) is False        # its volume not seen yet
    assert vb.check_bindings(n1, plan, FakeCluster([done], [pv("pvc-1", on="n1", phase="Bound")])) is True
    assert vb.check_bindings(n1, plan, FakeCluster([done], [pv("pvc-1", on="n2", phase="Bound")])) == \
        "pv \"pvc-1\" node affinity doesn't match node \"n1\": no matching NodeSelectorTerms"
    reset = pvc("data", annotations={"other": "x"})
    reset["metadata"]["resourceVersion"] = "8"
    assert vb.check_bindings(n1, plan, FakeCluster([reset])) == 'provisioning failed for PVC "data"'
    reset["metadata"]["annotations"] = {}
    assert vb.check_bindings(n1, plan, FakeCluster([reset])) == 'selectedNode annotation reset for PVC "data"'
    assert vb.check_bindings(n1, plan, FakeCluster()) == \
        'failed to check provisioning pvc: persistentvolumeclaim "data" not found'


def test_check_bindings_for_a_static_binding():
    claim, volume = pvc("data"), pv("v1", on="n1")
    plan = vb.Plan("n1", bindings=[(volume, claim)], written={("pv", "v1"): "8"})
    n1 = NODES[0]
    assert vb.check_bindings(n1, plan, FakeCluster([claim], [volume])) is False    # our write not seen yet
    claimed = pv("v1", on="n1", claim="data")
    claimed["metadata"]["resourceVersion"] = "8"
    assert vb.check_bindings(n1, plan, FakeCluster([claim], [claimed])) is False
    assert vb.check_bindings(n1, plan, FakeCluster([pvc("data", volume="v1")], [claimed])) is True
    unbound = pv("v1", on="n1")
    unbound["metadata"]["resourceVersion"] = "9"
    assert vb.check_bindings(n1, plan, FakeCluster([claim], [unbound])) == 'ClaimRef got reset for pv "v1"'
