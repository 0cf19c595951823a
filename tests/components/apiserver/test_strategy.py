"""components.apiserver.strategy: the per-kind rules as pure functions (a fixed clock, a seeded
random source, objects in and objects or outcomes out)."""
from __future__ import annotations

import copy
import datetime
import random
import re

import pytest

from components.apiserver import strategy as st
from kubemu import wire
from kubemu.api.resources import resolve

from . import deployment, pod

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
PODS, NAMESPACES, DEPLOYMENTS = resolve("pods"), resolve("namespaces"), resolve("deployments")


def create(r, obj, namespace=None, **kw):
    return st.prepare_create(r, obj, namespace, now=NOW, rand=random.Random(3), **kw)


def stored(obj: dict, rv: int = 10) -> dict:
    """`obj` as read back from the store at `rv`."""
    obj["metadata"]["resourceVersion"] = str(rv)
    return obj


def bound_pod(name="p", **spec) -> dict:
    p = stored(create(PODS, pod(name, **spec)))
    p["spec"]["nodeName"] = "n1"
    return p


# --- create -----------------------------------------------------------------------------------

def test_create_sets_the_servers_metadata_and_clears_the_clients():
    given = pod("web")
    given["metadata"].update(uid="mine", resourceVersion="7", generation=9, creationTimestamp="2000-01-01T00:00:00Z",
                             deletionTimestamp="2000-01-01T00:00:00Z")
    given["status"] = {"phase": "Running", "qosClass": "BestEffort", "podIP": "10.0.0.1"}
    obj = create(PODS, given)
    meta = obj["metadata"]
    assert meta["namespace"] == "default" and meta["generation"] == 1
    assert meta["creationTimestamp"] == "2026-01-02T03:04:05Z" and "deletionTimestamp" not in meta
    assert "resourceVersion" not in meta and meta["uid"] not in ("mine", "")
    assert meta["uid"] == create(PODS, given)["metadata"]["uid"]  # from the injected random source
    assert obj["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert given["metadata"]["uid"] == "mine"  # the request's object is not changed


def test_generate_name_draws_from_kubernetes_alphabet():
    meta = create(PODS, pod(generate_name="web-"))["metadata"]
    assert meta["name"].startswith("web-") and len(meta["name"]) == len("web-") + st.GENERATED_SUFFIX
    assert set(meta["name"][4:]) <= set(st.NAME_ALPHABET)


def test_namespace_gets_its_finalizer_and_phase_and_workloads_lose_their_status():
    ns = create(NAMESPACES, {"metadata": {"name": "team"}})
    assert ns["spec"]["finalizers"] == ["kubernetes"] and ns["status"] == {"phase": "Active"}
    assert create(NAMESPACES, {"metadata": {"name": "t"}, "spec": {"finalizers": []}})["spec"]["finalizers"] == []
    d = deployment("web")
    d["status"] = {"replicas": 3}
    assert "status" not in create(DEPLOYMENTS, d)


def test_a_job_gets_its_selector_from_its_uid_once_it_has_one():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "pi", "image": "perl"}]}}},
           "status": {"active": 1}}
    obj = create(resolve("jobs"), job)
    uid = obj["metadata"]["uid"]
    assert obj["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert obj["spec"]["template"]["metadata"]["labels"]["job-name"] == "pi"
    assert obj["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == uid
    assert "status" not in obj and "selector" not in job["spec"]
    job["spec"]["manualSelector"] = True
    with pytest.raises(wire.Invalid, match=r'Job "pi" is invalid: spec.selector: Required value'):
        create(resolve("jobs"), job)


@pytest.mark.parametrize("obj, namespace, message", [
    (dict(pod("a"), kind="Service"), None, "the kind of the object ('Service') does not match the resource pods"),
    (pod("a", namespace="x"), "y", "the namespace of the provided object does not match the namespace sent"),
    ({"metadata": {"name": "n"}}, "default", "namespaces are cluster-scoped: no namespace"),
    ("text", None, "object must be a map"),
])
def test_create_refuses_objects_that_do_not_fit_the_request(obj, namespace, message):
    r = NAMESPACES if obj == {"metadata": {"name": "n"}} else PODS
    with pytest.raises(wire.BadRequest, match=re.escape(message)):
        create(r, obj, namespace)


def test_namespace_lifecycle_admission():
    obj = create(PODS, pod("p", namespace="team"))
    with pytest.raises(wire.NotFound, match='namespaces "team" not found'):
        st.admit_create(PODS, obj, None)
    terminating = {"metadata": {"name": "team", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    with pytest.raises(wire.Forbidden, match='pods "p" is forbidden: unable to create new content in namespace '
                                           "team because it is being terminated"):
        st.admit_create(PODS, obj, terminating)
    event = {"metadata": {"name": "e", "namespace": "team"}}
    st.admit_create(resolve("events"), event, terminating)  # Events still land


# --- field validation -------------------------------------------------------------------------

def test_strict_field_validation_is_a_decoding_error_before_any_other_check():
    p = pod("")  # no name: Invalid, but decoding fails first
    p["spec"]["containers"][0]["nme"] = "x"
    with pytest.raises(wire.BadRequest) as e:
        create(PODS, p, field_validation="Strict")
    assert e.value.message == ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                               'unknown field "spec.containers[0].nme"')
    d = deployment("d")
    d["spec"]["template"]["spec"]["containers"][0]["foo"] = 1
    with pytest.raises(wire.BadRequest) as e:
        create(DEPLOYMENTS, d, field_validation="Strict")
    assert e.value.message == ('Deployment in version "v1" cannot be handled as a Deployment: strict decoding '
                               'error: unknown field "spec.template.spec.containers[0].foo"')


def test_warn_drops_unknown_fields_even_with_dots_in_their_names_and_warns_of_each():
    p = pod("w", labels={"a": "b"})
    p["spec"]["containers"][0]["x.y[0]"] = 1
    p["metadata"]["colour"] = "red"
    got: list[str] = []
    obj = create(PODS, p, field_validation="Warn", warn=got.append)
    assert got == ['unknown field "metadata.colour"', 'unknown field "spec.containers[0].x.y[0]"']
    assert "x.y[0]" not in obj["spec"]["containers"][0] and "colour" not in obj["metadata"]
    assert obj["metadata"]["labels"] == {"a": "b"}
    assert create(PODS, p, field_validation="Ignore", warn=got.append) == obj
    assert len(got) == 2  # Ignore warns of nothing


def test_unknown_fields_do_not_excuse_other_errors_under_warn():
    p = pod("w")
    p["spec"]["bogus"] = 1
    p["spec"]["restartPolicy"] = "Sometimes"
    with pytest.raises(wire.Invalid) as e:
        create(PODS, p, field_validation="Warn")
    assert e.value.details["causes"] == ["spec.restartPolicy"]


# --- update -----------------------------------------------------------------------------------

def test_update_keeps_status_and_server_fields_and_bumps_generation_on_spec_changes():
    d = stored(create(DEPLOYMENTS, deployment("d")))
    d["status"] = {"replicas": 1}
    new = dict(d, status={"replicas": 99}, spec=dict(d["spec"], replicas=4),
               metadata=dict(d["metadata"], generation=40, labels={"x": "y"}))
    out = st.prepare_update(DEPLOYMENTS, d, 10, new, status=False)
    assert isinstance(out, st.Write)
    assert out.obj["status"] == {"replicas": 1} and out.obj["spec"]["replicas"] == 4
    assert out.obj["metadata"]["generation"] == 2 and out.obj["metadata"]["labels"] == {"x": "y"}
    labels_only = dict(d, metadata=dict(d["metadata"], labels={"x": "z"}))
    assert st.prepare_update(DEPLOYMENTS, d, 10, labels_only, status=False).obj["metadata"]["generation"] == 1


def test_status_update_changes_only_status():
    d = stored(create(DEPLOYMENTS, deployment("d")))
    new = dict(d, status={"replicas": 2}, spec=dict(d["spec"], replicas=8))
    out = st.prepare_update(DEPLOYMENTS, d, 10, new, status=True)
    assert out.obj["status"] == {"replicas": 2} and out.obj["spec"] == d["spec"]
    assert out.obj["metadata"]["generation"] == 1



def test_a_pods_status_update_does_not_check_its_stored_spec_again_but_everything_else():
    """As kube's ValidatePodStatusUpdate: a spec stored before today's rules (here a container
    name they refuse) does not stop the kubelet reporting the pod's status; metadata is
    still checked, and a whole-object update still checks the spec."""
    old = bound_pod()
    old["spec"]["containers"][0]["name"] = "Not_A_Label"
    running = dict(old, status={"phase": "Running"})
    assert st.prepare_update(PODS, old, 10, running, status=True).obj["status"] == {"phase": "Running"}
    with pytest.raises(wire.Invalid, match="containers"):
        st.prepare_update(PODS, old, 10, running, status=False)
    bad_label = dict(running, metadata=dict(old["metadata"], labels={"a": "-x-"}))
    with pytest.raises(wire.Invalid, match="metadata.labels"):
        st.prepare_update(PODS, old, 10, bad_label, status=True)


@pytest.mark.parametrize("r, obj", [(DEPLOYMENTS, deployment("d")), (resolve("replicasets"), deployment("d"))])
def test_a_workloads_status_update_does_not_check_its_stored_spec_again_but_its_status(r, obj):
    """As kube's ValidateDeploymentStatusUpdate and ValidateReplicaSetStatusUpdate."""
    old = stored(create(r, {**obj, "kind": r.kind}))
    old["spec"]["minReadySeconds"] = -1  # refused by today's rules
    counted = dict(old, status={"replicas": 2, "readyReplicas": 1})
    assert st.prepare_update(r, old, 10, counted, status=True).obj["status"] == counted["status"]
    with pytest.raises(wire.Invalid, match="minReadySeconds"):
        st.prepare_update(r, old, 10, dict(old, metadata=dict(old["metadata"], labels={"x": "y"})), status=False)
    with pytest.raises(wire.Invalid, match="readyReplicas"):
        st.prepare_update(r, old, 10, dict(old, status={"replicas": 1, "readyReplicas": 2}), status=True)

def test_an_update_that_changes_nothing_writes_nothing():
    d = stored(create(DEPLOYMENTS, deployment("d")))
    assert st.prepare_update(DEPLOYMENTS, d, 10, dict(d), status=False) == st.Unchanged(d)


def test_removing_the_last_finalizer_of_a_deleting_object_removes_it_but_not_a_pod_in_its_grace():
    d = stored(create(DEPLOYMENTS, deployment("d")))
    d["metadata"].update(deletionTimestamp="2026-01-02T03:04:05Z", deletionGracePeriodSeconds=0,
                         finalizers=["x/y"])
    released = dict(d, metadata=dict(d["metadata"], finalizers=[]))
    assert isinstance(st.prepare_update(DEPLOYMENTS, d, 10, released, status=False), st.Remove)
    p = bound_pod()
    p["metadata"].update(deletionTimestamp="2026-01-02T03:04:35Z", deletionGracePeriodSeconds=30,
                         finalizers=["x/y"])
    assert isinstance(st.prepare_update(PODS, p, 10, dict(p, metadata=dict(p["metadata"], finalizers=[])),
                                        status=False), st.Write)


def test_a_named_resource_version_is_a_precondition():
    st.check_resource_version(PODS, "p", "", 5)
    st.check_resource_version(PODS, "p", "5", 5)
    with pytest.raises(wire.Conflict, match='Operation cannot be fulfilled on pods "p": the object has been '
                                            "modified"):
        st.check_resource_version(PODS, "p", "4", 5)
    with pytest.raises(wire.BadRequest, match="invalid resourceVersion"):
        st.check_resource_version(PODS, "p", "x", 5)


def test_patch_naming_a_stale_version_conflicts():
    d = stored(create(DEPLOYMENTS, deployment("d")), rv=12)
    new, explicit = st.patched(DEPLOYMENTS, d, 12, {"spec": {"replicas": 3}}, "merge")
    assert new["spec"]["replicas"] == 3 and not explicit
    with pytest.raises(wire.Conflict):
        st.patched(DEPLOYMENTS, d, 12, {"metadata": {"resourceVersion": "11"}}, "merge")
    with pytest.raises(wire.BadRequest):
        st.patched(DEPLOYMENTS, d, 12, [{"op": "test", "path": "/spec/replicas", "value": 9}], "json")



def test_a_patched_object_shares_parts_with_the_old_one_and_the_patch_but_what_is_written_shares_nothing():
    """patched copies only the maps its merge patch reaches into; prepare_update's defaulting
    copies the whole object before filling anything: neither the old state (an old pod whose
    spec lacks defaults, as one stored before them) nor the patch is ever changed."""
    old = stored(create(PODS, pod("p")))
    del old["spec"]["dnsPolicy"], old["spec"]["containers"][0]["terminationMessagePath"]
    ctr = {"name": "c", "image": "busybox", "command": ["sleep", "1000"]}  # no defaults either
    patch = {"metadata": {"labels": {"tier": "db"}}, "spec": {"containers": [ctr]},
             "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    before = copy.deepcopy((old, patch))
    new, _ = st.patched(PODS, old, 10, patch, "merge")
    assert new["metadata"] is not old["metadata"] and new["metadata"]["uid"] == old["metadata"]["uid"]
    assert new["spec"]["containers"][0] is ctr and new["status"]["conditions"] is patch["status"]["conditions"]
    for status in (False, True):  # the spec of the patch, then the old one
        written = st.prepare_update(PODS, old, 10, new, status=status).obj
        assert written["spec"]["dnsPolicy"] == "ClusterFirst"
        assert written["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
        assert (old, patch) == before
    written["status"]["conditions"][0]["status"] = "False"
    written["metadata"]["labels"]["tier"] = "x"
    assert (old, patch) == before

# --- delete -----------------------------------------------------------------------------------

def test_a_running_pod_gets_its_grace_period():
    p = bound_pod(terminationGracePeriodSeconds=20)
    out = st.prepare_delete(PODS, p, None, "Background", now=NOW)
    assert isinstance(out, st.Write)
    assert out.obj["metadata"]["deletionGracePeriodSeconds"] == 20
    assert out.obj["metadata"]["deletionTimestamp"] == "2026-01-02T03:04:25Z"
    assert "deletionTimestamp" not in p["metadata"]  # the object read is not changed
    shorter = st.prepare_delete(PODS, out.obj, 5, "Background", now=NOW)
    assert shorter.obj["metadata"]["deletionTimestamp"] == "2026-01-02T03:04:10Z"
    assert st.prepare_delete(PODS, out.obj, None, "Background", now=NOW) == st.Unchanged(out.obj)
    assert st.prepare_delete(PODS, out.obj, 0, "Background", now=NOW) == st.Remove(out.obj)


@pytest.mark.parametrize("phase, node, removed", [
    ("Pending", None, True), ("Succeeded", "n1", True), ("Failed", "n1", True), ("Running", "n1", False)])
def test_pods_that_never_ran_or_have_finished_go_at_once(phase, node, removed):
    p = stored(create(PODS, pod("p")))
    p["status"]["phase"] = phase
    if node:
        p["spec"]["nodeName"] = node
    assert isinstance(st.prepare_delete(PODS, p, None, "Background", now=NOW), st.Remove) == removed


def test_propagation_finalizers_and_a_terminating_namespace():
    d = stored(create(DEPLOYMENTS, deployment("d")))
    assert isinstance(st.prepare_delete(DEPLOYMENTS, d, None, "Background", now=NOW), st.Remove)
    for policy, finalizer in (("Orphan", "orphan"), ("Foreground", "foregroundDeletion")):
        out = st.prepare_delete(DEPLOYMENTS, d, None, policy, now=NOW)
        assert out.obj["metadata"]["finalizers"] == [finalizer] and out.obj["metadata"]["deletionTimestamp"]
    ns = stored(create(NAMESPACES, {"metadata": {"name": "team"}}))
    out = st.prepare_delete(NAMESPACES, ns, None, "Background", now=NOW)
    assert out.obj["status"]["phase"] == "Terminating" and out.obj["metadata"]["deletionTimestamp"]


def test_only_the_finalize_subresource_changes_a_namespaces_spec_finalizers():
    ns = stored(create(NAMESPACES, {"metadata": {"name": "team"}}))
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    relabelled = {**ns, "metadata": {**ns["metadata"], "labels": {"a": "b"}}, "spec": {"finalizers": []}}
    out = st.prepare_update(NAMESPACES, ns, 10, relabelled, status=False)
    assert out.obj["spec"]["finalizers"] == ["kubernetes"] and out.obj["metadata"]["labels"] == {"a": "b"}
    unchanged = st.prepare_update(NAMESPACES, ns, 10, {**ns, "spec": {}}, status=False)
    assert isinstance(unchanged, st.Unchanged), "a plain update leaves them as they are"
    out = st.prepare_update(NAMESPACES, ns, 10, {**ns, "spec": {"finalizers": []}}, status=False, finalize=True)
    assert isinstance(out, st.Write) and out.obj["spec"]["finalizers"] == []
    deleting = stored(st.prepare_delete(NAMESPACES, ns, None, "Background", now=NOW).obj, 11)
    finished = st.prepare_update(NAMESPACES, deleting, 11, {**deleting, "spec": {"finalizers": []}}, status=False,
                                 finalize=True)
    assert isinstance(finished, st.Remove), "the last finalizer of a terminating namespace ends it"


def test_delete_options_and_preconditions():
    assert st.delete_options(None, None) == "Background"
    with pytest.raises(wire.BadRequest, match='unsupported propagation policy "Later"'):
        st.delete_options(None, "Later")
    with pytest.raises(wire.BadRequest, match="invalid grace_period_seconds"):
        st.delete_options(-1, None)
    p = stored(create(PODS, pod("p")))
    st.check_preconditions(PODS, "p", p, {"uid": p["metadata"]["uid"], "resourceVersion": "10"})
    with pytest.raises(wire.Conflict, match="Precondition failed: UID in precondition: other, UID in object meta: "):
        st.check_preconditions(PODS, "p", p, {"uid": "other"})
    with pytest.raises(wire.Conflict, match="Precondition failed: ResourceVersion in precondition: 9, "
                                            "ResourceVersion in object meta: 10"):
        st.check_preconditions(PODS, "p", p, {"resourceVersion": "9"})


def test_eviction_options():
    assert st.eviction_delete_options("p", {"metadata": {"name": "p"}, "deleteOptions": {
        "gracePeriodSeconds": 3, "propagationPolicy": "Foreground", "dryRun": ["All"]}}) == {
        "grace_period_seconds": 3, "propagation_policy": "Foreground", "preconditions": None, "dry_run": True}
    assert st.eviction_delete_options("p", {}, dry_run_asked=True)["dry_run"]
    with pytest.raises(wire.BadRequest, match="deleteOptions must be a map"):
        st.eviction_delete_options("p", {"deleteOptions": []})


# --- subresources and lists -------------------------------------------------------------------

def test_bind_assigns_once_and_records_the_scheduled_condition():
    p = stored(create(PODS, pod("p")))
    bound = st.prepare_bind(PODS, p, "n1", now=NOW)
    assert bound["spec"]["nodeName"] == "n1" and "nodeName" not in p["spec"]
    assert bound["status"]["conditions"] == [{"type": "PodScheduled", "status": "True",
                                              "lastTransitionTime": "2026-01-02T03:04:05Z", "lastProbeTime": None}]
    with pytest.raises(wire.Conflict) as e:
        st.prepare_bind(PODS, bound, "n2", now=NOW)
    assert e.value.message == "pod p is already assigned to node n1"
    deleting = dict(p, metadata=dict(p["metadata"], deletionTimestamp="2026-01-02T03:04:05Z"))
    with pytest.raises(wire.Conflict, match="pod p is being deleted, cannot be assigned to a host"):
        st.prepare_bind(PODS, deleting, "n2", now=NOW)
    with pytest.raises(wire.Invalid, match="target.name: Required value"):
        st.check_binding(PODS, "p", "")


@pytest.mark.parametrize("rv, match, limit, continuing, read", [
    ("", "", 0, False, (0, 0)), ("0", "", 0, False, (0, 0)), ("7", "", 0, False, (0, 7)),
    ("7", "", 5, False, (7, 0)), ("7", "Exact", 0, False, (7, 0)), ("7", "NotOlderThan", 5, False, (0, 7)),
    ("0", "", 5, True, (0, 0)),
])
def test_list_revision(rv, match, limit, continuing, read):
    assert st.list_revision(rv, match, limit, continuing) == read


@pytest.mark.parametrize("rv, match, continuing, error, text", [
    ("7", "", True, wire.BadRequest, "specifying resource version is not allowed when using continue"),
    ("", "Exact", False, wire.Invalid, "resourceVersionMatch is forbidden unless resourceVersion is provided"),
    ("0", "Exact", False, wire.Invalid, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
    ("7", "Exact", True, wire.Invalid, "resourceVersionMatch is forbidden when continue is provided"),
    ("7", "Newest", False, wire.Invalid, 'Unsupported value: "Newest"'),
    ("x", "", False, wire.BadRequest, "invalid resourceVersion"),
])
def test_list_revision_refusals(rv, match, continuing, error, text):
    with pytest.raises(error, match=text):
        st.list_revision(rv, match, 0, continuing)
