"""kubectl describe's text for pods, deployments, replica sets, nodes and the rest."""
from __future__ import annotations

from kubemu.kubectl.describe import Related, describe, smart_label
from kubemu.kubectl.describe_node import pod_requests_and_limits
from kubemu.kubectl.describe_pod import probe_text, qos_class
from kubemu.kubectl.timefmt import rfc1123z

from .test_printers import NOW, ago, pod, running


def event(reason: str, message: str, seconds_ago: float, count: int = 1, type_: str = "Normal") -> dict:
    return {"kind": "Event", "type": type_, "reason": reason, "message": message, "count": count,
            "source": {"component": "kubelet"}, "involvedObject": {"kind": "Pod", "name": "web"},
            "firstTimestamp": ago(seconds_ago + 60 * (count > 1)), "lastTimestamp": ago(seconds_ago)}


def test_pod_describe_reads_like_kubectl():
    p = pod(statuses=[running(restarts=1, last_finished=30)], podIP="10.0.0.7", hostIP="10.1.0.1",
            startTime=ago(300), conditions=[{"type": "Ready", "status": "True"}])
    p["spec"]["nodeName"] = "n1"
    p["spec"]["containers"][0].update(command=["nginx", "-g"], ports=[{"containerPort": 80, "protocol": "TCP"}],
                                      env=[{"name": "A", "value": "1"}])
    p["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "web-abc", "controller": True, "uid": "u"}]
    p["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "hi"}
    text = describe(p, Related(events=[event("Pulled", "pulled", 40), event("BackOff", "back-off", 5, 3, "Warning")]),
                    NOW)
    started = p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert text.splitlines() == [
        "Name:         web",
        "Namespace:    default",
        "Node:         n1/10.1.0.1",
        f"Start Time:   {rfc1123z(ago(300))}",
        "Labels:       app=web",
        "Annotations:  note: hi",  # never the last-applied-configuration
        "Status:       Running",
        "IP:           10.0.0.7",
        "IPs:",
        "  IP:           10.0.0.7",  # aligned with the next line: kubectl's tabwriter blocks
        "Controlled By:  ReplicaSet/web-abc",
        "Containers:",
        "  c:",
        "    Container ID:  ",
        "    Image:         nginx",
        "    Image ID:      ",
        "    Port:          80/TCP",
        "    Host Port:     0/TCP",
        "    Command:",
        "      nginx",
        "      -g",
        "    State:          Running",
        f"      Started:      {rfc1123z(started)}",
        "    Last State:     Terminated",
        "      Reason:       Error",
        "      Exit Code:    1",
        "      Started:      Mon, 01 Jan 0001 00:00:00 +0000",
        f"      Finished:     {rfc1123z(ago(30))}",
        "    Ready:          True",
        "    Restart Count:  1",
        "    Environment:",
        "      A:     1",
        "    Mounts:  <none>",
        "Conditions:",
        "  Type           Status",
        "  Ready          True ",
        "Volumes:         <none>",
        "QoS Class:       BestEffort",
        "Node-Selectors:  <none>",
        "Tolerations:     <none>",
        "Events:",
        "  Type     Reason   Age               From     Message",
        "  ----     ------   ----              ----     -------",
        "  Normal   Pulled   40s               kubelet  pulled",
        "  Warning  BackOff  5s (x3 over 65s)  kubelet  back-off",
    ]


def test_terminating_pod_and_no_events():
    p = pod(statuses=[running()], deleting=True)
    p["metadata"]["deletionGracePeriodSeconds"] = 30
    text = describe(p, Related(events=[]), NOW)
    assert "Status:                    Terminating (lasts 30s)\n" in text
    assert "Termination Grace Period:  30s\n" in text
    assert text.splitlines()[-1].split() == ["Events:", "<none>"]
    assert "Events" not in describe(p, Related(events=None), NOW)


def deployment() -> dict:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    return {"kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "d1", "creationTimestamp": ago(60),
                         "annotations": {"deployment.kubernetes.io/revision": "2"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template,
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}}},
            "status": {"replicas": 3, "updatedReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 1,
                       "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}}


def replicaset(name: str, revision: int, replicas: int, owner_uid: str = "d1") -> dict:
    return {"kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default", "uid": f"rs-{name}",
                         "annotations": {"deployment.kubernetes.io/revision": str(revision)},
                         "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": owner_uid, "controller": True}]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": deployment()["spec"]["template"]},
            "status": {"replicas": replicas}}


def test_deployment_describe():
    rss = [replicaset("web-1", 1, 1), replicaset("web-2", 2, 2), replicaset("other", 2, 5, owner_uid="x")]
    text = describe(deployment(), Related(events=[], replicasets=rss), NOW)
    assert f"CreationTimestamp:      {rfc1123z(ago(60))}\n" in text
    assert "Replicas:               3 desired | 2 updated | 3 total | 2 available | 1 unavailable\n" in text
    assert "RollingUpdateStrategy:  25% max unavailable, 1 max surge\n" in text
    assert ("Pod Template:\n  Labels:  app=web\n  Containers:\n   c:\n    Image:         nginx\n"
            "    Port:          <none>\n    Host Port:     <none>\n    Environment:   <none>\n"
            "    Mounts:        <none>\n  Volumes:         <none>\n") in text
    assert "  Available      True    MinimumReplicasAvailable\n" in text
    assert "OldReplicaSets:  web-1 (1/1 replicas created)\n" in text
    assert "NewReplicaSet:   web-2 (2/2 replicas created)\n" in text


def test_replicaset_describe_counts_its_pods():
    rs = replicaset("web-2", 2, 3)
    mine = [dict(pod(str(i), phase=phase), metadata={"name": str(i), "ownerReferences": [
        {"kind": "ReplicaSet", "uid": "rs-web-2", "controller": True}]}) for i, phase in
        enumerate(("Running", "Running", "Pending"))]
    text = describe(rs, Related(events=[], pods=mine + [pod("stranger")]), NOW)
    assert "Controlled By:  Deployment/web\n" in text
    assert "Replicas:       3 current / 3 desired\n" in text
    assert "Pods Status:    2 Running / 1 Waiting / 0 Succeeded / 0 Failed\n" in text


def test_node_describe_shows_pods_and_allocation():
    node = {"kind": "Node", "metadata": {"name": "n1", "uid": "n", "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}, "capacity": {"cpu": "2", "memory": "4Gi"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                       "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.30.0"}}}
    p = pod("busy")
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"},
                                               "limits": {"cpu": "1", "memory": "1Gi"}}
    lease = {"spec": {"holderIdentity": "n1"}}
    text = describe(node, Related(events=[], pods=[p], lease=lease), NOW)
    assert "Roles:              worker\n" in text
    assert "Taints:             k=v:NoSchedule\n" in text
    assert "Lease:\n  HolderIdentity:  n1\n  AcquireTime:     <unset>\n" in text
    assert "  Kubelet Version:            v1.30.0\n" in text
    assert "Non-terminated Pods:          (1 in total)\n" in text
    assert "default                     busy    500m (25%)    1 (50%)     1Gi (25%)        1Gi (25%)      5m\n" in text
    assert "  cpu       500m (25%)  1 (50%)\n" in text


def test_node_describe_shows_pod_cidrs_after_system_info():
    node = {"kind": "Node", "metadata": {"name": "n1", "uid": "n"},
            "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00:1::/64"]},
            "status": {"nodeInfo": {"kubeletVersion": "v1.30.0"}}}
    lines = describe(node, Related(events=[], pods=[]), NOW).splitlines()
    at = lines.index("PodCIDR:                      10.244.1.0/24")
    assert lines[at - 1].startswith("  Kube-Proxy Version:")
    assert lines[at + 1] == "PodCIDRs:                     10.244.1.0/24,fd00:1::/64"
    assert lines[at + 2].startswith("Non-terminated Pods:")
    node["spec"] = {}
    assert "PodCIDR" not in describe(node, Related(events=[], pods=[]), NOW)


def test_requests_default_to_limits_and_init_containers_take_the_max():
    p = {"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                                 {"resources": {"requests": {"cpu": "100m"}}}],
                  "initContainers": [{"resources": {"requests": {"cpu": "2"}}}]}}
    requests, limits = pod_requests_and_limits(p)
    assert requests == {"cpu": 2000, "memory": 1 << 30}
    assert limits == {"cpu": 1000, "memory": 1 << 30}


def test_qos_classes():
    def with_resources(*resources):
        return {"spec": {"containers": [{"resources": r} for r in resources]}}
    assert qos_class(with_resources({}, {})) == "BestEffort"
    assert qos_class(with_resources({"limits": {"cpu": "1", "memory": "1Gi"}})) == "Guaranteed"
    assert qos_class(with_resources({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}})) == \
        "Burstable"
    assert qos_class(with_resources({"limits": {"cpu": "1", "memory": "1Gi"}}, {})) == "Burstable"


def test_probe_text():
    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5}
    assert probe_text(probe) == "http-get http://:8080/healthz delay=0s timeout=1s period=5s #success=1 #failure=3"
    assert probe_text({"exec": {"command": ["cat", "/tmp/x"]}}).startswith("exec [cat /tmp/x] delay=0s")


def test_generic_and_namespace_describers():
    lease = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
             "metadata": {"name": "n1", "namespace": "kube-node-lease"},
             "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}
    text = describe(lease, Related(), NOW)
    assert text.startswith("Name:         n1\nNamespace:    kube-node-lease\nLabels:       <none>\n")
    assert "API Version:  coordination.k8s.io/v1\n" in text
    assert "Spec:\n  Holder Identity:         n1\n  Lease Duration Seconds:  40\n" in text
    ns = {"kind": "Namespace", "metadata": {"name": "default"}, "status": {"phase": "Active"}}
    assert describe(ns, Related(), NOW) == ("Name:         default\nLabels:       <none>\nAnnotations:  <none>\n"
                                            "Status:       Active\n\nNo resource quota.\n\nNo LimitRange resource.\n")
    assert smart_label("apiVersion") == "API Version" and smart_label("ipv4") == "ipv4"
