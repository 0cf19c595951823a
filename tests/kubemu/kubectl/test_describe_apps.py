"""kubemu.kubectl.describe_apps: kubectl describe statefulset / daemonset."""
from __future__ import annotations

from kubemu.kubectl.describe import Related, describe

from .test_printers import NOW, ago, pod

TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
POD_TEMPLATE_TEXT = """Pod Template:
  Labels:  app=web
  Containers:
   app:
    Image:         nginx
    Port:          <none>
    Host Port:     <none>
    Environment:   <none>
    Mounts:        <none>
  Volumes:         <none>
  Node-Selectors:  <none>
  Tolerations:     <none>
"""


def owned(name: str, phase: str, uid: str) -> dict:
    return dict(pod(name, phase=phase), metadata={"name": name, "ownerReferences": [
        {"kind": "X", "uid": uid, "controller": True}]})


def test_statefulset_describe_reads_like_kubectl():
    sts = {"kind": "StatefulSet",
           "metadata": {"name": "web", "namespace": "default", "uid": "sts-uid", "creationTimestamp": ago(60)},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE,
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                        "accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                        "resources": {"requests": {"storage": "1Gi"}}}}]},
           "status": {"replicas": 2}}
    pods = [owned("web-0", "Running", "sts-uid"), owned("web-1", "Pending", "sts-uid"), pod("stranger")]
    assert describe(sts, Related(events=[], pods=pods), NOW) == """Name:               web
Namespace:          default
CreationTimestamp:  Mon, 01 Jan 2024 11:59:00 +0000
Selector:           app=web
Labels:             <none>
Annotations:        <none>
Replicas:           3 desired | 2 total
Update Strategy:    RollingUpdate
  Partition:        1
Pods Status:        1 Running / 1 Waiting / 0 Succeeded / 0 Failed
""" + POD_TEMPLATE_TEXT + """Volume Claims:
  Name:          data
  StorageClass:  standard
  Labels:        <none>
  Annotations:   <none>
  Capacity:      1Gi
  Access Modes:  [ReadWriteOnce]
Events:          <none>
"""
    sts["spec"].pop("volumeClaimTemplates")
    sts["spec"]["updateStrategy"] = {"type": "OnDelete"}
    text = describe(sts, Related(events=None), NOW)
    assert "Update Strategy:    OnDelete\nPods Status:" in text
    assert "Volume Claims:     <none>\n" in text and "Events" not in text


def test_daemonset_describe_reads_like_kubectl():
    ds = {"kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default", "uid": "ds-uid"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
          "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberAvailable": 2,
                     "updatedNumberScheduled": 3}}
    text = describe(ds, Related(events=[], pods=[owned("agent-x", "Running", "ds-uid")]), NOW)
    assert text.startswith("""Name:           agent
Selector:       app=web
Node-Selector:  <none>
Labels:         <none>
Annotations:    <none>
Desired Number of Nodes Scheduled: 3
Current Number of Nodes Scheduled: 3
Number of Nodes Scheduled with Up-to-date Pods: 3
Number of Nodes Scheduled with Available Pods: 2
Number of Nodes Misscheduled: 0
Pods Status:  1 Running / 0 Waiting / 0 Succeeded / 0 Failed
"""), text
    ds["spec"]["template"] = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "nodeSelector": {"disk": "ssd"}}}
    assert "Node-Selector:  disk=ssd\n" in describe(ds, Related(events=[]), NOW)
