"""RequestInfo against the examples of k8s.io/apiserver's requestinfo_test.go (TestGetAPIRequestInfo
and TestGetNonAPIRequestInfo), plus the watch and fieldSelector readings."""
from __future__ import annotations

import pytest

from components.apiserver.rest.requestinfo import RequestInfoError, request_info

# method, url, verb, prefix, group, version, namespace, resource, subresource, name
API_CASES = [
    ("GET", "/api/v1/namespaces", "list", "api", "", "v1", "", "namespaces", "", ""),
    ("GET", "/api/v1/namespaces/other", "get", "api", "", "v1", "other", "namespaces", "", "other"),
    ("GET", "/api/v1/namespaces/other/pods", "list", "api", "", "v1", "other", "pods", "", ""),
    ("GET", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo"),
    ("HEAD", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo"),
    ("GET", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", ""),
    ("HEAD", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", ""),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo", "proxy", "api", "", "v1", "other", "pods", "", "foo"),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource", "proxy", "api", "", "v1",
     "other", "pods", "", "foo"),
    ("GET", "/api/v1/watch/pods", "watch", "api", "", "v1", "", "pods", "", ""),
    ("GET", "/api/v1/pods?watch=true", "watch", "api", "", "v1", "", "pods", "", ""),
    ("GET", "/api/v1/pods?watch=false", "list", "api", "", "v1", "", "pods", "", ""),
    ("GET", "/api/v1/watch/namespaces/other/pods", "watch", "api", "", "v1", "other", "pods", "", ""),
    ("GET", "/api/v1/namespaces/other/pods?watch=1", "watch", "api", "", "v1", "other", "pods", "", ""),
    ("GET", "/api/v1/namespaces/other/pods?watch=0", "list", "api", "", "v1", "other", "pods", "", ""),
    ("GET", "/api/v1/namespaces/other/pods/foo/status", "get", "api", "", "v1", "other", "pods", "status", "foo"),
    ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", "get", "api", "", "v1", "other", "pods", "proxy",
     "foo"),
    ("PUT", "/api/v1/namespaces/other/finalize", "update", "api", "", "v1", "other", "namespaces", "finalize",
     "other"),
    ("PUT", "/api/v1/namespaces/other/status", "update", "api", "", "v1", "other", "namespaces", "status", "other"),
    ("PATCH", "/api/v1/namespaces/other/pods/foo", "patch", "api", "", "v1", "other", "pods", "", "foo"),
    ("DELETE", "/api/v1/namespaces/other/pods/foo", "delete", "api", "", "v1", "other", "pods", "", "foo"),
    ("POST", "/api/v1/namespaces/other/pods", "create", "api", "", "v1", "other", "pods", "", ""),
    ("DELETE", "/api/v1/nodes", "deletecollection", "api", "", "v1", "", "nodes", "", ""),
    ("DELETE", "/api/v1/namespaces", "deletecollection", "api", "", "v1", "", "namespaces", "", ""),
    ("DELETE", "/api/v1/namespaces/other/pods", "deletecollection", "api", "", "v1", "other", "pods", "", ""),
    ("DELETE", "/apis/extensions/v1/namespaces/other/pods", "deletecollection", "apis", "extensions", "v1",
     "other", "pods", "", ""),
    ("POST", "/apis/extensions/v1/namespaces/other/pods", "create", "apis", "extensions", "v1", "other", "pods",
     "", ""),
    ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", "create", "apis", "extensions", "v1beta3", "other",
     "pods", "", ""),
    # kubemu's own paths
    ("GET", "/apis/apps/v1/namespaces/default/deployments/web/scale", "get", "apis", "apps", "v1", "default",
     "deployments", "scale", "web"),
    ("POST", "/api/v1/namespaces/default/pods/web/eviction", "create", "api", "", "v1", "default", "pods",
     "eviction", "web"),
    ("GET", "/api/v1/namespaces/default/pods/web/log?follow=true", "get", "api", "", "v1", "default", "pods",
     "log", "web"),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "create", "apis", "authorization.k8s.io",
     "v1", "", "selfsubjectaccessreviews", "", ""),
]


@pytest.mark.parametrize("method,url,verb,prefix,group,version,namespace,resource,subresource,name", API_CASES)
def test_api_request_info(method, url, verb, prefix, group, version, namespace, resource, subresource, name):
    path, _, query = url.partition("?")
    info = request_info(method, path, query)
    assert info.is_resource_request
    assert (info.verb, info.api_prefix, info.api_group, info.api_version, info.namespace, info.resource,
            info.subresource, info.name) == (verb, prefix, group, version, namespace, resource, subresource, name)


@pytest.mark.parametrize("url", ["/api/v1/watch", "/apis/apps/v1/watch", "/api/v1/proxy"])
def test_special_verb_without_resource_is_an_error(url):
    with pytest.raises(RequestInfoError):
        request_info("GET", url)


@pytest.mark.parametrize("method,url,verb", [
    ("GET", "/api/v1", "get"),          # discovery: not a resource
    ("GET", "/apis/apps", "get"),
    ("GET", "/apis/apps/v1", "get"),
    ("GET", "/healthz", "get"),
    ("GET", "/version", "get"),
    ("GET", "/", "get"),
    ("POST", "/openapi/v3", "post"),
    ("GET", "/other/v1/namespaces/x/pods", "get"),
])
def test_non_resource_requests(method, url, verb):
    info = request_info(method, url)
    assert not info.is_resource_request and info.verb == verb and info.path == url


@pytest.mark.parametrize("query,verb", [("watch=True", "watch"), ("watch=t", "watch"), ("watch=yes", "watch"),
                                        ("watch=F", "list"), ("watch=FALSE", "list"), ("", "list")])
def test_watch_values_as_parse_bool_and_its_fallback(query, verb):
    assert request_info("GET", "/api/v1/pods", query).verb == verb


def test_field_selector_on_a_name_names_the_request():
    info = request_info("GET", "/api/v1/namespaces/d/pods", "fieldSelector=metadata.name%3Dweb&watch=1")
    assert (info.verb, info.name) == ("watch", "web")
    assert request_info("GET", "/api/v1/pods", {"fieldSelector": "metadata.name!=web"}).name == ""
    assert request_info("GET", "/api/v1/pods", {"fieldSelector": "metadata.name==a,spec.nodeName=n"}).name == "a"
    assert request_info("GET", "/api/v1/pods", {"fieldSelector": "metadata.name=a/b"}).name == ""


@pytest.mark.parametrize("selector, name", [
    ("metadata.name=a,junk", ""),               # does not parse: names nothing
    ("metadata.name = a", ""),                  # selects on the field "metadata.name ", untrimmed
    (r"metadata.name=a\,b", "a,b"),            # an escaped comma is part of the value
    ("spec.nodeName=n,metadata.name==a", "a"),
    ("metadata.name!=a,metadata.name=b", "b"),
])
def test_field_selector_names_as_fields_parse_it(selector, name):
    assert request_info("GET", "/api/v1/pods", {"fieldSelector": selector}).name == name
