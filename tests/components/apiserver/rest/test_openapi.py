"""The OpenAPI documents (components/apiserver/rest/openapi.py): pure checks against the
resource and field tables, then the real kubectl explaining and applying from them."""
from __future__ import annotations

import json

import pytest

from components.apiserver.rest import metrics, openapi
from components.apiserver.rest.discovery import SERVED
from components.apiserver.rest.openapi import definition_name, document
from kubemu.api import meta, objects, patch, pod  # noqa: F401  (objects registers its tables)
from kubemu.api.resources import RESOURCES

from .kubectl_docs import KUBECTL, DocsServer, kubeconfig, run_kubectl

ROOTS = [(r.api_version, r.kind) for r in RESOURCES] + [("autoscaling/v1", "Scale")]


def _gvk(api_version, kind):
    group, _, version = api_version.rpartition("/")
    return {"group": group, "version": version, "kind": kind}


def _v3_docs() -> dict[str, dict]:
    return {gv: document(entry["serverRelativeURL"])
            for gv, entry in document("/openapi/v3")["paths"].items()}


def _schemas(doc: dict) -> dict:
    return doc["definitions"] if "definitions" in doc else doc["components"]["schemas"]


def _refs(value):
    if isinstance(value, dict):
        if "$ref" in value:
            yield value["$ref"]
        for v in value.values():
            yield from _refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)


def _prop(type_name: str, field: str, doc: dict | None = None) -> dict:
    doc = doc or document("/openapi/v2")
    return _schemas(doc)[definition_name(type_name)]["properties"][field]


@pytest.mark.parametrize("api_version,kind", ROOTS, ids=[k for _, k in ROOTS])
def test_every_kind_has_a_schema_with_its_gvk(api_version, kind):
    schema = _schemas(document("/openapi/v2"))[definition_name(kind)]
    assert _gvk(api_version, kind) in schema["x-kubernetes-group-version-kind"]
    assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])


def test_every_reference_resolves_in_its_document():
    for doc in [document("/openapi/v2"), *_v3_docs().values()]:
        prefix = "#/definitions/" if "definitions" in doc else "#/components/schemas/"
        names = set(_schemas(doc))
        for ref in _refs(doc):
            assert ref.startswith(prefix) and ref[len(prefix):] in names, ref


def test_v3_index_paths_resolve_and_hash_their_document():
    index = document("/openapi/v3")["paths"]
    served = {f"apis/{r.api_version}" if r.group else f"api/{r.api_version}" for r in SERVED}
    assert set(index) == served
    for gv, entry in index.items():
        url = entry["serverRelativeURL"]
        path, _, query = url.partition("?")
        assert path == f"/openapi/v3/{gv}" and query.startswith("hash=") and len(query) > 10
        assert document(url) is document(path)
        assert document(path)["openapi"].startswith("3.")


def test_v3_group_documents_hold_their_kinds_and_operations():
    docs = _v3_docs()
    for r in RESOURCES:
        doc = docs[f"apis/{r.api_version}" if r.group else f"api/{r.api_version}"]
        kinds = [g for s in doc["components"]["schemas"].values()
                 for g in s.get("x-kubernetes-group-version-kind", [])]
        assert _gvk(r.api_version, r.kind) in kinds
        ops = [op for item in doc["paths"].values() for op in item.values()
               if isinstance(op, dict) and op.get("x-kubernetes-group-version-kind")
               == _gvk(r.api_version, r.kind)]
        assert ops, r.kind
        patches = [op for item in doc["paths"].values() for m, op in item.items()
                   if m == "patch" and op["x-kubernetes-group-version-kind"]
                   == _gvk(r.api_version, r.kind)]
        if not r.stored:
            assert [op["x-kubernetes-action"] for op in ops] == ["post"]
            continue
        # kubectl's field validation check: the first PATCH of the kind names the parameter.
        assert patches
        for op in patches:
            assert "fieldValidation" in [p["name"] for p in op["parameters"]]
            assert "application/strategic-merge-patch+json" in op["requestBody"]["content"]


def test_metrics_are_read_only_list_and_get():
    """metrics.k8s.io publishes list (namespaced and across namespaces for pods) and get, nothing
    that writes."""
    doc = document("/openapi/v3/apis/metrics.k8s.io/v1beta1")
    actions = {(path, op["x-kubernetes-action"]) for path, item in doc["paths"].items()
               for method, op in item.items() if method != "parameters"}
    base = "/apis/metrics.k8s.io/v1beta1"
    assert actions == {(f"{base}/nodes", "list"), (f"{base}/nodes/{{name}}", "get"),
                       (f"{base}/pods", "list"), (f"{base}/namespaces/{{namespace}}/pods", "list"),
                       (f"{base}/namespaces/{{namespace}}/pods/{{name}}", "get")}
    kinds = {g["kind"] for s in doc["components"]["schemas"].values()
             for g in s.get("x-kubernetes-group-version-kind", [])}
    assert {r.kind for r in metrics.RESOURCES} | {r.list_kind for r in metrics.RESOURCES} <= kinds


def test_scale_subresource_speaks_autoscaling_scale():
    doc = document("/openapi/v3/apis/apps/v1")
    item = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert set(item) >= {"get", "put", "patch"}
    assert item["patch"]["x-kubernetes-group-version-kind"] == _gvk("autoscaling/v1", "Scale")
    assert definition_name("Scale") in doc["components"]["schemas"]


@pytest.mark.parametrize("type_name,field,key", [
    ("PodSpec", "containers", "name"), ("PodSpec", "initContainers", "name"),
    ("PodSpec", "volumes", "name"), ("Container", "ports", "containerPort"),
    ("Container", "env", "name"), ("Container", "volumeMounts", "mountPath"),
    ("PodStatus", "conditions", "type"), ("DeploymentStatus", "conditions", "type"),
    ("ReplicaSetStatus", "conditions", "type"), ("NodeStatus", "conditions", "type"),
    ("NodeStatus", "addresses", "type"), ("ObjectMeta", "ownerReferences", "uid"),
])
def test_strategic_merge_keys_come_from_the_patch_tables(type_name, field, key):
    for doc in (document("/openapi/v2"), *_v3_docs().values()):
        if definition_name(type_name) in _schemas(doc):
            prop = _prop(type_name, field, doc)
            assert prop["x-kubernetes-patch-strategy"] == "merge"
            assert prop["x-kubernetes-patch-merge-key"] == key


def test_lists_merged_as_sets_and_replaced_lists():
    finalizers = _prop("ObjectMeta", "finalizers")
    assert finalizers["x-kubernetes-patch-strategy"] == "merge"
    assert "x-kubernetes-patch-merge-key" not in finalizers
    for type_name, field in (("PodSpec", "tolerations"), ("Container", "args")):
        assert "x-kubernetes-patch-strategy" not in _prop(type_name, field)


def test_schemas_walk_the_field_types():
    assert _prop("Pod", "spec") == {"$ref": "#/definitions/" + definition_name("PodSpec"),
                                    "description": "The desired state of the object."}
    assert _prop("PodSpec", "containers")["items"] == \
        {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}
    assert _prop("ObjectMeta", "labels") == {"type": "object",
                                             "additionalProperties": {"type": "string"}}
    assert _prop("Container", "imagePullPolicy")["enum"] == ["Always", "IfNotPresent", "Never"]
    assert _prop("RollingUpdateDeployment", "maxSurge") == \
        {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"}
    defs = _schemas(document("/openapi/v2"))
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert defs[definition_name("ObjectMeta")].get("x-kubernetes-group-version-kind") is None
    assert definition_name("ObjectMeta") == "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert definition_name("PodTemplateSpec") == "io.k8s.api.core.v1.PodTemplateSpec"
    assert definition_name("Deployment") == "io.k8s.api.apps.v1.Deployment"


def test_a_kind_used_inside_another_groups_kind_keeps_its_own_package():
    # a StatefulSet's volumeClaimTemplates are core/v1 PersistentVolumeClaims, parts and all
    assert definition_name("PersistentVolumeClaim") == "io.k8s.api.core.v1.PersistentVolumeClaim"
    assert definition_name("PersistentVolumeClaimSpec") == "io.k8s.api.core.v1.PersistentVolumeClaimSpec"
    assert definition_name("StatefulSetSpec") == "io.k8s.api.apps.v1.StatefulSetSpec"
    assert definition_name("RawExtension") == "io.k8s.apimachinery.pkg.runtime.RawExtension"
    assert definition_name("ObjectReference") == "io.k8s.api.core.v1.ObjectReference"


def test_a_type_no_table_describes_is_an_open_object():
    affinity = _schemas(document("/openapi/v2"))[definition_name("Affinity")]
    assert affinity["type"] == "object" and affinity["x-kubernetes-preserve-unknown-fields"] is True
    assert "properties" not in affinity


def test_every_field_table_has_a_type_for_each_known_field():
    """The TYPES column is complete: the schemas describe every field validation knows."""
    for tables, known_fields in ((meta.TYPES, meta.KNOWN_FIELDS), (pod.TYPES, pod.KNOWN_FIELDS)):
        for type_name, known in known_fields.items():
            types = meta.TYPES.get(type_name) or pod.TYPES.get(type_name)
            assert types is not None, f"{type_name} has no types"
            assert set(types) == set(known), type_name


def test_other_paths_are_not_openapi():
    for path in ("/openapi", "/openapi/v3/apis/nope/v1", "/openapi/v3/apis/apps", "/openapi/v1",
                 "/openapi/v3/api/v2", "/version"):
        assert document(path) is None, path
    assert document("/openapi/v2?timeout=32s") is document("/openapi/v2")


def test_documents_are_json():
    for doc in (document("/openapi/v2"), document("/openapi/v3"), *_v3_docs().values()):
        assert json.loads(json.dumps(doc)) == doc


# --- the real kubectl -----------------------------------------------------------------------------

needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


@pytest.fixture
def served(tmp_path):
    servers = []

    def start(objects=None):
        server = DocsServer(objects).start()
        servers.append(server)
        return server, kubeconfig(tmp_path / "config", server.port)
    yield start
    for server in servers:
        server.stop()


def _fields(explain_output: str) -> dict[str, str]:
    """field -> <type> of the FIELDS section of `kubectl explain`."""
    out = {}
    for line in explain_output.partition("FIELDS:")[2].splitlines():
        if line.startswith("  ") and not line.startswith("    ") and "\t" in line:
            name, _, kind = line.strip().partition("\t")
            out[name] = kind
    return out


@needs_kubectl
def test_kubectl_explain_pod_containers(served, tmp_path):
    _, config = served()
    result = run_kubectl(tmp_path, config, "explain", "pods.spec.containers")
    assert result.returncode == 0, result.stderr
    assert "KIND:       Pod" in result.stdout and "VERSION:    v1" in result.stdout
    assert "FIELD: containers <[]Container>" in result.stdout
    fields = _fields(result.stdout)
    assert set(fields) == set(pod.KNOWN_FIELDS["Container"])
    assert fields["ports"] == "<[]ContainerPort>"
    assert fields["command"] == "<[]string>"
    assert fields["resources"] == "<ResourceRequirements>"
    assert "enum: Always, IfNotPresent, Never" in result.stdout


@needs_kubectl
def test_kubectl_explain_deployment_strategy(served, tmp_path):
    _, config = served()
    result = run_kubectl(tmp_path, config, "explain", "deployment.spec.strategy")
    assert result.returncode == 0, result.stderr
    assert "GROUP:      apps" in result.stdout and "KIND:       Deployment" in result.stdout
    assert _fields(result.stdout) == {"rollingUpdate": "<RollingUpdateDeployment>",
                                      "type": "<string>"}
    assert "enum: Recreate, RollingUpdate" in result.stdout
    deeper = run_kubectl(tmp_path, config, "explain", "deploy.spec.strategy.rollingUpdate")
    assert set(_fields(deeper.stdout)) == {"maxSurge", "maxUnavailable"}


def _pod(image_a: str, env_x: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [
                {"name": "a", "image": image_a, "command": ["sleep", "1"]},
                {"name": "b", "command": ["sleep", "2"],
                 "env": [{"name": "X", "value": env_x}, {"name": "Y", "value": "y"}]}]}}


@needs_kubectl
def test_kubectl_apply_merges_lists_on_the_published_keys(served, tmp_path):
    """kubectl 1.32 computes apply's strategic merge patch from the OpenAPI v3 schema: only
    the changed container and env var are sent, keyed by name, and it asks the server to
    validate fields (fieldValidation=Strict) because the PATCH operation lists the parameter."""
    before = _pod("one", "x")
    live = json.loads(json.dumps(before))
    live["metadata"].update(uid="u1", resourceVersion="5", annotations={
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(before)})
    server, config = served({"/api/v1/namespaces/default/pods/web": live})
    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps(_pod("two", "xx")))
    result = run_kubectl(tmp_path, config, "apply", "-f", str(manifest))
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr
    [(content_type, query, body)] = server.patches
    assert content_type == "application/strategic-merge-patch+json"
    assert query["fieldValidation"] == "Strict"
    assert body["spec"] == {
        "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
        "containers": [{"name": "a", "image": "two"},
                       {"name": "b", "$setElementOrder/env": [{"name": "X"}, {"name": "Y"}],
                        "env": [{"name": "X", "value": "xx"}]}]}


def test_merge_keys_follow_the_patch_tables(monkeypatch):
    """The schema's keys are patch.py's: a table without the containers key publishes none
    (and kubectl would then replace the whole list, as the apply test above would show)."""
    assert _prop("PodSpec", "containers")["x-kubernetes-patch-merge-key"] == "name"
    monkeypatch.setattr(patch, "SCHEMAS", {})
    for cached in (openapi._model, openapi._v2):
        cached.cache_clear()
    try:
        assert "x-kubernetes-patch-merge-key" not in _prop("PodSpec", "containers")
    finally:
        monkeypatch.undo()
        for cached in (openapi._model, openapi._v2):
            cached.cache_clear()
