from __future__ import annotations

from components.kube_proxy.endpoints import DEFAULT_AFFINITY_TIMEOUT, Endpoint, service_ports


def svc(name="web", ns="default", cluster_ip="10.96.0.50", ports=None, **spec):
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": cluster_ip, "type": "ClusterIP",
                     "ports": ports or [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8000}],
                     **spec}}


def ep(ip, node="n1", ready=True, serving=None, terminating=None):
    cond = {"ready": ready}
    if serving is not None:
        cond["serving"] = serving
    if terminating is not None:
        cond["terminating"] = terminating
    return {"addresses": [ip], "conditions": cond, "nodeName": node}


def eps(endpoints, service="web", ns="default", name=None, ports=None):
    return {"metadata": {"name": name or f"{service}-abc", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": ports or [{"name": "http", "port": 8000, "protocol": "TCP"}]}


def ips(endpoints):
    return [e.ip for e in endpoints]


def test_ready_endpoints_only():
    [sp] = service_ports([svc()], [eps([ep("10.244.0.2"), ep("10.244.1.2", ready=False)])], "n1")
    assert ips(sp.endpoints) == ["10.244.0.2"]
    assert sp.endpoints[0] == Endpoint("10.244.0.2", 8000, "n1", True, True, False)
    assert sp.key == ("default", "web", "TCP", "http") and sp.display == "default/web:http"
    assert len(sp.all_endpoints) == 2


def test_terminating_fallback_when_none_ready():
    slice_ = eps([ep("10.244.0.2", ready=False, serving=True, terminating=True),
                  ep("10.244.0.3", ready=False, serving=False, terminating=True),
                  ep("10.244.0.4", ready=False, serving=True, terminating=False)])
    [sp] = service_ports([svc()], [slice_], "n1")
    assert ips(sp.endpoints) == ["10.244.0.2"]


def test_ready_wins_over_terminating():
    slice_ = eps([ep("10.244.0.2", ready=False, serving=True, terminating=True), ep("10.244.0.3")])
    [sp] = service_ports([svc()], [slice_], "n1")
    assert ips(sp.endpoints) == ["10.244.0.3"]


def test_absent_conditions_default_ready():
    slice_ = eps([{"addresses": ["10.244.0.9"], "nodeName": "n1"}])
    [sp] = service_ports([svc()], [slice_], "n1")
    assert ips(sp.endpoints) == ["10.244.0.9"]


def test_absent_serving_defers_to_ready():
    """discovery/v1: an absent `serving` is the endpoint's `ready`, so a not-ready terminating
    endpoint without it is no fallback; an absent `terminating` is false."""
    slice_ = eps([ep("10.244.0.2", ready=False, terminating=True), ep("10.244.0.3", ready=False, serving=True)])
    [sp] = service_ports([svc()], [slice_], "n1")
    assert sp.endpoints == ()
    assert sorted((e.ip, e.serving, e.terminating) for e in sp.all_endpoints) == [
        ("10.244.0.2", False, True), ("10.244.0.3", True, False)]


def test_internal_traffic_policy_local():
    slice_ = eps([ep("10.244.0.2", node="n1"), ep("10.244.1.2", node="n2")])
    [sp] = service_ports([svc(internalTrafficPolicy="Local")], [slice_], "n2")
    assert ips(sp.endpoints) == ["10.244.1.2"]
    [sp] = service_ports([svc(internalTrafficPolicy="Local")], [slice_], "n3")
    assert sp.endpoints == ()


def test_external_traffic_policy_local_for_externally_accessible_services():
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}]
    slice_ = eps([ep("10.244.0.2", node="n1"), ep("10.244.1.2", node="n2")])
    [sp] = service_ports([svc(type="NodePort", ports=ports, externalTrafficPolicy="Local")], [slice_], "n1")
    assert sp.node_port == 30080 and sp.external_local
    assert ips(sp.endpoints) == ["10.244.0.2", "10.244.1.2"]
    assert ips(sp.external_endpoints) == ["10.244.0.2"]
    # a ClusterIP service ignores a stray nodePort and the policy
    [sp] = service_ports([svc(ports=ports, externalTrafficPolicy="Local")], [slice_], "n1")
    assert sp.node_port is None and not sp.external_local
    # ... unless it has externalIPs: upstream's ExternallyAccessible, whose traffic the policy keeps local
    [sp] = service_ports([svc(externalIPs=["192.0.2.7"], externalTrafficPolicy="Local")], [slice_], "n2")
    assert sp.external_ips == ("192.0.2.7",) and sp.external_local
    assert ips(sp.endpoints) == ["10.244.0.2", "10.244.1.2"]
    assert ips(sp.external_endpoints) == ["10.244.1.2"]


def test_slices_merge_by_service_port_name_and_protocol():
    a = eps([ep("10.244.0.2")], name="web-a")
    b = eps([ep("10.244.0.3"), ep("10.244.0.2")], name="web-b")
    other_ns = eps([ep("10.244.0.7")], ns="other")
    udp = eps([ep("10.244.0.8")], name="web-udp", ports=[{"name": "http", "port": 8000, "protocol": "UDP"}])
    [sp] = service_ports([svc()], [a, b, other_ns, udp], "n1")
    assert ips(sp.endpoints) == ["10.244.0.2", "10.244.0.3"]


def test_unnamed_port_and_multiple_ports():
    ports = [{"port": 53, "protocol": "UDP", "name": "dns"}, {"port": 53, "protocol": "TCP", "name": "dns-tcp"}]
    slice_ = eps([ep("10.244.0.2")], service="dns",
                 ports=[{"name": "dns", "port": 5353, "protocol": "UDP"},
                        {"name": "dns-tcp", "port": 5353, "protocol": "TCP"}])
    sps = service_ports([svc(name="dns", ports=ports)], [slice_], "n1")
    assert [(s.protocol, s.port_name, s.endpoints[0].port) for s in sps] == \
        [("TCP", "dns-tcp", 5353), ("UDP", "dns", 5353)]
    [sp] = service_ports([svc(ports=[{"port": 80}])], [eps([ep("10.244.0.2")], ports=[{"port": 8000}])], "n1")
    assert sp.port_name == "" and sp.protocol == "TCP" and sp.display == "default/web"
    assert ips(sp.endpoints) == ["10.244.0.2"]


def test_headless_external_name_and_other_proxies_services_skipped():
    other = svc(name="o")
    other["metadata"]["labels"] = {"service.kubernetes.io/service-proxy-name": "someone-else"}
    assert service_ports([svc(cluster_ip="None"), svc(name="x", cluster_ip="", type="ExternalName"), other],
                         [], "n1") == []


def test_affinity_timeout():
    [sp] = service_ports([svc(sessionAffinity="ClientIP")], [], "n1")
    assert sp.affinity_timeout == DEFAULT_AFFINITY_TIMEOUT
    [sp] = service_ports([svc(sessionAffinity="ClientIP",
                              sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}})], [], "n1")
    assert sp.affinity_timeout == 60
    [sp] = service_ports([svc()], [], "n1")
    assert sp.affinity_timeout is None and sp.endpoints == ()


def test_garbage_is_skipped():
    bad_slice = {"metadata": {"namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
                 "endpoints": [None, {"addresses": "x"}, {"addresses": [1]}, {"addresses": ["10.0.0.1; flush"]}],
                 "ports": [None, {"port": "80"}, {"name": "http", "port": 8000}]}
    ipv6 = eps([ep("fd00::1")])
    ipv6["addressType"] = "IPv6"
    bad_svc = {"metadata": None, "spec": {"clusterIP": "10.96.0.9", "ports": [{"port": 0}, "x"]}}
    # what would break an nft transaction (and so every Service's rules) is skipped
    odd_names = [svc(name="Web Server"), svc(name="x", cluster_ip="10.96.0.300"),
                 svc(name="y", ports=[{"name": "a b", "port": 80}, {"name": "ok", "port": 81, "protocol": "ICMP"}])]
    [sp] = service_ports([svc(), bad_svc, {}, *odd_names], [bad_slice, ipv6], "n1")
    assert sp.endpoints == () and sp.name == "web"
    [sp] = service_ports([svc(externalIPs=["1.2.3.4", "nope"])], [], "n1")
    assert sp.external_ips == ("1.2.3.4",)
