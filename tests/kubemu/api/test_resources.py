"""The resource registry: kubectl-style name resolution, registry keys, field selectors."""
import pytest

from kubemu.api.resources import (RESOURCES, FieldSelectorError, UnknownResourceError,
                                  check_field_label, field_set, for_kind, for_object,
                                  parse_registry_key, registry_key, registry_prefix, resolve)


@pytest.mark.parametrize("name, kind", [
    ("po", "Pod"), ("pods", "Pod"), ("pod", "Pod"), ("Pod", "Pod"), ("PODS", "Pod"),
    ("ns", "Namespace"), ("namespaces", "Namespace"), ("Namespace", "Namespace"),
    ("no", "Node"), ("nodes", "Node"), ("node", "Node"),
    ("leases", "Lease"), ("lease", "Lease"), ("Lease", "Lease"),
    ("rs", "ReplicaSet"), ("replicasets", "ReplicaSet"), ("ReplicaSet", "ReplicaSet"),
    ("deploy", "Deployment"), ("deployments", "Deployment"), ("deployment", "Deployment"),
    ("ev", "Event"), ("events", "Event"), ("event", "Event"),
    ("deployments.apps", "Deployment"), ("deploy.v1.apps", "Deployment"),
    ("leases.coordination.k8s.io", "Lease"), ("pods.v1", "Pod"),
])
def test_resolve_accepts_every_name_kubectl_does(name, kind):
    assert resolve(name).kind == kind


@pytest.mark.parametrize("name", ["foo", "", "podz", "deployments.batch", "p", None, 3])
def test_unknown_names_get_kubectls_error(name):
    with pytest.raises(UnknownResourceError) as e:
        resolve(name)
    if isinstance(name, str) and name:
        assert str(e.value) == f'the server doesn\'t have a resource type "{name}"'


def test_resource_facts():
    pods, nodes, rs = resolve("po"), resolve("no"), resolve("rs")
    assert (pods.api_version, pods.plural, pods.singular, pods.short_names) == \
        ("v1", "pods", "pod", ("po",))
    assert pods.namespaced and not nodes.namespaced and not resolve("ns").namespaced
    assert set(pods.subresources) == {"binding", "status", "log", "eviction", "exec", "attach", "portforward"}
    assert set(rs.subresources) == {"status", "scale"}
    assert set(resolve("deploy").subresources) == {"status", "scale"}
    assert nodes.subresources == ("status",)
    assert (rs.group, rs.version, rs.list_kind) == ("apps", "v1", "ReplicaSetList")
    assert resolve("leases").api_version == "coordination.k8s.io/v1"
    assert {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"} <= \
        set(pods.field_selectors)
    assert {r.kind for r in RESOURCES if r.stored} == {
        "Namespace", "Pod", "Node", "Lease", "ReplicaSet", "Deployment", "Event", "ServiceAccount",
        "ConfigMap", "Secret", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
        "Service", "Endpoints", "EndpointSlice", "StatefulSet", "DaemonSet", "ControllerRevision",
        "Job", "CronJob", "PersistentVolume", "PersistentVolumeClaim", "StorageClass",
        "PodDisruptionBudget", "IPAddress", "CertificateSigningRequest"}
    assert [resolve(n).kind for n in ("sts", "ds", "cj", "pv", "pvc", "sc", "pdb", "jobs.batch")] == [
        "StatefulSet", "DaemonSet", "CronJob", "PersistentVolume", "PersistentVolumeClaim",
        "StorageClass", "PodDisruptionBudget", "Job"]
    assert not resolve("pv").namespaced and not resolve("sc").namespaced and resolve("pvc").namespaced
    review = resolve("selfsubjectaccessreviews")
    assert (review.group, review.verbs, review.stored) == ("authorization.k8s.io", ("create",), False)
    names = [n for r in RESOURCES for n in r.names]
    assert len(names) == len(set(names)), "every name means one resource"


def test_for_kind():
    assert for_kind("apps/v1", "Deployment").plural == "deployments"
    assert for_object({"apiVersion": "v1", "kind": "Pod"}).plural == "pods"
    with pytest.raises(UnknownResourceError):
        for_kind("extensions/v1beta1", "Deployment")
    with pytest.raises(UnknownResourceError):
        for_object([])


def test_registry_keys():
    assert registry_key("pods", "default", "web") == "/registry/pods/default/web"
    assert registry_key("po", "kube-system", "x") == "/registry/pods/kube-system/x"
    assert registry_key("Node", None, "n1") == "/registry/nodes/n1"
    assert registry_key("ns", "", "default") == "/registry/namespaces/default"
    assert registry_key(resolve("deploy"), "d", "w") == "/registry/deployments/d/w"
    assert resolve("rs").key("a", "b") == "/registry/replicasets/a/b"
    assert registry_prefix("pods") == "/registry/pods/"
    assert registry_prefix("pods", "default") == "/registry/pods/default/"
    assert resolve("no").prefix() == "/registry/nodes/"
    assert parse_registry_key("/registry/pods/default/web") == (resolve("po"), "default", "web")
    assert parse_registry_key("/registry/nodes/n1") == (resolve("no"), None, "n1")


@pytest.mark.parametrize("args", [("pods", None, "web"), ("pods", "default", ""),
                                  ("pods", "default", "a/b"), ("nodes", "default", "n1"),
                                  ("pods", "..", "x")])
def test_bad_registry_keys(args):
    with pytest.raises(ValueError):
        registry_key(*args)


@pytest.mark.parametrize("key", ["/registry/pods/web", "/registry/foo/a/b", "registry/pods/a/b",
                                 "/registry/nodes/a/b", "/registry/pods/a/"])
def test_bad_keys_do_not_parse(key):
    with pytest.raises(ValueError):
        parse_registry_key(key)


def test_api_paths():
    assert resolve("po").api_path("default", "web", "log") == "/api/v1/namespaces/default/pods/web/log"
    assert resolve("deploy").api_path() == "/apis/apps/v1/deployments"
    assert resolve("no").api_path("ignored", "n1") == "/api/v1/nodes/n1"


def test_field_selectors():
    pod = {"metadata": {"name": "web", "namespace": "d"}, "spec": {"nodeName": "n1"},
           "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.2"}]}}
    fs = field_set("pods", pod)
    assert fs["metadata.name"] == "web" and fs["spec.nodeName"] == "n1"
    assert fs["status.phase"] == "Running" and fs["status.podIP"] == "10.0.0.2"
    assert fs["spec.hostNetwork"] == "false" and fs["spec.restartPolicy"] == ""
    assert field_set("nodes", {"metadata": {"name": "n"}, "spec": {"unschedulable": True}}) == \
        {"metadata.name": "n", "spec.unschedulable": "true"}
    assert field_set("ev", {"source": {"component": "kubelet"}})["source"] == "kubelet"
    assert field_set("rs", "garbage")["status.replicas"] == "0"
    check_field_label("pods", "spec.nodeName")
    with pytest.raises(FieldSelectorError, match="^field label not supported: spec.nodeName$"):
        check_field_label("deployments", "spec.nodeName")
