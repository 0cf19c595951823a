"""kubectl expose's Service from the object exposed and the flags (no processes)."""
from __future__ import annotations

import pytest

from kubemu.kubectl.expose import ExposeFlags, exposed_service
from kubemu.kubectl.session import CommandError


def deployment(ports=None, match_labels=None, **selector) -> dict:
    containers = [{"name": "c", "image": "nginx", "ports": [{"containerPort": 8000}] if ports is None else ports}]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"team": "a"}},
            "spec": {"selector": {"matchLabels": {"app": "web"} if match_labels is None else match_labels, **selector},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}}}


def test_deployment_port_and_target_port():
    svc = exposed_service(deployment(), ExposeFlags(port="80", target_port="8000"))
    assert svc == {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"team": "a"}},
                   "spec": {"selector": {"app": "web"},
                            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8000}]}}
    named = exposed_service(deployment(), ExposeFlags(port="80", target_port="http", type="NodePort", name="front"))
    assert named["metadata"]["name"] == "front" and named["spec"]["type"] == "NodePort"
    assert named["spec"]["ports"][0]["targetPort"] == "http"


def test_ports_and_protocols_from_the_containers():
    ports = [{"containerPort": 8000}, {"containerPort": 53, "protocol": "UDP"}, {"containerPort": 8000}]
    svc = exposed_service(deployment(ports), ExposeFlags())
    assert svc["spec"]["ports"] == [{"name": "port-1", "port": 8000, "protocol": "TCP", "targetPort": 8000},
                                    {"name": "port-2", "port": 53, "protocol": "UDP", "targetPort": 53}]
    both = [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53, "protocol": "TCP"}]
    assert [p["name"] for p in exposed_service(deployment(both), ExposeFlags())["spec"]["ports"]] == \
        ["port-1-udp", "port-1-tcp"]
    assert exposed_service(deployment(both), ExposeFlags(protocol="TCP"))["spec"]["ports"] == \
        [{"port": 53, "protocol": "TCP", "targetPort": 53}]
    assert exposed_service(deployment(both), ExposeFlags(port="9000"))["spec"]["ports"][0]["protocol"] == "TCP"


def test_pods_and_services_and_flags():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p" * 70, "labels": {"run": "p"}},
           "spec": {"containers": [{"name": "c"}]}}
    svc = exposed_service(pod, ExposeFlags(port="444", cluster_ip="None", session_affinity="ClientIP",
                                           external_ip="192.0.2.1", labels="x=y"))
    assert svc["metadata"] == {"name": "p" * 63, "labels": {"x": "y"}}
    assert svc["spec"] == {"selector": {"run": "p"}, "ports": [{"port": 444, "protocol": "TCP", "targetPort": 444}],
                           "externalIPs": ["192.0.2.1"], "sessionAffinity": "ClientIP", "clusterIP": "None"}
    headless = exposed_service(pod, ExposeFlags(cluster_ip="None"))
    assert headless["spec"]["ports"] == []
    existing = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "protocol": "UDP"}]}}
    again = exposed_service(existing, ExposeFlags(name="web2", port="443", target_port="8443"))
    assert again["spec"] == {"selector": {"app": "web"}, "ports": [{"port": 443, "protocol": "TCP", "targetPort": 8443}]}
    assert exposed_service(existing, ExposeFlags(name="w"))["spec"]["ports"][0]["protocol"] == "UDP"
    assert exposed_service(deployment(), ExposeFlags(selector="a=b,c=d"))["spec"]["selector"] == {"a": "b", "c": "d"}


@pytest.mark.parametrize("obj, flags, message", [
    (deployment(ports=[]), ExposeFlags(), "couldn't find port via --port flag or introspection"),
    (deployment(match_labels={}), ExposeFlags(port="80"),
     "couldn't retrieve selectors via --selector flag or introspection: invalid deployment: no selectors, "
     "therefore cannot be exposed"),
    (deployment(matchExpressions=[{"key": "a", "operator": "In", "values": ["x", "y"]}]), ExposeFlags(port="80"),
     'couldn\'t retrieve selectors via --selector flag or introspection: couldn\'t convert expressions - '
     '"[{Key:a Operator:In Values:[x y]}]" to map-based selector format'),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}, ExposeFlags(port="80"),
     "couldn't retrieve selectors via --selector flag or introspection: the pod has no labels and cannot be exposed"),
    ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}}, ExposeFlags(port="80"),
     "couldn't retrieve selectors via --selector flag or introspection: the service has no pod selector set"),
    ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}, ExposeFlags(), "cannot expose a Node"),
    ({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}}, ExposeFlags(),
     "cannot expose a Lease.coordination.k8s.io"),
    (deployment(), ExposeFlags(port="eighty"), 'strconv.Atoi: parsing "eighty": invalid syntax'),
    (deployment(), ExposeFlags(selector="a in (b)"), "unexpected label spec: a in (b)"),
    (deployment(), ExposeFlags(selector="=b"), "unexpected empty label key"),
    (deployment(), ExposeFlags(session_affinity="Sticky"), "unknown session affinity: Sticky"),
])
def test_errors_in_kubectls_words(obj, flags, message):
    with pytest.raises(CommandError) as err:
        exposed_service(obj, flags)
    assert str(err.value) == message
