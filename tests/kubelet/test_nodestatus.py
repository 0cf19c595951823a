"""What the kubelet tells the API about its node's pod network (kubelet/nodestatus.py, pure)."""
from kubelet.nodestatus import NETWORK_NOT_READY, NodeConfig, NodeNetwork, node_object, node_status

CONFIG = NodeConfig("node-1", "2", "2Gi")


def conditions(status: dict) -> dict:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def test_ready_by_default_with_no_network_condition():
    conds = conditions(node_status(CONFIG, 1000.0))
    assert conds["Ready"] == ("True", "KubeletReady", "kubelet is posting ready status")
    assert "NetworkUnavailable" not in conds


def test_not_ready_until_the_pod_network_is():
    status = node_status(CONFIG, 1000.0, network=NodeNetwork(ready=False))
    assert conditions(status)["Ready"] == ("False", "KubeletNotReady", NETWORK_NOT_READY)
    assert NETWORK_NOT_READY == ("container runtime network not ready: NetworkReady=false "
                                 "reason:NetworkPluginNotReady message:Network plugin returns error: "
                                 "cni plugin not initialized")
    assert conditions(node_object(CONFIG, 1000.0, NodeNetwork(ready=False))["status"])["Ready"][0] == "False"
    # becoming ready is a transition: lastTransitionTime moves
    later = node_status(CONFIG, 2000.0, status)
    ready = next(c for c in later["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["lastTransitionTime"] != next(
        c for c in status["conditions"] if c["type"] == "Ready")["lastTransitionTime"]


def test_host_network_reason_is_a_network_unavailable_condition_that_does_not_taint():
    conds = conditions(node_status(CONFIG, 1000.0, network=NodeNetwork(host_reason="not root")))
    assert conds["NetworkUnavailable"] == ("False", "KubemuHostNetwork", "pods share the host's network: not root")
    assert conds["Ready"][0] == "True"
