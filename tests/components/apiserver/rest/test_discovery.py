"""The discovery documents (components/apiserver/rest/discovery.py): pure checks against the
resource table, then the real kubectl reading them from a loopback server that serves nothing
else."""
from __future__ import annotations

import pytest

from components.apiserver.rest import discovery
from components.apiserver.rest.discovery import document
from kubemu.api.resources import RESOURCES

from .kubectl_docs import KUBECTL, DocsServer, kubeconfig, run_kubectl

KUBECTL_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                  "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
                  "application/json")
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


def _legacy_list(r) -> list[dict]:
    path = f"/apis/{r.api_version}" if r.group else f"/api/{r.api_version}"
    content_type, doc = document(path, "application/json")
    assert content_type == "application/json"
    assert doc["kind"] == "APIResourceList" and doc["groupVersion"] == r.api_version
    return doc["resources"]


def test_version_names_the_minor_kubectl_dispatches_on():
    content_type, doc = document("/version", "")
    assert content_type == "application/json"
    assert (doc["major"], doc["minor"]) == ("1", "32")
    assert doc["gitVersion"].startswith("v1.32.") and doc["platform"].count("/") == 1


@pytest.mark.parametrize("r", RESOURCES, ids=lambda r: r.plural)
def test_every_resource_is_in_its_legacy_resource_list(r):
    entries = {e["name"]: e for e in _legacy_list(r)}
    entry = entries[r.plural]
    assert entry["singularName"] == r.singular
    assert entry["namespaced"] is r.namespaced
    assert entry["kind"] == r.kind
    assert sorted(entry["verbs"]) == sorted(r.verbs)
    assert entry.get("shortNames", []) == list(r.short_names)
    assert entry.get("categories", []) == list(r.categories)
    for sub in r.subresources:
        assert sorted(entries[f"{r.plural}/{sub}"]["verbs"]) == \
            sorted(discovery.subresource_verbs(sub))


def test_subresources_say_what_they_answer():
    def legacy(plural, sub):
        r = next(r for r in RESOURCES if r.plural == plural)
        return next(e for e in _legacy_list(r) if e["name"] == f"{plural}/{sub}")
    assert legacy("pods", "log")["verbs"] == ["get"]
    assert legacy("pods", "binding")["verbs"] == ["create"]
    assert legacy("pods", "status")["verbs"] == ["get", "patch", "update"]
    assert legacy("deployments", "scale")["verbs"] == ["get", "patch", "update"]
    assert (legacy("deployments", "scale")["group"], legacy("deployments", "scale")["kind"]) \
        == ("autoscaling", "Scale")
    assert legacy("serviceaccounts", "token")["verbs"] == ["create"]
    assert legacy("serviceaccounts", "token")["kind"] == "TokenRequest"
    assert discovery.subresource_verbs("eviction") == ("create",)


def test_review_kinds_answer_create_only():
    reviews = [r for r in RESOURCES if not r.stored]
    assert {r.kind for r in reviews} >= {"SelfSubjectAccessReview", "SubjectAccessReview",
                                         "TokenReview"}
    for r in reviews:
        entry = next(e for e in _legacy_list(r) if e["name"] == r.plural)
        assert entry["verbs"] == ["create"]


def test_api_apis_and_groups():
    assert document("/api", "application/json")[1]["versions"] == ["v1"]
    _, groups = document("/apis", "application/json")
    assert groups["kind"] == "APIGroupList"
    names = {g["name"]: g for g in groups["groups"]}
    assert "" not in names
    assert set(names) == {r.group for r in discovery.SERVED if r.group}
    assert "metrics.k8s.io" in names  # what kubectl top looks for before it asks for metrics
    assert names["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    _, apps = document("/apis/apps", "")
    assert apps["kind"] == "APIGroup" and apps["versions"] == [{"groupVersion": "apps/v1",
                                                                "version": "v1"}]


@pytest.mark.parametrize("path", ["/healthz", "/apis/nope", "/apis/nope/v1", "/apis/apps/v2",
                                  "/api/v2", "/api/v1/pods", "/apis/apps/v1/deployments",
                                  "/openapi/v2", "/", "/apis//v1"])
def test_other_paths_are_not_discovery(path):
    assert document(path, KUBECTL_ACCEPT) is None


def test_aggregated_discovery_when_asked_with_the_exact_content_type():
    content_type, doc = document("/apis", KUBECTL_ACCEPT)
    assert content_type == V2
    assert (doc["kind"], doc["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    assert document("/apis", V2BETA1)[0] == V2BETA1
    assert document("/apis", V2BETA1)[1]["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    # Plain JSON first, or only: the legacy documents.
    assert document("/api", "application/json," + V2) == ("application/json",
                                                           document("/api", "")[1])
    assert document("/api", "application/json")[1]["kind"] == "APIVersions"
    # A trailing slash names the same document.
    assert document("/apis/", KUBECTL_ACCEPT)[0] == V2


def test_aggregated_core_at_api_and_groups_at_apis():
    _, core = document("/api", KUBECTL_ACCEPT)
    assert [g["metadata"]["name"] for g in core["items"]] == [""]
    _, rest = document("/apis", KUBECTL_ACCEPT)
    assert "" not in [g["metadata"]["name"] for g in rest["items"]]
    served = {}
    for group in core["items"] + rest["items"]:
        for version in group["versions"]:
            assert version["freshness"] == "Current"
            for entry in version["resources"]:
                served[(group["metadata"]["name"], version["version"], entry["resource"])] = entry
    assert len(served) == len(discovery.SERVED)
    for r in discovery.SERVED:
        entry = served[(r.group, r.version, r.plural)]
        assert entry["responseKind"] == {"group": r.group, "version": r.version, "kind": r.kind}
        assert entry["scope"] == ("Namespaced" if r.namespaced else "Cluster")
        assert entry["singularResource"] == r.singular
        assert sorted(entry["verbs"]) == sorted(r.verbs)
        assert entry.get("shortNames", []) == list(r.short_names)
        assert entry.get("categories", []) == list(r.categories)
        assert [s["subresource"] for s in entry.get("subresources", [])] == list(r.subresources)
    scale = next(s for s in served[("apps", "v1", "deployments")]["subresources"]
                 if s["subresource"] == "scale")
    assert scale == {"subresource": "scale", "verbs": ["get", "patch", "update"],
                     "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}}


def test_documents_are_built_once():
    assert document("/apis", KUBECTL_ACCEPT)[1] is document("/apis", KUBECTL_ACCEPT)[1]
    assert document("/api/v1", "")[1] is document("/api/v1", "")[1]


# --- the real kubectl -----------------------------------------------------------------------------

needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


@pytest.fixture(params=[True, False], ids=["aggregated", "legacy"])
def docs_server(request):
    server = DocsServer(aggregated=request.param).start()
    yield server
    server.stop()


@needs_kubectl
def test_kubectl_api_resources(docs_server, tmp_path):
    config = kubeconfig(tmp_path / "config", docs_server.port)
    result = run_kubectl(tmp_path, config, "api-resources", "--no-headers")
    assert result.returncode == 0, result.stderr
    rows = {(line.split()[0], r.api_version): line.split() for line in result.stdout.splitlines()
            for r in discovery.SERVED if r.api_version in line.split()}
    for r in discovery.SERVED:  # `pods` twice: the core group's and metrics.k8s.io's
        row = rows[(r.plural, r.api_version)]
        expected = [r.plural, *([",".join(r.short_names)] if r.short_names else []),
                    r.api_version, str(r.namespaced).lower(), r.kind]
        assert row == expected


@needs_kubectl
def test_kubectl_resolves_short_names_and_categories(docs_server, tmp_path):
    """`get all` lists the kinds in category "all"; `get po` / `deploy` resolve (the lists
    themselves are 404 here: only the documents are served)."""
    config = kubeconfig(tmp_path / "config", docs_server.port)
    run_kubectl(tmp_path, config, "get", "all")
    run_kubectl(tmp_path, config, "get", "po")
    run_kubectl(tmp_path, config, "get", "deploy")
    listed = [p.partition("?")[0] for method, p in docs_server.seen if method == "GET"]
    for r in RESOURCES:
        if "all" in r.categories:
            assert r.api_path("default") in listed
    assert listed.count("/api/v1/namespaces/default/pods") == 2
    assert listed.count("/apis/apps/v1/namespaces/default/deployments") == 2


def test_official_python_client_discovers_every_resource(tmp_path):
    """The official client's DynamicClient reads the legacy documents (it asks for plain JSON)
    and finds each kind, with its short names and subresources."""
    kubernetes = pytest.importorskip("kubernetes")
    from kubernetes.dynamic import DynamicClient
    server = DocsServer().start()
    try:
        config = kubernetes.client.Configuration()
        config.host = f"http://127.0.0.1:{server.port}"
        with kubernetes.client.ApiClient(config) as api:
            client = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
            for r in RESOURCES:
                found = client.resources.get(api_version=r.api_version, kind=r.kind)
                assert (found.name, found.namespaced) == (r.plural, r.namespaced)
                assert list(found.short_names or []) == list(r.short_names)
                assert sorted(found.subresources) == sorted(r.subresources)
            assert client.resources.get(short_names=["deploy"]).kind == "Deployment"
    finally:
        server.stop()
