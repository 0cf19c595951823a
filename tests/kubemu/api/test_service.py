"""kubemu.api.service: Service, Endpoints and EndpointSlice as kube-apiserver defaults and
validates them (messages and field paths in Kubernetes' words)."""
from __future__ import annotations

import copy

import pytest

from kubemu.api.objects import default_object, validate_object, validate_object_update


def service(**spec) -> dict:
    base = {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": base}


def errors(obj) -> list[str]:
    return [str(e) for e in validate_object(default_object(obj))]


def test_defaults_as_the_apiserver_fills_them():
    d = default_object(service(ports=[{"port": 80}, {"name": "b", "port": 53, "protocol": "UDP",
                                                      "targetPort": "dns"}]))
    assert d["metadata"]["namespace"] == "default"
    assert d["spec"] == {
        "selector": {"app": "web"}, "type": "ClusterIP", "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster", "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"],
        "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                  {"name": "b", "port": 53, "protocol": "UDP", "targetPort": "dns"}]}
    with_external_ips = default_object(service(externalIPs=["192.0.2.10"]))  # externally accessible
    assert with_external_ips["spec"]["externalTrafficPolicy"] == "Cluster"
    node_port = default_object(service(type="NodePort", sessionAffinity="ClientIP", clusterIP="10.96.0.9"))
    assert node_port["spec"]["externalTrafficPolicy"] == "Cluster"
    assert node_port["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    assert node_port["spec"]["clusterIPs"] == ["10.96.0.9"]
    lb = default_object(service(type="LoadBalancer", clusterIPs=["10.96.0.9"]))
    assert lb["spec"]["allocateLoadBalancerNodePorts"] is True and lb["spec"]["clusterIP"] == "10.96.0.9"
    external = default_object(service(type="ExternalName", externalName="example.com", ports=[]))
    assert "ipFamilies" not in external["spec"] and "internalTrafficPolicy" not in external["spec"]
    assert errors(service(type="ExternalName", externalName="example.com.", selector=None, ports=None)) == []
    headless = default_object(service(clusterIP="None"))
    assert headless["spec"]["clusterIPs"] == ["None"] and errors(headless) == []


@pytest.mark.parametrize("spec, want", [
    (dict(type="Balanced"), ['spec.type: Unsupported value: "Balanced": supported values: '
                             '"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"']),
    (dict(ports=[]), ["spec.ports: Required value"]),
    (dict(ports=[{"port": 80}, {"port": 81}]),
     ["spec.ports[0].name: Required value", "spec.ports[1].name: Required value"]),
    (dict(ports=[{"name": "a", "port": 80}, {"name": "a", "port": 81}]),
     ['spec.ports[1].name: Duplicate value: "a"']),
    (dict(ports=[{"name": "A_b", "port": 80}]),
     ['spec.ports[0].name: Invalid value: "A_b": a lowercase RFC 1123 label must consist of lower case '
      "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
      "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    (dict(ports=[{"port": 0}]), ["spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                                 # the targetPort defaults to the port, and is checked too
                                 "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, "
                                 "inclusive"]),
    (dict(ports=[{"port": 70000, "targetPort": 80}]),
     ["spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"]),
    (dict(ports=[{"port": 80, "protocol": "ICMP"}]),
     ['spec.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"']),
    (dict(ports=[{"port": 80, "targetPort": 0x10000}]),
     ["spec.ports[0].targetPort: Invalid value: 65536: must be between 1 and 65535, inclusive"]),
    (dict(ports=[{"port": 80, "targetPort": "no--way"}]),
     ['spec.ports[0].targetPort: Invalid value: "no--way": must not contain consecutive hyphens']),
    (dict(ports=[{"port": 80, "targetPort": 1.5}]),
     ["spec.ports[0].targetPort: Invalid value: 1.5: must be an integer or a string"]),
    (dict(ports=[{"name": "a", "port": 80}, {"name": "b", "port": 80}]),
     ['spec.ports[1]: Duplicate value: {"port":80,"protocol":"TCP"}']),
    (dict(ports=[{"name": "a", "port": 53}, {"name": "b", "port": 53, "protocol": "UDP"}]), []),
    (dict(ports=[{"port": 80, "nodePort": 30080}]),
     ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]),
    (dict(type="NodePort", ports=[{"name": "a", "port": 80, "nodePort": 30080},
                                  {"name": "b", "port": 81, "nodePort": 30080}]),
     ["spec.ports[1].nodePort: Duplicate value: 30080"]),
    (dict(type="NodePort", ports=[{"name": "a", "port": 53, "nodePort": 30053},
                                  {"name": "b", "port": 53, "protocol": "UDP", "nodePort": 30053}]), []),
    (dict(type="NodePort", clusterIP="None"),
     ['spec.clusterIPs[0]: Invalid value: "None": may not be set to \'None\' for NodePort services']),
    (dict(clusterIP="10.96.0.300"),
     ['spec.clusterIPs[0]: Invalid value: "10.96.0.300": must be a valid IP address, '
      "(e.g. 10.9.8.7 or 2001:db8::ffff)"]),
    (dict(clusterIP="10.96.0.5", clusterIPs=["10.96.0.6"]),
     ['spec.clusterIPs: Invalid value: ["10.96.0.6"]: first value must match `clusterIP`']),
    (dict(ipFamilyPolicy="RequireDualStack"),
     ['spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for '
      "dual-stack services"]),
    (dict(sessionAffinity="Sticky"),
     ['spec.sessionAffinity: Unsupported value: "Sticky": supported values: "ClientIP", "None"']),
    (dict(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 86401}}),
     ["spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 86401: must be greater than 0 "
      "and less than 86400"]),
    (dict(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 86400}}), []),
    (dict(sessionAffinityConfig={"clientIP": {"timeoutSeconds": 5}}),
     ['spec.sessionAffinityConfig: Invalid value: {"clientIP":{"timeoutSeconds":5}}: must not be set '
      "when session affinity is None"]),
    (dict(externalTrafficPolicy="Local"),
     ['spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible services']),
    # a ClusterIP Service with externalIPs is externally accessible (service.ExternallyAccessible)
    (dict(externalIPs=["192.0.2.10"], externalTrafficPolicy="Local"), []),
    (dict(type="ExternalName", externalName="x", ports=None, externalIPs=["192.0.2.10"],
          externalTrafficPolicy="Local"),
     ['spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible services']),
    # healthCheckNodePort: only for LoadBalancer + Local (the allocator gives one when left out)
    (dict(healthCheckNodePort=30080),
     ["spec.healthCheckNodePort: Invalid value: 30080: may only be set when `type` is 'LoadBalancer' and "
      "`externalTrafficPolicy` is 'Local'"]),
    (dict(type="LoadBalancer", healthCheckNodePort=30080),
     ["spec.healthCheckNodePort: Invalid value: 30080: may only be set when `type` is 'LoadBalancer' and "
      "`externalTrafficPolicy` is 'Local'"]),
    (dict(type="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=30080), []),
    (dict(type="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=70000),
     ["spec.healthCheckNodePort: Invalid value: 70000: must be between 1 and 65535, inclusive"]),
    (dict(type="NodePort", externalTrafficPolicy="Nearest"),
     ['spec.externalTrafficPolicy: Unsupported value: "Nearest": supported values: "Cluster", "Local"']),
    (dict(type="LoadBalancer", externalTrafficPolicy="Local", internalTrafficPolicy="Local"), []),
    (dict(internalTrafficPolicy="Node"),
     ['spec.internalTrafficPolicy: Unsupported value: "Node": supported values: "Cluster", "Local"']),
    (dict(selector={"app": "a b"}),
     ['spec.selector: Invalid value: "a b": a valid label must be an empty string or consist of '
      "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
      "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
      "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]),
    (dict(type="ExternalName", ports=None), ["spec.externalName: Required value"]),
    (dict(type="ExternalName", externalName="x", clusterIP="10.96.0.4"),
     ["spec.clusterIP: Forbidden: may not be set for ExternalName services"]),
    (dict(portz=[]), ["spec.portz: Unknown field"]),
])
def test_service_validation(spec, want):
    assert errors(service(**spec)) == want


def test_a_services_name_is_a_dns_1035_label():
    """It becomes a DNS label (<svc>.<ns>.svc) and an environment variable's prefix."""
    def named(name):
        obj = service()
        obj["metadata"]["name"] = name
        return errors(obj)
    assert named("web-1") == []
    label = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
             "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
             "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
    assert named("1web") == [f'metadata.name: Invalid value: "1web": {label}']
    assert named("a.b") == [f'metadata.name: Invalid value: "a.b": {label}']
    assert named("x" * 64) == [f'metadata.name: Invalid value: "{"x" * 64}": must be no more than 63 characters']


def test_a_malformed_service_is_errors_never_an_exception():
    for bad in ({"spec": "x"}, {"spec": {"ports": "x"}}, {"spec": {"ports": [None, 3]}},
                {"spec": {"clusterIPs": "x", "ipFamilies": [3]}}, {"spec": {"type": 5}}):
        obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, **bad}
        assert validate_object(default_object(obj))


def test_the_cluster_ip_is_immutable_but_for_external_name_services():
    old = default_object(service(clusterIP="10.96.0.5"))
    old["metadata"]["resourceVersion"] = "3"
    moved = copy.deepcopy(old)
    moved["spec"]["clusterIP"] = moved["spec"]["clusterIPs"][0] = "10.96.0.6"
    assert [str(e) for e in validate_object_update(old, moved)] == [
        'spec.clusterIP: Invalid value: "10.96.0.6": field is immutable']
    external = default_object(service(type="ExternalName", externalName="example.com", selector=None))
    external["metadata"]["resourceVersion"] = "3"
    assert validate_object_update(old, external) == []
    assert validate_object_update(external, moved) == []


def endpoints(*subsets) -> dict:
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"}, "subsets": list(subsets)}


@pytest.mark.parametrize("subset, want", [
    ({"addresses": [{"ip": "10.244.1.5", "nodeName": "node-1"}], "ports": [{"port": 8080}]}, []),
    ({"addresses": [{"ip": "127.0.0.1"}], "notReadyAddresses": [{"ip": "127.0.0.1"}],
      "ports": [{"name": "http", "port": 8080}]}, []),  # loopback: host-mode pods
    ({"ports": [{"port": 8080}]}, ["subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"]),
    ({"addresses": [{"ip": "nope"}], "ports": [{"port": 0, "protocol": "X"}]},
     ['subsets[0].addresses[0].ip: Invalid value: "nope": must be a valid IP address, (e.g. 10.9.8.7 or '
      "2001:db8::ffff)",
      "subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
      'subsets[0].ports[0].protocol: Unsupported value: "X": supported values: "SCTP", "TCP", "UDP"']),
    ({"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 1}, {"port": 2}]},
     ["subsets[0].ports[0].name: Required value", "subsets[0].ports[1].name: Required value"]),
])
def test_endpoints_validation(subset, want):
    assert errors(endpoints(subset)) == want
    assert default_object(endpoints({"ports": [{"port": 1}]}))["subsets"][0]["ports"] == [
        {"port": 1, "protocol": "TCP"}]


def endpoint_slice(**fields) -> dict:
    base = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-abcde", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.1.5"], "conditions": {"ready": True, "serving": True,
                                                                       "terminating": False},
                           "nodeName": "node-1", "targetRef": {"kind": "Pod", "name": "web-1",
                                                                "namespace": "default", "uid": "u"}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}
    base.update(fields)
    return base


@pytest.mark.parametrize("fields, want", [
    ({}, []),
    ({"endpoints": [{"addresses": ["127.0.0.1"]}], "ports": [{"port": None}]}, []),  # all ports
    ({"addressType": "IPX"},
     ['addressType: Unsupported value: "IPX": supported values: "FQDN", "IPv4", "IPv6"']),
    ({"endpoints": [{"addresses": []}]}, ["endpoints[0].addresses: Required value: must contain at least 1 address"]),
    ({"endpoints": [{"addresses": ["fd00::1"], "hostname": "A"}]},
     ['endpoints[0].addresses[0]: Invalid value: "fd00::1": must be a valid IPv4 address',
      'endpoints[0].hostname: Invalid value: "A": a lowercase RFC 1123 label must consist of lower case '
      "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
      "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    ({"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}, ['ports[1].name: Duplicate value: "a"']),
    ({"endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": "yes"}}]},
     ['endpoints[0].conditions.ready: Invalid value: "yes": must be a boolean']),
    ({"endpoints": [{"addresses": ["10.0.0.1"]}] * 1001}, ["endpoints: Too many: 1001: must have at most 1000 items"]),
])
def test_endpointslice_validation(fields, want):
    assert errors(endpoint_slice(**fields)) == want


def test_endpointslice_address_type_is_immutable_and_ports_default():
    old = default_object(endpoint_slice())
    assert old["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert default_object(endpoint_slice(ports=[{"port": 1}]))["ports"] == [
        {"port": 1, "protocol": "TCP", "name": ""}]
    old["metadata"]["resourceVersion"] = "1"
    new = copy.deepcopy(old)
    new["addressType"] = "IPv6"
    new["endpoints"][0]["addresses"] = ["fd00::1"]
    assert [str(e) for e in validate_object_update(old, new)] == ['addressType: Invalid value: "IPv6": field is immutable']
