"""The filters: each one's pass and fail cases, with kube-scheduler's reason strings."""
from __future__ import annotations

import pytest

from components.scheduling import filters as F


def node(name="n1", cpu="4", memory="8Gi", labels=None, taints=None, unschedulable=False,
         pods=None):
    alloc = {"cpu": cpu, "memory": memory}
    if pods is not None:
        alloc["pods"] = pods
    spec = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def container(cpu=None, memory=None, name="c", **extra):
    requests = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    return {"name": name, "image": "x", "resources": {"requests": requests}, **extra}


def pod(name="p", cpu=None, memory=None, containers=None, init=None, owner=None,
        namespace="default", **spec):
    spec = dict(spec)
    spec["containers"] = containers if containers is not None else [container(cpu, memory)]
    if init:
        spec["initContainers"] = init
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                    "uid": f"uid-{owner}", "controller": True}]
    return {"metadata": meta, "spec": spec}


# --- requests -------------------------------------------------------------------------------

def test_pod_requests_parse_quantities_and_sum_app_containers():
    p = pod(containers=[container("500m", "1Gi"), container("0.25", "512Mi")])
    assert F.pod_requests(p) == (750, 1536 * 2**20)


def test_init_containers_take_the_max_of_max_init_and_sum_of_app():
    # app sum 600m / 300Mi; biggest init 1 cpu / 100Mi -> max per resource
    p = pod(containers=[container("300m", "100Mi"), container("300m", "200Mi")],
            init=[container("1", "100Mi"), container("200m", "50Mi")])
    assert F.pod_requests(p) == (1000, 300 * 2**20)
    # init containers below the app sum change nothing
    p = pod(containers=[container("1", "1Gi")], init=[container("500m", "512Mi")])
    assert F.pod_requests(p) == (1000, 2**30)


def test_sidecar_init_containers_add_to_the_steady_state():
    sidecar = container("100m", "64Mi", restartPolicy="Always")
    p = pod(containers=[container("200m", "64Mi")], init=[sidecar, container("250m", "10Mi")])
    # steady: 300m / 128Mi; init phase: 250m + 100m sidecar = 350m
    assert F.pod_requests(p) == (350, 128 * 2**20)


def test_missing_requests_are_zero_or_non_zero_defaults():
    p = pod(containers=[container()])
    assert F.pod_requests(p) == (0, 0)
    assert F.pod_requests(p, non_zero=True) == (100, 200 * 2**20)
    # a request defaulted from the limit
    p = pod(containers=[{"name": "c", "resources": {"limits": {"cpu": "2"}}}])
    assert F.pod_requests(p).cpu == 2000


# --- NodeUnschedulable ----------------------------------------------------------------------

def test_node_unschedulable():
    assert F.node_unschedulable(pod(), node()) is None
    assert F.node_unschedulable(pod(), node(unschedulable=True)) == "node(s) were unschedulable"
    tolerant = pod(tolerations=[{"key": "node.kubernetes.io/unschedulable",
                                 "operator": "Exists", "effect": "NoSchedule"}])
    assert F.node_unschedulable(tolerant, node(unschedulable=True)) is None
    everything = pod(tolerations=[{"operator": "Exists"}])
    assert F.node_unschedulable(everything, node(unschedulable=True)) is None
    wrong_effect = pod(tolerations=[{"key": "node.kubernetes.io/unschedulable",
                                     "operator": "Exists", "effect": "NoExecute"}])
    assert F.node_unschedulable(wrong_effect, node(unschedulable=True)) is not None


# --- NodeName -------------------------------------------------------------------------------

def test_node_name():
    assert F.node_name_filter(pod(), node("a")) is None
    assert F.node_name_filter(pod(nodeName="a"), node("a")) is None
    assert F.node_name_filter(pod(nodeName="a"), node("b")) == \
        "node(s) didn't match the requested node name"


# --- NodeResourcesFit -----------------------------------------------------------------------

def test_fit_against_allocatable_minus_bound_requests():
    n = node(cpu="2", memory="4Gi")
    bound = [pod("b1", "1500m", "1Gi"), pod("b2", "250m", "1Gi")]
    assert F.node_resources_fit(pod(cpu="250m", memory="2Gi"), n, bound) is None
    assert F.node_resources_fit(pod(cpu="251m"), n, bound) == "Insufficient cpu"
    assert F.node_resources_fit(pod(memory="2049Mi"), n, bound) == "Insufficient memory"
    assert F.node_resources_fit_reasons(pod(cpu="1", memory="3Gi"), n, bound) == \
        ["Insufficient cpu", "Insufficient memory"]


def test_pods_without_requests_always_fit():
    full = node(cpu="1", memory="1Gi")
    bound = [pod("big", "1", "1Gi")]
    assert F.node_resources_fit(pod(containers=[container()]), full, bound) is None
    # ... and an over-committed node still takes a pod requesting only what is left (none)
    assert F.node_resources_fit(pod(memory="1"), full, bound) == "Insufficient memory"


def test_fit_counts_init_container_requests():
    n = node(cpu="1", memory="1Gi")
    p = pod(containers=[container("100m")], init=[container("1500m")])
    assert F.node_resources_fit(p, n) == "Insufficient cpu"


def test_terminal_pods_hold_no_resources():
    n = node(cpu="1")
    done = pod("done", "1")
    done["status"] = {"phase": "Succeeded"}
    assert F.node_resources_fit(pod(cpu="1"), n, [done]) is None


def test_too_many_pods_only_with_a_pod_limit():
    assert F.node_resources_fit(pod(), node(pods="1"), [pod("x")]) == "Too many pods"
    assert F.node_resources_fit(pod(), node(), [pod("x")] * 200) is None


# --- NodeAffinity ---------------------------------------------------------------------------

AFF = "node(s) didn't match Pod's node affinity/selector"


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                             {"nodeSelectorTerms": list(terms)}}}


def expr(key, op, *values):
    e = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def test_node_selector():
    n = node(labels={"disk": "ssd", "zone": "a"})
    assert F.node_affinity_filter(pod(nodeSelector={"disk": "ssd"}), n) is None
    assert F.node_affinity_filter(pod(nodeSelector={"disk": "hdd"}), n) == AFF
    assert F.node_affinity_filter(pod(nodeSelector={"gpu": "yes"}), n) == AFF


@pytest.mark.parametrize("e, matches", [
    (expr("zone", "In", "a", "b"), True),
    (expr("zone", "In", "b"), False),
    (expr("missing", "In", "a"), False),
    (expr("zone", "NotIn", "b"), True),
    (expr("zone", "NotIn", "a"), False),
    (expr("missing", "NotIn", "a"), True),
    (expr("zone", "Exists"), True),
    (expr("missing", "Exists"), False),
    (expr("zone", "DoesNotExist"), False),
    (expr("missing", "DoesNotExist"), True),
    (expr("cores", "Gt", "4"), True),
    (expr("cores", "Gt", "8"), False),
    (expr("cores", "Lt", "9"), True),
    (expr("cores", "Lt", "8"), False),
    (expr("zone", "Gt", "1"), False),      # not an integer label
    (expr("cores", "Gt", "x"), False),     # not an integer value
    (expr("missing", "Lt", "9"), False),
])
def test_required_affinity_operators(e, matches):
    n = node(labels={"zone": "a", "cores": "8"})
    result = F.node_affinity_filter(pod(affinity=required({"matchExpressions": [e]})), n)
    assert (result is None) is matches
    if not matches:
        assert result == AFF


def test_required_affinity_terms_or_expressions_and():
    n = node("n1", labels={"zone": "a", "disk": "ssd"})
    both = {"matchExpressions": [expr("zone", "In", "a"), expr("disk", "In", "hdd")]}
    assert F.node_affinity_filter(pod(affinity=required(both)), n) == AFF
    other = {"matchExpressions": [expr("disk", "Exists")]}
    assert F.node_affinity_filter(pod(affinity=required(both, other)), n) is None
    assert F.node_affinity_filter(pod(affinity=required({})), n) == AFF  # empty term: nothing
    by_name = {"matchFields": [expr("metadata.name", "In", "n1")]}
    assert F.node_affinity_filter(pod(affinity=required(by_name)), n) is None
    assert F.node_affinity_filter(pod(affinity=required(by_name)), node("n2")) == AFF


def test_node_selector_and_affinity_must_both_match():
    n = node(labels={"zone": "a"})
    p = pod(nodeSelector={"zone": "b"},
            affinity=required({"matchExpressions": [expr("zone", "In", "a")]}))
    assert F.node_affinity_filter(p, n) == AFF


# --- TaintToleration ------------------------------------------------------------------------

def taint(key, value=None, effect="NoSchedule"):
    t = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


def test_untolerated_taint_message():
    n = node(taints=[taint("node-role", "master")])
    assert F.taint_toleration(pod(), n) == "node(s) had untolerated taint {node-role: master}"
    unreachable = node(taints=[taint("node.kubernetes.io/unreachable", effect="NoExecute")])
    assert F.taint_toleration(pod(), unreachable) == \
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"


def test_prefer_no_schedule_does_not_filter():
    assert F.taint_toleration(pod(), node(taints=[taint("a", "b", "PreferNoSchedule")])) is None


def test_first_untolerated_taint_is_reported():
    n = node(taints=[taint("a", "1"), taint("b", "2")])
    p = pod(tolerations=[{"key": "a", "operator": "Equal", "value": "1"}])
    assert F.taint_toleration(p, n) == "node(s) had untolerated taint {b: 2}"


@pytest.mark.parametrize("toleration, tolerated", [
    ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, True),
    ({"key": "k", "value": "v"}, True),                      # Equal is the default; any effect
    ({"key": "k", "operator": "Equal", "value": "w"}, False),
    ({"key": "k", "operator": "Exists"}, True),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"operator": "Exists"}, True),                         # empty key + Exists: everything
    ({"operator": "Exists", "effect": "NoSchedule"}, True),
    ({"operator": "Exists", "effect": "PreferNoSchedule"}, False),
])
def test_toleration_matching(toleration, tolerated):
    n = node(taints=[taint("k", "v", "NoSchedule")])
    assert (F.taint_toleration(pod(tolerations=[toleration]), n) is None) is tolerated


def test_not_ready_node_is_filtered_by_its_taint():
    n = node(taints=[taint("node.kubernetes.io/not-ready", effect="NoExecute")])
    n["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert F.taint_toleration(pod(), n) == \
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    p = pod(tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                          "effect": "NoExecute", "tolerationSeconds": 300}])
    assert F.taint_toleration(p, n) is None


def test_filter_order_is_the_default_profile():
    assert [f.name for f in F.FILTERS] == ["NodeUnschedulable", "NodeName", "TaintToleration",
                                           "NodeAffinity", "NodeResourcesFit"]
