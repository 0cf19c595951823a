"""Namespace, Node, Lease, ReplicaSet, Deployment, Event and Scale: defaults, one mistake one
message in Kubernetes' words, and never a crash."""
import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubemu.api import objects
from kubemu.api.fielderrors import FieldError, ValidationError
from kubemu.api.meta import KNOWN_FIELDS
from kubemu.api.objects import (apply_scale, default_deployment, default_event, default_lease,
                                default_namespace, default_node, default_object,
                                default_replicaset, scale_of, validate_deployment,
                                validate_event, validate_lease, validate_namespace, validate_node,
                                validate_object, validate_object_update, validate_replicaset,
                                validate_scale)


def namespace():
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}


def node():
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
            "spec": {"unschedulable": False, "podCIDR": "10.244.1.0/24",
                     "taints": [{"key": "node-role.kubernetes.io/control-plane",
                                 "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "3800m", "memory": "7Gi", "pods": 110},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "lastHeartbeatTime": "2024-01-02T03:04:05Z"}],
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": "node-1"}],
                       "nodeInfo": {"kubeletVersion": "v1.30.0"}}}


def lease():
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
            "spec": {"holderIdentity": "sched-1", "leaseDurationSeconds": 15,
                     "acquireTime": "2024-01-02T03:04:05.000000Z",
                     "renewTime": "2024-01-02T03:04:15.123456Z", "leaseTransitions": 2}}


def template():
    return {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "command": ["sleep", "1000"]}]}}


def replicaset():
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-abc", "namespace": "default",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": "web", "uid": "u1", "controller": True}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": template()},
            "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2,
                       "fullyLabeledReplicas": 3, "observedGeneration": 1}}


def deployment():
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": template()}}


def event():
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "web.17a", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web",
                               "uid": "u1", "apiVersion": "v1"},
            "reason": "Started", "message": "Started container app", "type": "Normal",
            "count": 1, "firstTimestamp": "2024-01-02T03:04:05Z",
            "lastTimestamp": "2024-01-02T03:04:05Z", "source": {"component": "kubelet",
                                                              "host": "node-1"}}


MAKERS = {"Namespace": namespace, "Node": node, "Lease": lease, "ReplicaSet": replicaset,
          "Deployment": deployment, "Event": event}
VALIDATE = {"Namespace": validate_namespace, "Node": validate_node, "Lease": validate_lease,
            "ReplicaSet": validate_replicaset, "Deployment": validate_deployment,
            "Event": validate_event}
DEFAULT = {"Namespace": default_namespace, "Node": default_node, "Lease": default_lease,
           "ReplicaSet": default_replicaset, "Deployment": default_deployment,
           "Event": default_event}


def set_path(obj, path, value):
    parts = path.split(".")
    for p in parts[:-1]:
        if isinstance(obj, list):
            obj = obj[int(p)]
        else:
            obj = obj.setdefault(p, {})
    if isinstance(obj, list):
        obj[int(parts[-1])] = value
    elif value is DELETE:
        obj.pop(parts[-1], None)
    else:
        obj[parts[-1]] = value


DELETE = object()


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_realistic_objects_are_valid_raw_and_defaulted(kind):
    obj = MAKERS[kind]()
    assert VALIDATE[kind](obj) == []
    defaulted = DEFAULT[kind](obj)
    assert obj == MAKERS[kind](), "defaulting leaves its input alone"
    assert VALIDATE[kind](defaulted) == []
    assert validate_object(defaulted) == []


SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    r"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")

CASES = [
    # Namespace
    ("Namespace", "metadata.name", "a.b", f'metadata.name: Invalid value: "a.b": {LABEL}'),
    ("Namespace", "metadata.namespace", "x", "metadata.namespace: Forbidden: not allowed on this type"),
    ("Namespace", "status.phase", "Gone", 'status.phase: Unsupported value: "Gone": supported '
     'values: "Active", "Terminating"'),
    ("Namespace", "spec.finalizers", ["foo"], 'spec.finalizers: Invalid value: "foo": name is '
     "neither a standard finalizer name nor is it fully qualified"),
    ("Namespace", "spec.color", "red", "spec.color: Unknown field"),
    ("Namespace", "apiVersion", "v2", 'apiVersion: Unsupported value: "v2": supported values: "v1"'),
    # Node
    ("Node", "metadata.name", "Node_1", f'metadata.name: Invalid value: "Node_1": {SUBDOMAIN}'),
    ("Node", "spec.taints.0.effect", "Sometimes", 'spec.taints[0].effect: Unsupported value: '
     '"Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'),
    ("Node", "spec.taints.0.effect", DELETE, "spec.taints[0].effect: Required value"),
    ("Node", "spec.taints.0.key", "", "spec.taints[0].key: Required value"),
    ("Node", "spec.taints", [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}],
     'spec.taints[1]: Duplicate value: {"key":"a","effect":"NoSchedule"}: taints must be unique '
     "by key and effect pair"),
    ("Node", "spec.unschedulable", "yes", 'spec.unschedulable: Invalid value: "yes": must be a boolean'),
    ("Node", "status.capacity.cpu", "-1", 'status.capacity.cpu: Invalid value: "-1": must be '
     "greater than or equal to 0"),
    ("Node", "status.allocatable.memory", "lots", 'status.allocatable.memory: Invalid value: '
     "\"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*"
     "[-+]?[0-9]*)$'"),
    ("Node", "status.conditions.0.type", DELETE, "status.conditions[0].type: Required value"),
    ("Node", "status.conditions.0.status", "Maybe", 'status.conditions[0].status: Unsupported '
     'value: "Maybe": supported values: "True", "False", "Unknown"'),
    ("Node", "status.addresses.0.type", "Public", 'status.addresses[0].type: Unsupported value: '
     '"Public": supported values: "Hostname", "InternalIP", "ExternalIP", "InternalDNS", '
     '"ExternalDNS"'),
    ("Node", "status.addresses.0.address", DELETE, "status.addresses[0].address: Required value"),
    ("Node", "status.spare", 1, "status.spare: Unknown field"),
    ("Node", "spec.podCIDR", "10.244.1.0", 'spec.podCIDR: Invalid value: "10.244.1.0": must be a '
     "valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"),
    ("Node", "spec.podCIDRs", ["10.244.1.0/24", "ten"], 'spec.podCIDRs[1]: Invalid value: "ten": '
     "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"),
    ("Node", "spec.podCIDRs", ["10.244.1.0/24", "10.244.2.0/24"], 'spec.podCIDRs: Invalid value: '
     '["10.244.1.0/24","10.244.2.0/24"]: may specify no more than one CIDR for each IP family'),
    ("Node", "spec.podCIDRs", ["10.244.2.0/24"], 'spec.podCIDRs[0]: Invalid value: '
     '"10.244.2.0/24": must match spec.podCIDR'),
    # Lease
    ("Lease", "spec.leaseDurationSeconds", 0, "spec.leaseDurationSeconds: Invalid value: 0: must "
     "be greater than 0"),
    ("Lease", "spec.leaseTransitions", -1, "spec.leaseTransitions: Invalid value: -1: must be "
     "greater than or equal to 0"),
    ("Lease", "spec.renewTime", "now", 'spec.renewTime: Invalid value: "now": must be an RFC 3339 '
     'date-time, e.g. "2006-01-02T15:04:05Z"'),
    ("Lease", "spec.holderIdentity", 7, "spec.holderIdentity: Invalid value: 7: must be a string"),
    ("Lease", "metadata.namespace", DELETE, "metadata.namespace: Required value"),
    ("Lease", "status", {}, "status: Unknown field"),
    # ReplicaSet
    ("ReplicaSet", "spec.replicas", -1, "spec.replicas: Invalid value: -1: must be greater than "
     "or equal to 0"),
    ("ReplicaSet", "spec.selector", DELETE, "spec.selector: Required value"),
    ("ReplicaSet", "spec.selector", {}, "spec.selector: Invalid value: {}: empty selector is "
     "invalid for deployment"),
    ("ReplicaSet", "spec.template.metadata.labels", {"app": "db"}, "spec.template.metadata.labels: "
     'Invalid value: {"app":"db"}: `selector` does not match template `labels`'),
    ("ReplicaSet", "spec.minReadySeconds", -5, "spec.minReadySeconds: Invalid value: -5: must be "
     "greater than or equal to 0"),
    ("ReplicaSet", "spec.template.spec.restartPolicy", "Never", "spec.template.spec.restartPolicy: "
     'Unsupported value: "Never": supported values: "Always"'),
    ("ReplicaSet", "spec.template.spec.activeDeadlineSeconds", 30,
     "spec.template.spec.activeDeadlineSeconds: Invalid value: 30: activeDeadlineSeconds in "
     "ReplicaSet is not Supported"),
    ("ReplicaSet", "spec.template.spec.containers", [], "spec.template.spec.containers: Required value"),
    ("ReplicaSet", "spec.template.spec.containers.0.name", "App", 'spec.template.spec.containers[0]'
     f'.name: Invalid value: "App": {LABEL}'),
    ("ReplicaSet", "spec.template.kind", "Pod", "spec.template.kind: Unknown field"),
    ("ReplicaSet", "spec.selector.matchExpressions", [{"key": "app", "operator": "In"}],
     "spec.selector.matchExpressions[0].values: Required value: must be specified when "
     "`operator` is 'In' or 'NotIn'"),
    ("ReplicaSet", "spec.selector.matchExpressions", [{"key": "x", "operator": "Near"}],
     'spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator'),
    ("ReplicaSet", "status.readyReplicas", 4, "status.readyReplicas: Invalid value: 4: cannot be "
     "greater than status.replicas"),
    ("ReplicaSet", "status.availableReplicas", 3, "status.availableReplicas: Invalid value: 3: "
     "cannot be greater than readyReplicas"),
    ("ReplicaSet", "metadata.ownerReferences.0.uid", DELETE, 'metadata.ownerReferences.uid: '
     'Invalid value: "": uid must not be empty'),
    # Deployment
    ("Deployment", "spec.replicas", "3", 'spec.replicas: Invalid value: "3": must be an integer'),
    ("Deployment", "spec.strategy", {"type": "BlueGreen"}, 'spec.strategy.type: Unsupported value: '
     '"BlueGreen": supported values: "Recreate", "RollingUpdate"'),
    ("Deployment", "spec.strategy", {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}},
     "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"),
    ("Deployment", "spec.strategy", {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}},
     'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "0%": may not be 0 when '
     "`maxSurge` is 0"),
    ("Deployment", "spec.strategy", {"rollingUpdate": {"maxSurge": "5"}},
     'spec.strategy.rollingUpdate.maxSurge: Invalid value: "5": a valid percent string must be a '
     "numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation "
     "is '[0-9]+%')"),
    ("Deployment", "spec.strategy", {"rollingUpdate": {"maxUnavailable": -1}},
     "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: -1: must be greater than or "
     "equal to 0"),
    ("Deployment", "spec.strategy", {"rollingUpdate": {"maxUnavailable": "150%"}},
     'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be greater '
     "than 100%"),
    ("Deployment", "spec.strategy", {"rollingUpdate": {"maxSurge": 1.5}},
     "spec.strategy.rollingUpdate.maxSurge: Invalid value: 1.5: must be an integer or a "
     "percentage string"),
    ("Deployment", "spec.revisionHistoryLimit", -1, "spec.revisionHistoryLimit: Invalid value: -1: "
     "must be greater than or equal to 0"),
    ("Deployment", "spec.minReadySeconds", 600, "spec.progressDeadlineSeconds: Invalid value: 600: "
     "must be greater than minReadySeconds"),
    ("Deployment", "spec.progressDeadlineSeconds", 0, "spec.progressDeadlineSeconds: Invalid value: "
     "0: must be greater than minReadySeconds"),
    ("Deployment", "spec.paused", "no", 'spec.paused: Invalid value: "no": must be a boolean'),
    ("Deployment", "spec.rollbackTo", {}, "spec.rollbackTo: Unknown field"),
    ("Deployment", "spec.template.metadata.labels", None, "spec.template.metadata.labels: Invalid "
     "value: {}: `selector` does not match template `labels`"),
    ("Deployment", "status.updatedReplicas", 1, "status.updatedReplicas: Invalid value: 1: cannot "
     "be greater than status.replicas"),
    ("Deployment", "kind", "ReplicaSet", 'kind: Unsupported value: "ReplicaSet": supported '
     'values: "Deployment"'),
    # Event
    ("Event", "involvedObject", DELETE, "involvedObject: Required value"),
    ("Event", "involvedObject.name", DELETE, "involvedObject.name: Required value"),
    ("Event", "involvedObject.namespace", "other", 'involvedObject.namespace: Invalid value: '
     '"other": does not match event.namespace'),
    ("Event", "type", "Info", 'type: Unsupported value: "Info": supported values: "Normal", "Warning"'),
    ("Event", "reason", "x" * 129, 'reason: Invalid value: "": can have at most 128 characters'),
    ("Event", "count", -1, "count: Invalid value: -1: must be greater than or equal to 0"),
    ("Event", "lastTimestamp", 5, "lastTimestamp: Invalid value: 5: must be a string"),
    ("Event", "source.component", ["kubelet"], 'source.component: Invalid value: ["kubelet"]: '
     "must be a string"),
    ("Event", "source.pid", 1, "source.pid: Unknown field"),
    ("Event", "metadata.namespace", DELETE, "metadata.namespace: Required value"),
    ("Event", "eventTime", "2024-01-02T03:04:05.000000Z", "reportingComponent: Required value"),
]


@pytest.mark.parametrize("kind, path, value, expected", CASES,
                         ids=[f"{k}:{p}" for k, p, _, _ in CASES])
def test_one_mistake_one_message(kind, path, value, expected):
    obj = MAKERS[kind]()
    set_path(obj, path, value)
    got = [str(e) for e in VALIDATE[kind](obj)]
    if kind == "Event" and path == "eventTime":  # new-style events need three fields
        assert got[0] == expected and len(got) == 3, got
        return
    if kind == "Event" and path == "metadata.namespace":  # and then it mismatches the object's
        assert got[0] == expected, got
        return
    assert got == [expected]


def test_invalid_objects_read_like_kubectl():
    d = deployment()
    d["spec"]["replicas"] = -1
    assert str(ValidationError(validate_deployment(d), kind="Deployment", name="web")) == \
        'Deployment "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0'


def test_not_strict_ignores_unknown_fields():
    d = deployment()
    d["spec"]["rollbackTo"] = {}
    d["spec"]["template"]["spec"]["containers"][0]["sidecar"] = True
    d["metadata"]["colour"] = "red"
    assert validate_deployment(d, strict=False) == []
    assert len(validate_deployment(d)) == 3


# --- defaults -----------------------------------------------------------------------------------

def test_namespace_defaults():
    assert default_namespace(namespace())["status"] == {"phase": "Active"}
    ns = namespace()
    ns["status"] = {"phase": "Terminating"}
    assert default_namespace(ns)["status"]["phase"] == "Terminating"
    assert "namespace" not in default_namespace(ns)["metadata"]


def test_node_defaults_allocatable_to_capacity():
    n = node()
    del n["status"]["allocatable"]
    assert default_node(n)["status"]["allocatable"] == n["status"]["capacity"]
    assert default_node(node())["status"]["allocatable"]["cpu"] == "3800m"


def test_replicaset_defaults():
    rs = replicaset()
    del rs["spec"]["replicas"]
    out = default_replicaset(rs)
    assert out["spec"]["replicas"] == 1
    pod_spec = out["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Always" and pod_spec["dnsPolicy"] == "ClusterFirst"
    assert pod_spec["containers"][0]["terminationMessagePolicy"] == "File"
    assert "namespace" not in out["spec"]["template"]["metadata"]


def test_deployment_defaults():
    d = deployment()
    del d["spec"]["replicas"]
    d["metadata"].pop("namespace")
    out = default_deployment(d)
    spec = out["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["revisionHistoryLimit"] == 10 and spec["progressDeadlineSeconds"] == 600
    assert out["metadata"]["namespace"] == "default"
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    d["spec"]["strategy"] = {"type": "Recreate"}
    d["spec"]["replicas"] = 0
    out = default_deployment(d)
    assert out["spec"]["strategy"] == {"type": "Recreate"} and out["spec"]["replicas"] == 0
    d["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 2}}
    assert default_deployment(d)["spec"]["strategy"]["rollingUpdate"] == \
        {"maxSurge": 2, "maxUnavailable": "25%"}


def test_defaults_leave_bad_types_for_validation():
    for kind, default in DEFAULT.items():
        obj = MAKERS[kind]()
        obj["spec"] = "nonsense"
        out = default(obj)
        assert out["spec"] == "nonsense"
        assert any(str(e).startswith("spec") for e in VALIDATE[kind](out)) or kind == "Event"


def test_default_object_and_validate_object_dispatch_by_kind():
    assert default_object(deployment())["spec"]["revisionHistoryLimit"] == 10
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "a", "command": ["true"]}]}}
    assert default_object(pod)["spec"]["restartPolicy"] == "Always"
    assert validate_object(pod) == []
    assert [str(e) for e in validate_object({"kind": "Ingress"})] == [
        'kind: Unsupported value: "Ingress": supported values: "CertificateSigningRequest", "ClusterRole", '
        '"ClusterRoleBinding", "ConfigMap", "ControllerRevision", "CronJob", "DaemonSet", '
        '"Deployment", "EndpointSlice", "Endpoints", "Event", "IPAddress", "Job", "Lease", "Namespace", "Node", '
        '"PersistentVolume", "PersistentVolumeClaim", "Pod", "PodDisruptionBudget", "ReplicaSet", '
        '"Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "StatefulSet", "StorageClass"']
    assert [str(e) for e in validate_object({})] == ["kind: Required value"]
    assert default_object(["x"]) == ["x"]


def test_updates():
    old = default_deployment(deployment())
    old["metadata"].update(uid="u1", resourceVersion="4")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    assert validate_object_update(old, new) == []
    new["spec"]["selector"] = {"matchLabels": {"app": "web", "v": "2"}}
    new["spec"]["template"]["metadata"]["labels"]["v"] = "2"
    assert [str(e) for e in validate_object_update(old, new)] == [
        'spec.selector: Invalid value: {"matchLabels":{"app":"web","v":"2"}}: field is immutable']
    renamed = copy.deepcopy(old)
    renamed["metadata"]["name"] = "web2"
    assert [str(e) for e in validate_object_update(old, renamed)] == [
        'metadata.name: Invalid value: "web2": field is immutable']


def test_node_pod_cidr_and_pod_cidrs_fill_in_from_each_other():
    assert default_node(node())["spec"]["podCIDRs"] == ["10.244.1.0/24"]
    n = node()
    n["spec"] = {"podCIDRs": ["10.244.1.0/24", "fd00:1::/64"]}
    assert validate_node(n) == []
    assert default_node(n)["spec"]["podCIDR"] == "10.244.1.0/24"
    n["spec"] = {}
    assert default_node(n)["spec"] == {}


def test_node_pod_cidrs_may_be_set_once_and_never_changed():
    empty = default_node(node())
    empty["spec"] = {}
    empty["metadata"].update(uid="u1", resourceVersion="4")
    assigned = default_node(dict(copy.deepcopy(empty), spec={"podCIDR": "10.244.3.0/24"}))
    assert validate_object_update(empty, assigned) == []
    assert validate_object_update(assigned, copy.deepcopy(assigned)) == []
    changed = "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"
    for spec in ({"podCIDR": "10.244.4.0/24"}, {},
                 {"podCIDRs": ["10.244.3.0/24", "fd00::/64"]}):
        new = default_node(dict(copy.deepcopy(assigned), spec=spec))
        assert changed in [str(e) for e in validate_object_update(assigned, new)], spec
    # a node stored with podCIDR alone (before defaulting filled podCIDRs) keeps it too
    legacy = dict(copy.deepcopy(empty), spec={"podCIDR": "10.244.3.0/24"})
    assert validate_object_update(legacy, assigned) == []
    assert [str(e) for e in validate_object_update(legacy, empty)] == [changed]


# --- Scale -----------------------------------------------------------------------------------------

def test_scale_of():
    rs = replicaset()
    rs["metadata"].update(uid="u9", resourceVersion="12")
    assert scale_of(rs) == {
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web-abc", "namespace": "default", "uid": "u9",
                     "resourceVersion": "12"},
        "spec": {"replicas": 3}, "status": {"replicas": 3, "selector": "app=web"}}
    assert scale_of(deployment())["status"] == {"replicas": 0, "selector": "app=web"}
    assert validate_scale(scale_of(rs)) == []
    assert scale_of("junk")["spec"] == {"replicas": 1}


def test_apply_scale():
    d = deployment()
    out = apply_scale(d, 7)
    assert out["spec"]["replicas"] == 7 and d["spec"]["replicas"] == 2
    assert apply_scale(d, {"spec": {"replicas": 0}})["spec"]["replicas"] == 0
    with pytest.raises(ValidationError) as e:
        apply_scale(d, -1)
    assert str(e.value) == ('Scale "web" is invalid: spec.replicas: Invalid value: -1: must be '
                            "greater than or equal to 0")
    with pytest.raises(ValidationError):
        apply_scale(d, True)


@pytest.mark.parametrize("change, expected", [
    ({"spec": {"replicas": -2}}, "spec.replicas: Invalid value: -2: must be greater than or equal to 0"),
    ({"spec": {"replicas": 1, "min": 0}}, "spec.min: Unknown field"),
    ({"kind": "Scales"}, 'kind: Unsupported value: "Scales": supported values: "Scale"'),
])
def test_validate_scale(change, expected):
    scale = {**scale_of(replicaset()), **change}
    assert [str(e) for e in validate_scale(scale)] == [expected]


# --- never a crash ---------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)

FIELD_NAMES = sorted(set().union(*KNOWN_FIELDS.values()) | {"metadata", "spec", "template"})


def json_with(keys):
    names = st.sampled_from(keys) | st.text(max_size=6)
    return st.recursive(
        st.none() | st.booleans() | st.integers(-5, 700) | st.floats() | st.text(max_size=6)
        | st.sampled_from(["v1", "apps/v1", "1", "25%", "0%", "1Gi", "In", "Exists",
                           "NoExecute", "Recreate", "RollingUpdate", "True", "app",
                           "2024-01-02T03:04:05Z"]),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=6),
        max_leaves=40)


def _check_never_raises(value):
    for kind in MAKERS:
        for v in (value, {**value, "kind": kind} if isinstance(value, dict) else value):
            errors = VALIDATE[kind](v)
            assert all(isinstance(e, FieldError) for e in errors)
            str(ValidationError(errors, kind=kind))
            d = DEFAULT[kind](v)
            VALIDATE[kind](d, strict=False)
    validate_object(value)
    default_object(value)
    validate_scale(value)
    scale_of(value)
    validate_object_update(value, value)
    try:
        apply_scale(value, value)
    except ValidationError:
        pass


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_arbitrary_json_never_raises(value):
    _check_never_raises(value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_with(FIELD_NAMES))
def test_arbitrary_object_shaped_json_never_raises(value):
    _check_never_raises(value)


PATHS = {
    "Node": ["spec", "spec.taints", "spec.taints.0", "spec.taints.0.key", "status",
             "status.capacity", "status.capacity.cpu", "status.conditions",
             "status.conditions.0", "status.addresses", "metadata", "metadata.labels"],
    "Lease": ["spec", "spec.leaseDurationSeconds", "spec.acquireTime", "metadata.name"],
    "ReplicaSet": ["spec", "spec.selector", "spec.selector.matchLabels",
                   "spec.selector.matchExpressions", "spec.template", "spec.template.metadata",
                   "spec.template.spec", "status", "status.replicas",
                   "metadata.ownerReferences", "metadata.ownerReferences.0"],
    "Deployment": ["spec.strategy", "spec.strategy.rollingUpdate", "spec.minReadySeconds",
                   "spec.progressDeadlineSeconds", "spec.strategy.type", "spec.selector"],
    "Event": ["involvedObject", "involvedObject.namespace", "source", "series", "eventTime",
              "metadata.namespace", "reason"],
    "Namespace": ["spec", "spec.finalizers", "status", "metadata.finalizers"],
}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([(k, p) for k, ps in PATHS.items() for p in ps]), JSON)
def test_any_value_anywhere_in_a_real_object(kind_path, value):
    kind, path = kind_path
    obj = MAKERS[kind]()
    set_path(obj, path, value)
    for errors in (VALIDATE[kind](obj), VALIDATE[kind](DEFAULT[kind](obj), strict=False)):
        for e in errors:
            str(e)
    if kind in objects.SCALABLE_KINDS:
        scale_of(obj)
        validate_object_update(MAKERS[kind](), obj)


def test_a_negative_status_replicas_beside_absent_counters_is_an_error_not_a_crash():
    rs = replicaset()
    rs["status"] = {"replicas": -1}
    assert [str(e) for e in validate_replicaset(rs)] == [
        "status.replicas: Invalid value: -1: must be greater than or equal to 0",
        "status.fullyLabeledReplicas: Invalid value: 0: cannot be greater than status.replicas",
        "status.readyReplicas: Invalid value: 0: cannot be greater than status.replicas",
        "status.availableReplicas: Invalid value: 0: cannot be greater than status.replicas"]
