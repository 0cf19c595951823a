"""A container's environment: envFrom and env in Kubernetes' order and rules, $(VAR)
expansion, optional references, and the errors that keep a container from starting."""
import base64

import pytest

from kubelet.configsource import Unavailable
from kubelet.envvars import Env, EnvError, container_env, expand, expand_argv, service_env


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


OBJECTS = {
    ("configmaps", "ns", "cfg"): {"kind": "ConfigMap", "data": {"MODE": "fast", "LEVEL": "3",
                                                               "bad key": "x", "1st": "y"},
                                  "binaryData": {"BLOB": b64("bin")}},
    ("secrets", "ns", "sec"): {"kind": "Secret", "type": "Opaque",
                               "data": {"PASSWORD": b64("s3cret\n"), "with.dot": b64("ok")}},
}


def lookup(resource, namespace, name):
    return OBJECTS.get((resource, namespace, name))


def make_pod(**ctr):
    return {"metadata": {"name": "web", "namespace": "ns", "uid": "u-1",
                         "labels": {"app": "web"}, "annotations": {"note": "hi"}},
            "spec": {"nodeName": "node-1", "serviceAccountName": "robot",
                     "containers": [{"name": "app", "command": ["sleep"], **ctr}]}}


def env_of(**ctr):
    pod = make_pod(**ctr)
    return container_env(pod, pod["spec"]["containers"][0], lookup, ["10.244.1.5"], ["10.0.0.1"],
                         {"cpu": "4", "memory": "8Gi"})


def test_values_expand_references_to_earlier_variables():
    env = env_of(env=[{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-$(C)"},
                      {"name": "C", "value": "3"}, {"name": "D", "value": "$$(A) $(B)"}])
    assert env.vars == {"A": "1", "B": "1-$(C)", "C": "3", "D": "$(A) 1-$(C)"}


@pytest.mark.parametrize("text, expected", [
    ("$(A)", "1"), ("$$(A)", "$(A)"), ("$$$(A)", "$1"), ("$(A", "$(A"), ("a$", "a$"),
    ("$x$(A)", "$x1"), ("$(UNKNOWN)", "$(UNKNOWN)"), ("$()", "$()"), ("(A)", "(A)"),
])
def test_expand_is_kubernetes_expansion(text, expected):
    assert expand(text, {"A": "1"}) == expected


def test_argv_is_expanded_with_the_environment():
    assert expand_argv(["echo", "$(GREETING)", "$$(GREETING)"], {"GREETING": "hi"}) == \
        ["echo", "hi", "$(GREETING)"]


def test_env_from_prefixes_skips_invalid_names_with_a_warning_and_env_wins():
    env = env_of(envFrom=[{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"},
                          {"secretRef": {"name": "sec"}}],
                 env=[{"name": "CFG_MODE", "value": "slow"}])
    assert env.vars == {"CFG_MODE": "slow", "CFG_LEVEL": "3", "CFG_1st": "y",
                        "PASSWORD": "s3cret\n", "with.dot": "ok"}
    # binaryData is not env material; the skipped keys are said once, sorted
    assert env.warnings == ["Keys [CFG_bad key] from the EnvFrom configMap ns/cfg were skipped "
                            "since they are considered invalid environment variable names."]


def test_env_from_without_prefix_skips_names_starting_with_a_digit():
    env = env_of(envFrom=[{"configMapRef": {"name": "cfg"}}])
    assert env.warnings == ["Keys [1st, bad key] from the EnvFrom configMap ns/cfg were skipped "
                            "since they are considered invalid environment variable names."]
    assert "1st" not in env.vars and env.vars["MODE"] == "fast"


def test_key_refs_read_configmaps_and_decoded_secrets():
    env = env_of(env=[{"name": "M", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "MODE"}}},
                      {"name": "P", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "PASSWORD"}}}])
    assert env == Env({"M": "fast", "P": "s3cret\n"})


@pytest.mark.parametrize("ctr, message", [
    ({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "NOPE"}}}]},
     "couldn't find key NOPE in ConfigMap ns/cfg"),
    ({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "NOPE"}}}]},
     "couldn't find key NOPE in Secret ns/sec"),
    ({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "K"}}}]},
     'configmap "gone" not found'),
    ({"envFrom": [{"secretRef": {"name": "gone"}}]}, 'secret "gone" not found'),
    ({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "BLOB"}}}]},
     "couldn't find key BLOB in ConfigMap ns/cfg"),
])
def test_a_missing_object_or_key_is_an_error(ctr, message):
    assert env_of(**ctr) == EnvError(message)


def test_optional_references_leave_the_variable_out():
    env = env_of(envFrom=[{"configMapRef": {"name": "gone", "optional": True}}],
                 env=[{"name": "A", "valueFrom": {"configMapKeyRef": {
                     "name": "cfg", "key": "NOPE", "optional": True}}},
                      {"name": "B", "valueFrom": {"secretKeyRef": {
                          "name": "gone", "key": "K", "optional": True}}},
                      {"name": "C", "value": "$(A)"}])
    assert env == Env({"C": "$(A)"})


def test_field_refs():
    fields = {"NAME": "metadata.name", "NS": "metadata.namespace", "UID": "metadata.uid",
              "NODE": "spec.nodeName", "SA": "spec.serviceAccountName", "HOST": "status.hostIP",
              "HOSTS": "status.hostIPs", "IP": "status.podIP", "IPS": "status.podIPs",
              "APP": "metadata.labels['app']", "NOTE": "metadata.annotations['note']",
              "MISSING": "metadata.labels['nope']"}
    env = env_of(env=[{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}}
                      for k, v in fields.items()])
    assert env.vars == {"NAME": "web", "NS": "ns", "UID": "u-1", "NODE": "node-1", "SA": "robot",
                        "HOST": "10.0.0.1", "HOSTS": "10.0.0.1", "IP": "10.244.1.5",
                        "IPS": "10.244.1.5", "APP": "web", "NOTE": "hi", "MISSING": ""}


def test_resource_refs_round_up_and_fall_back_to_the_node_allocatable():
    env = env_of(resources={"limits": {"memory": "100Mi"}, "requests": {"cpu": "250m"}},
                 env=[{"name": "MEM", "valueFrom": {"resourceFieldRef": {
                          "resource": "limits.memory", "divisor": "1Mi"}}},
                      {"name": "CPU_REQ", "valueFrom": {"resourceFieldRef": {
                          "resource": "requests.cpu"}}},
                      {"name": "CPU_REQ_M", "valueFrom": {"resourceFieldRef": {
                          "resource": "requests.cpu", "divisor": "1m"}}},
                      {"name": "CPU_LIM", "valueFrom": {"resourceFieldRef": {
                          "resource": "limits.cpu"}}}])
    assert env.vars == {"MEM": "100", "CPU_REQ": "1", "CPU_REQ_M": "250", "CPU_LIM": "4"}


def test_an_object_not_known_yet_is_an_error_with_the_caches_words():
    def unsynced(resource, namespace, name):
        raise Unavailable("failed to sync configmap cache: timed out waiting for the condition")
    pod = make_pod(envFrom=[{"configMapRef": {"name": "cfg"}}])
    assert container_env(pod, pod["spec"]["containers"][0], unsynced, [], []) == \
        EnvError("failed to sync configmap cache: timed out waiting for the condition")


# --- the Services' variables (Docker links) ---------------------------------------------------

def service(name, namespace, cluster_ip, *ports):
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": cluster_ip, "ports": list(ports)}}


MASTER = service("kubernetes", "default", "10.96.0.1", {"name": "https", "port": 443, "protocol": "TCP"})
SERVICES = [
    MASTER,
    service("redis-master", "ns", "10.96.0.11", {"port": 6379}),
    service("dns", "ns", "10.96.0.12", {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"}),
    service("headless", "ns", "None", {"port": 80}),
    service("external", "ns", "", {"port": 80}),
    service("elsewhere", "other", "10.96.0.13", {"port": 80}),
]


def test_the_service_variables_are_the_kubelets_for_the_namespace_and_the_master_service():
    env = service_env(make_pod(), SERVICES, static=False)
    assert env == {
        "DNS_SERVICE_HOST": "10.96.0.12", "DNS_SERVICE_PORT": "53", "DNS_SERVICE_PORT_DNS": "53",
        "DNS_SERVICE_PORT_DNS_TCP": "53", "DNS_PORT": "udp://10.96.0.12:53",
        "DNS_PORT_53_UDP": "udp://10.96.0.12:53", "DNS_PORT_53_UDP_PROTO": "udp",
        "DNS_PORT_53_UDP_PORT": "53", "DNS_PORT_53_UDP_ADDR": "10.96.0.12",
        "DNS_PORT_53_TCP": "tcp://10.96.0.12:53", "DNS_PORT_53_TCP_PROTO": "tcp",
        "DNS_PORT_53_TCP_PORT": "53", "DNS_PORT_53_TCP_ADDR": "10.96.0.12",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
        "REDIS_MASTER_SERVICE_HOST": "10.96.0.11", "REDIS_MASTER_SERVICE_PORT": "6379",
        "REDIS_MASTER_PORT": "tcp://10.96.0.11:6379", "REDIS_MASTER_PORT_6379_TCP": "tcp://10.96.0.11:6379",
        "REDIS_MASTER_PORT_6379_TCP_PROTO": "tcp", "REDIS_MASTER_PORT_6379_TCP_PORT": "6379",
        "REDIS_MASTER_PORT_6379_TCP_ADDR": "10.96.0.11"}


def test_without_service_links_only_the_master_service_remains():
    pod = make_pod()
    pod["spec"]["enableServiceLinks"] = False
    env = service_env(pod, SERVICES, static=False)
    assert sorted({k.split("_")[0] for k in env}) == ["KUBERNETES"]
    assert service_env(pod, [SERVICES[1]], static=False) == {}


def test_the_namespaces_own_kubernetes_service_wins_over_the_masters_whatever_the_order():
    own = service("kubernetes", "ns", "10.96.0.99", {"port": 8443})
    for services in ([MASTER, own], [own, MASTER]):
        assert service_env(make_pod(), services, static=False)["KUBERNETES_SERVICE_HOST"] == "10.96.0.99"


def test_an_ipv6_cluster_ip_is_bracketed_in_the_urls():
    env = service_env(make_pod(), [service("v6", "ns", "fd00::a", {"port": 80})], static=False)
    assert env["V6_PORT"] == "tcp://[fd00::a]:80" and env["V6_PORT_80_TCP_ADDR"] == "fd00::a"


def test_services_not_listed_yet_hold_back_an_api_pod_not_a_static_one():
    assert service_env(make_pod(), None, static=False) == EnvError(
        "services have not yet been read at least once, cannot construct envvars")
    assert service_env(make_pod(), None, static=True) == {}


def test_the_containers_own_variables_win_and_expand_service_ones():
    pod = make_pod(env=[{"name": "REDIS_MASTER_SERVICE_PORT", "value": "1"},
                        {"name": "URL", "value": "redis://$(REDIS_MASTER_SERVICE_HOST):$(REDIS_MASTER_SERVICE_PORT)"}],
                   envFrom=[{"configMapRef": {"name": "cfg"}, "prefix": "KUBERNETES_"}])
    services = service_env(pod, SERVICES, static=False)
    env = container_env(pod, pod["spec"]["containers"][0], lookup, [], [], None, services)
    assert env.vars["URL"] == "redis://10.96.0.11:1"
    assert env.vars["REDIS_MASTER_SERVICE_PORT"] == "1" and env.vars["REDIS_MASTER_PORT"] == "tcp://10.96.0.11:6379"
    assert env.vars["KUBERNETES_MODE"] == "fast" and env.vars["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    names = list(env.vars)
    assert names.index("URL") < names.index("DNS_SERVICE_HOST")  # the container's own first
    # a command's $(VAR) sees them too
    assert expand_argv(["$(DNS_SERVICE_HOST)", "$(KUBERNETES_PORT_443_TCP_PORT)"], env.vars) == ["10.96.0.12", "443"]
