"""kubectl describe service's text, its endpoints read from EndpointSlices."""
from __future__ import annotations

from kubemu.kubectl.describe import Related, describe
from kubemu.kubectl.describe_service import format_endpointslices

from .test_describe import event
from .test_printers import NOW, service


def slice_(ports: list[dict], *endpoints: tuple[str, bool | None]) -> dict:
    out = []
    for address, ready in endpoints:
        conditions = {} if ready is None else {"ready": ready}
        out.append({"addresses": [address], "conditions": conditions})
    return {"kind": "EndpointSlice", "addressType": "IPv4", "ports": ports, "endpoints": out}


def test_cluster_ip_service_describe_reads_like_kubectl():
    svc = service(ports=[{"port": 80, "protocol": "TCP", "targetPort": 8080}], ipFamilies=["IPv4"],
                  ipFamilyPolicy="SingleStack", sessionAffinity="None", internalTrafficPolicy="Cluster")
    svc["metadata"].update(labels={"app": "web"}, annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"})
    slices = [slice_([{"name": "", "port": 8080, "protocol": "TCP"}], ("10.244.1.2", True), ("10.244.2.3", None),
                     ("10.244.3.4", False))]
    text = describe(svc, Related(events=[], endpointslices=slices), NOW)
    assert text.splitlines() == [
        "Name:                     web",
        "Namespace:                default",
        "Labels:                   app=web",
        "Annotations:              <none>",
        "Selector:                 app=web",
        "Type:                     ClusterIP",
        "IP Family Policy:         SingleStack",
        "IP Families:              IPv4",
        "IP:                       10.96.0.20",
        "IPs:                      10.96.0.20",
        "Port:                     <unset>  80/TCP",
        "TargetPort:               8080/TCP",
        "Endpoints:                10.244.1.2:8080,10.244.2.3:8080",
        "Session Affinity:         None",
        "Internal Traffic Policy:  Cluster",
        "Events:                   <none>",
    ]


def test_node_port_load_balancer_with_named_ports_and_events():
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "web", "nodePort": 30080},
             {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443, "nodePort": 30443}]
    svc = service(type_="LoadBalancer", ports=ports, selector={}, sessionAffinity="ClientIP",
                  externalTrafficPolicy="Cluster", externalIPs=["192.0.2.1"])
    svc["status"]["loadBalancer"]["ingress"] = [{"ip": "192.0.2.9", "ipMode": "VIP"}, {"hostname": "lb.example"}]
    slices = [slice_([{"name": "http", "port": 8000}, {"name": "https", "port": 8443}], ("10.0.0.1", True))]
    lines = describe(svc, Related(events=[event("Created", "made", 5)], endpointslices=slices), NOW).splitlines()
    assert lines[4:] == [
        "Selector:                 <none>",
        "Type:                     LoadBalancer",
        "IP Families:              <none>",
        "IP:                       10.96.0.20",
        "IPs:                      10.96.0.20",
        "External IPs:             192.0.2.1",
        "LoadBalancer Ingress:     192.0.2.9 (VIP), lb.example",
        "Port:                     http  80/TCP",
        "TargetPort:               web/TCP",
        "NodePort:                 http  30080/TCP",
        "Endpoints:                10.0.0.1:8000",
        "Port:                     https  443/TCP",
        "TargetPort:               8443/TCP",
        "NodePort:                 https  30443/TCP",
        "Endpoints:                10.0.0.1:8443",
        "Session Affinity:         ClientIP",
        "External Traffic Policy:  Cluster",
        "Events:",
        "  Type    Reason   Age   From     Message",
        "  ----    ------   ----  ----     -------",
        "  Normal  Created  5s    kubelet  made",
    ]


def test_endpoints_of_slices_as_describe_lists_them():
    assert format_endpointslices([]) == "<none>"
    assert format_endpointslices([slice_([{"name": "", "port": 80}], ("10.0.0.1", False))]) == ""
    five = slice_([{"name": "", "port": 80}], *((f"10.0.0.{i}", True) for i in range(5)))
    assert format_endpointslices([five], {""}) == "10.0.0.0:80,10.0.0.1:80,10.0.0.2:80 + 2 more..."
    assert format_endpointslices([five], {"other"}) == ""
    headless = slice_([], ("10.0.0.1", True), ("10.0.0.2", True))
    assert format_endpointslices([headless]) == "10.0.0.1,10.0.0.2"
    # kubectl's quirk: a not-ready fourth endpoint still marks the list as cut off
    quirk = slice_([{"name": "", "port": 80}], *((f"10.0.0.{i}", True) for i in range(3)), ("10.0.0.9", False))
    assert format_endpointslices([quirk]) == "10.0.0.0:80,10.0.0.1:80,10.0.0.2:80 + 0 more..."


def test_endpoints_and_endpointslice_describe():
    ep = {"kind": "Endpoints", "metadata": {"name": "web", "namespace": "default"},
          "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80, "protocol": "TCP"}]},
                      {"notReadyAddresses": [{"ip": "10.0.0.3"}]}]}
    assert describe(ep, Related(events=[]), NOW).splitlines() == [
        "Name:         web",
        "Namespace:    default",
        "Labels:       <none>",
        "Annotations:  <none>",
        "Subsets:",
        "  Addresses:          10.0.0.1,10.0.0.2",
        "  NotReadyAddresses:  <none>",
        "  Ports:",
        "    Name     Port  Protocol",
        "    ----     ----  --------",
        "    <unset>  80    TCP",
        "",
        "  Addresses:          <none>",
        "  NotReadyAddresses:  10.0.0.3",
        "",
        "Events:  <none>",
    ]
    eps = slice_([{"name": "http", "port": 8080, "protocol": "TCP"}], ("10.0.0.1", True), ("10.0.0.2", None))
    eps["metadata"] = {"name": "web-abc", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}}
    eps["endpoints"][0].update(nodeName="n1", targetRef={"kind": "Pod", "name": "web-1"}, hostname="web-1")
    assert describe(eps, Related(), NOW).splitlines() == [
        "Name:         web-abc",
        "Namespace:    default",
        "Labels:       kubernetes.io/service-name=web",
        "Annotations:  <none>",
        "AddressType:  IPv4",
        "Ports:",
        "  Name  Port  Protocol",
        "  ----  ----  --------",
        "  http  8080  TCP",
        "Endpoints:",
        "  - Addresses:  10.0.0.1",
        "    Conditions:",
        "      Ready:    true",
        "    Hostname:   web-1",
        "    TargetRef:  Pod/web-1",
        "    NodeName:   n1",
        "    Zone:       <unset>",
        "  - Addresses:  10.0.0.2",
        "    Conditions:",
        "      Ready:   <unset>",  # aligned with Hostname only: tabwriter's blocks, as kubectl's
        "    Hostname:  <unset>",
        "    NodeName:  <unset>",
        "    Zone:      <unset>",
    ]
    empty = {"kind": "EndpointSlice", "metadata": {"name": "e"}, "addressType": "IPv4"}
    assert describe(empty, Related(), NOW).splitlines()[-2:] == ["Ports: <unset>", "Endpoints: <none>"]
