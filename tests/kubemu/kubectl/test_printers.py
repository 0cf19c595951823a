"""kubectl get's columns, computed from objects and a fixed `now` (no processes)."""
from __future__ import annotations

import datetime

from kubemu.api.resources import resolve
from kubemu.kubectl import printers
from kubemu.kubectl.output import Printer, as_list, object_name, to_json, to_yaml

NOW = datetime.datetime(2024, 1, 1, 12, 0, 0, tzinfo=datetime.timezone.utc).timestamp()


def ago(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(NOW - seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name="web", *, statuses=None, phase="Running", conditions=None, deleting=False, inits=None,
        init_statuses=None, **status) -> dict:
    meta = {"name": name, "namespace": "default", "creationTimestamp": ago(300), "labels": {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = ago(-30)
    spec = {"containers": [{"name": s["name"], "image": "nginx"} for s in statuses or [{"name": "c"}]]}
    if inits:
        spec["initContainers"] = inits
    out_status = {"phase": phase, **status}
    if statuses is not None:
        out_status["containerStatuses"] = statuses
    if conditions is not None:
        out_status["conditions"] = conditions
    if init_statuses is not None:
        out_status["initContainerStatuses"] = init_statuses
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": out_status}


def running(name="c", ready=True, restarts=0, last_finished=None):
    cs = {"name": name, "ready": ready, "restartCount": restarts, "state": {"running": {"startedAt": ago(60)}}}
    if last_finished is not None:
        cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(last_finished)}}
    return cs


def row(obj, wide=False):
    return printers.row(obj["kind"], obj, NOW, wide)


# --- pods --------------------------------------------------------------------------------------

def test_running_pod_row():
    assert row(pod(statuses=[running()])) == ["web", "1/1", "Running", "0", "5m"]


def test_pending_pod_without_statuses():
    assert row(pod(phase="Pending")) == ["web", "0/1", "Pending", "0", "5m"]


def test_waiting_reason_wins_and_restarts_say_when():
    crashing = {"name": "c", "ready": False, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(5)}}}
    assert row(pod(statuses=[crashing])) == ["web", "0/1", "CrashLoopBackOff", "3 (5s ago)", "5m"]


def test_container_creating():
    waiting = {"name": "c", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
    assert row(pod(statuses=[waiting], phase="Pending"))[2] == "ContainerCreating"


def test_terminated_reasons_completed_error_and_exit_codes():
    done = {"name": "c", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    assert row(pod(statuses=[done], phase="Succeeded"))[2] == "Completed"
    failed = {"name": "c", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}
    assert row(pod(statuses=[failed], phase="Failed"))[2] == "Error"
    bare = {"name": "c", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 137}}}
    assert row(pod(statuses=[bare]))[2] == "ExitCode:137"
    signalled = {"name": "c", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "signal": 9}}}
    assert row(pod(statuses=[signalled]))[2] == "Signal:9"


def test_completed_with_a_running_container_reads_running_or_notready():
    done = {"name": "a", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    ready = [{"type": "Ready", "status": "True"}]
    assert row(pod(statuses=[running("b"), done], conditions=ready))[1:3] == ["1/2", "Running"]
    assert row(pod(statuses=[running("b"), done], conditions=[]))[2] == "NotReady"


def test_terminating_unless_terminal():
    assert row(pod(statuses=[running()], deleting=True))[2] == "Terminating"
    done = {"name": "c", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    assert row(pod(statuses=[done], phase="Succeeded", deleting=True))[2] == "Completed"
    assert row(pod(statuses=[running()], deleting=True, reason="NodeLost"))[2] == "Unknown"


def test_init_containers_show_progress_and_failures():
    inits = [{"name": "i1", "image": "x"}, {"name": "i2", "image": "x"}]
    first_done = {"name": "i1", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    second_running = {"name": "i2", "restartCount": 0, "state": {"running": {}}}
    assert row(pod(phase="Pending", inits=inits, init_statuses=[first_done, second_running]))[2] == "Init:1/2"
    crashing = {"name": "i2", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    assert row(pod(phase="Pending", inits=inits, init_statuses=[first_done, crashing]))[2:4] == \
        ["Init:CrashLoopBackOff", "2"]
    failed = {"name": "i2", "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}
    assert row(pod(phase="Pending", inits=inits, init_statuses=[first_done, failed]))[2] == "Init:ExitCode:3"


def test_restarts_add_up_and_take_the_latest_restart():
    p = pod(statuses=[running("a", restarts=1, last_finished=600), running("b", restarts=2, last_finished=65)])
    assert row(p)[1:4] == ["2/2", "Running", "3 (65s ago)"]


def test_pod_wide_columns():
    p = pod(statuses=[running()], podIPs=[{"ip": "10.0.0.7"}], nominatedNodeName="")
    p["spec"]["nodeName"] = "node-1"
    assert row(p, wide=True)[5:] == ["10.0.0.7", "node-1", "<none>", "<none>"]
    p["status"] = {"phase": "Running", "podIP": "10.0.0.8"}
    p["spec"]["readinessGates"] = [{"conditionType": "x"}, {"conditionType": "y"}]
    p["status"]["conditions"] = [{"type": "x", "status": "True"}]
    assert row(p, wide=True)[5:] == ["10.0.0.8", "node-1", "<none>", "1/2"]
    assert printers.headers("Pod", wide=True) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                                                   "NOMINATED NODE", "READINESS GATES"]


# --- nodes and the rest -----------------------------------------------------------------------

def node(ready="True", unschedulable=False, labels=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "creationTimestamp": ago(2 * 86400 + 3 * 3600), "labels": labels or {}},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": ready}] if ready else [],
                       "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.30.0", "osImage": "Linux", "kernelVersion": "6.1"}}}


def test_node_status_roles_and_age():
    assert row(node()) == ["n1", "Ready", "<none>", "2d3h", "v1.30.0"]
    assert row(node("False"))[1] == "NotReady"
    assert row(node("Unknown"))[1] == "NotReady"
    assert row(node(None))[1] == "Unknown"
    assert row(node(unschedulable=True))[1] == "Ready,SchedulingDisabled"
    labels = {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": "",
              "kubernetes.io/role": "edge"}
    assert row(node(labels=labels))[2] == "control-plane,edge,worker"


def test_node_wide():
    assert row(node(), wide=True)[5:] == ["10.1.0.1", "<none>", "Linux", "6.1", "<unknown>"]


def test_deployment_and_replicaset_rows():
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "redis"}]}}
    d = {"kind": "Deployment", "metadata": {"name": "web", "creationTimestamp": ago(30)},
         "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
         "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    assert row(d) == ["web", "2/3", "3", "2", "30s"]
    assert row(d, wide=True)[5:] == ["a,b", "nginx,redis", "app=web"]
    rs = {"kind": "ReplicaSet", "metadata": {"name": "web-abc", "creationTimestamp": ago(30)},
          "spec": {"replicas": 3, "template": template}, "status": {"replicas": 3}}
    assert row(rs) == ["web-abc", "3", "3", "0", "30s"]


def test_namespace_lease_and_event_rows():
    ns = {"kind": "Namespace", "metadata": {"name": "default", "creationTimestamp": ago(90)}, "status": {"phase": "Active"}}
    assert row(ns) == ["default", "Active", "90s"]
    lease = {"kind": "Lease", "metadata": {"name": "n1", "creationTimestamp": ago(10)}, "spec": {"holderIdentity": "n1"}}
    assert row(lease) == ["n1", "n1", "10s"]
    event = {"kind": "Event", "metadata": {"name": "web.1"}, "type": "Warning", "reason": "BackOff",
             "message": " Back-off \n", "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{c}"},
             "source": {"component": "kubelet", "host": "n1"}, "count": 4,
             "firstTimestamp": ago(120), "lastTimestamp": ago(5)}
    assert row(event) == ["5s", "Warning", "BackOff", "pod/web", "Back-off"]
    assert row(event, wide=True) == ["5s", "Warning", "BackOff", "pod/web", "spec.containers{c}", "kubelet, n1",
                                     "Back-off", "2m", "4", "web.1"]
    assert printers.event_interval(event, NOW) == "5s (x4 over 2m)"
    assert printers.event_summary_row(event, NOW) == ["5s (x4 over 2m)", "Warning", "BackOff", "Pod/web", "Back-off"]


def test_ipaddress_rows_name_their_parent_as_kubectl_does():
    ip = {"kind": "IPAddress", "metadata": {"name": "10.96.0.1", "creationTimestamp": ago(30)},
          "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}}}
    assert printers.headers("IPAddress") == ["NAME", "PARENTREF", "AGE"]
    assert row(ip) == ["10.96.0.1", "services/default/kubernetes", "30s"]
    ip["spec"]["parentRef"] = {"group": "gateway.networking.k8s.io", "resource": "Gateways", "name": "gw"}
    assert row(ip) == ["10.96.0.1", "gateways.gateway.networking.k8s.io/gw", "30s"]
    assert row({**ip, "spec": {}}) == ["10.96.0.1", "<none>", "30s"]


def test_events_sort_by_last_seen():
    old = {"lastTimestamp": ago(50)}
    new = {"eventTime": ago(1)}
    mid = {"series": {"lastObservedTime": ago(20)}, "eventTime": ago(100)}
    assert printers.sort_events([new, old, mid]) == [old, mid, new]


# --- the printer -----------------------------------------------------------------------------

def test_table_with_namespaces_labels_and_kinds():
    pods = [pod("a", statuses=[running()]), pod("bb", statuses=[running()])]
    printer = Printer(None, all_namespaces=True, show_labels=True)
    assert printer.objects(resolve("pods"), pods, NOW) == (
        "NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE   LABELS\n"
        "default     a      1/1     Running   0          5m    app=web\n"
        "default     bb     1/1     Running   0          5m    app=web\n")
    many = Printer(None, with_kind=True, no_headers=True)
    text = many.objects(resolve("pods"), pods[:1], NOW) + many.objects(resolve("ns"), [
        {"kind": "Namespace", "metadata": {"name": "default", "creationTimestamp": ago(5)}, "status": {"phase": "Active"}}],
        NOW)
    assert text == "pod/a   1/1   Running   0     5m\n\nnamespace/default   Active   5s\n"


def test_watch_rows_keep_the_first_tables_columns():
    printer = Printer(None)
    first = printer.objects(resolve("pods"), [pod("a-long-name", statuses=[running()])], NOW)
    later = printer.objects(resolve("pods"), [pod("b", phase="Pending")], NOW)
    assert first.splitlines()[0].startswith("NAME")
    assert later.index("0/1") == first.splitlines()[1].index("1/1")
    assert printer.objects(resolve("pods"), [], NOW) == ""


def test_documents_and_names():
    p = pod("a")
    assert Printer("name").objects(resolve("pods"), [p], NOW) == "pod/a\n"
    assert object_name(resolve("deploy"), "web") == "deployment.apps/web"
    assert object_name(resolve("leases"), "n1") == "lease.coordination.k8s.io/n1"
    assert to_json({"b": 1, "a": [1]}) == '{\n    "a": [\n        1\n    ],\n    "b": 1\n}\n'
    yaml_printer = Printer("yaml")
    one, two = (yaml_printer.document(resolve("pods"), x) for x in ({"a": 1}, {"b": "x\ny\n"}))
    assert one == "a: 1\n" and two == "---\nb: |\n  x\n  y\n"
    assert to_yaml(as_list([])) == "apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: ''\n"


# --- services, endpoints, endpointslices -------------------------------------------------------

def service(name="web", type_="ClusterIP", ip="10.96.0.20", ports=None, selector=None, **spec) -> dict:
    spec = {"type": type_, "clusterIP": ip, "clusterIPs": [ip],
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}] if ports is None else ports,
            "selector": {"app": "web"} if selector is None else selector, **spec}
    return {"apiVersion": "v1", "kind": "Service", "status": {"loadBalancer": {}}, "spec": spec,
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": ago(90)}}


def test_service_headers_and_a_cluster_ip_row():
    assert printers.headers("Service") == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert printers.headers("Service", wide=True)[-1] == "SELECTOR"
    assert row(service()) == ["web", "ClusterIP", "10.96.0.20", "<none>", "80/TCP", "90s"]
    assert row(service(selector={"tier": "fe", "app": "web"}), wide=True)[-1] == "app=web,tier=fe"
    assert row(service(selector={}), wide=True)[-1] == "<none>"


def test_node_port_multi_port_and_external_ips():
    ports = [{"name": "http", "port": 80, "nodePort": 30080, "protocol": "TCP"},
             {"name": "dns", "port": 53, "nodePort": 30053, "protocol": "UDP"}]
    assert row(service(type_="NodePort", ports=ports)) == ["web", "NodePort", "10.96.0.20", "<none>",
                                                           "80:30080/TCP,53:30053/UDP", "90s"]
    assert row(service(externalIPs=["192.0.2.1", "192.0.2.2"]))[3] == "192.0.2.1,192.0.2.2"


def test_load_balancer_pending_then_its_ingress_before_external_ips():
    lb = service(type_="LoadBalancer", ports=[{"port": 443, "nodePort": 31443, "protocol": "TCP"}])
    assert row(lb)[3:5] == ["<pending>", "443:31443/TCP"]
    lb["status"]["loadBalancer"]["ingress"] = [{"ip": "192.0.2.9"}, {"hostname": "lb.example.com"}, {"ip": "192.0.2.9"}]
    assert row(lb)[3] == "192.0.2.9,lb.example.com"
    lb["spec"]["externalIPs"] = ["198.51.100.1"]
    assert row(lb)[3] == "192.0.2.9,lb.example.com,198.51.100.1"


def test_headless_external_name_and_portless_services():
    assert row(service(ip="None"))[2] == "None"
    assert row(service(ports=[]))[4] == "<none>"
    external = service(type_="ExternalName", externalName="db.example.com")
    del external["spec"]["clusterIPs"]
    assert row(external)[2:4] == ["<none>", "db.example.com"]


def endpoints(*subsets: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Endpoints", "subsets": list(subsets),
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": ago(90)}}


def test_endpoints_rows_cut_after_three():
    assert printers.headers("Endpoints") == ["NAME", "ENDPOINTS", "AGE"]
    assert row(endpoints()) == ["web", "<none>", "90s"]
    two = {"addresses": [{"ip": "10.244.1.2"}, {"ip": "10.244.2.3"}],
           "notReadyAddresses": [{"ip": "10.244.3.4"}], "ports": [{"port": 8080, "protocol": "TCP"}]}
    assert row(endpoints(two))[1] == "10.244.1.2:8080,10.244.2.3:8080"
    two_ports = dict(two, ports=[{"name": "a", "port": 8080}, {"name": "b", "port": 9090}])
    assert row(endpoints(two_ports))[1] == "10.244.1.2:8080,10.244.2.3:8080,10.244.1.2:9090 + 1 more..."
    portless = {"addresses": [{"ip": f"10.244.0.{i}"} for i in range(1, 6)]}
    assert row(endpoints(portless))[1] == "10.244.0.1,10.244.0.2,10.244.0.3 + 2 more..."
    assert printers.format_endpoints(endpoints({"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]})) \
        == "[fd00::1]:80"


def endpointslice(ports, *addresses) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": "web-abcde", "namespace": "default", "creationTimestamp": ago(90)},
            "ports": ports, "endpoints": [{"addresses": [a], "conditions": {"ready": i % 2 == 0}}
                                          for i, a in enumerate(addresses)]}


def test_endpointslice_rows():
    assert printers.headers("EndpointSlice") == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert row(endpointslice([{"name": "http", "port": 8080}], "10.244.1.2", "10.244.2.3")) == \
        ["web-abcde", "IPv4", "8080", "10.244.1.2,10.244.2.3", "90s"]
    assert row(endpointslice([]))[2:4] == ["<unset>", "<unset>"]
    many = endpointslice([{"port": 1}, {"name": "x"}, {}, {"port": 4}], *(f"10.0.0.{i}" for i in range(5)))
    assert row(many)[2:4] == ["1,x,* + 1 more...", "10.0.0.0,10.0.0.1,10.0.0.2 + 2 more..."]


def test_the_kind_prefix_of_several_kinds():
    out = Printer(None, with_kind=True).objects(resolve("svc"), [service()], NOW)
    assert out.splitlines()[1].split()[0] == "service/web"


# --- workloads beyond Deployments, storage, disruption budgets ---------------------------------

TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "redis"}]}}


def test_statefulset_rows():
    sts = {"kind": "StatefulSet", "metadata": {"name": "web", "creationTimestamp": ago(90)},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
           "status": {"replicas": 3, "readyReplicas": 2}}
    assert printers.headers("StatefulSet") == ["NAME", "READY", "AGE"]
    assert printers.headers("StatefulSet", wide=True)[3:] == ["CONTAINERS", "IMAGES"]
    assert row(sts) == ["web", "2/3", "90s"]
    assert row(sts, wide=True) == ["web", "2/3", "90s", "a,b", "nginx,redis"]


def test_daemonset_rows():
    ds = {"kind": "DaemonSet", "metadata": {"name": "agent", "creationTimestamp": ago(60)},
          "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
          "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                     "updatedNumberScheduled": 3, "numberAvailable": 2}}
    assert printers.headers("DaemonSet") == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE",
                                             "AVAILABLE", "NODE SELECTOR", "AGE"]
    assert row(ds) == ["agent", "3", "3", "2", "3", "2", "<none>", "60s"]
    ds["spec"]["template"] = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "nodeSelector": {"disk": "ssd",
                                                                                        "arch": "x"}}}
    assert row(ds, wide=True)[6:] == ["arch=x,disk=ssd", "60s", "a,b", "nginx,redis", "app=web"]


def test_controllerrevision_rows():
    rev = {"kind": "ControllerRevision", "revision": 2,
           "metadata": {"name": "web-6d4b9c8f7", "creationTimestamp": ago(5), "ownerReferences": [
               {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u", "controller": True}]}}
    assert printers.headers("ControllerRevision") == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert row(rev) == ["web-6d4b9c8f7", "statefulset.apps/web", "2", "5s"]
    rev["metadata"]["ownerReferences"] = []
    assert row(rev)[1] == "<none>"


def job(conditions=(), deleting=False, **spec_and_status):
    status = {k: spec_and_status.pop(k) for k in ("succeeded", "startTime", "completionTime")
              if k in spec_and_status}
    status["conditions"] = [{"type": t, "status": s} for t, s in conditions]
    meta = {"name": "pi", "creationTimestamp": ago(300)}
    if deleting:
        meta["deletionTimestamp"] = ago(1)
    return {"kind": "Job", "metadata": meta, "status": status,
            "spec": {"template": TEMPLATE, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                     **spec_and_status}}


def test_job_rows_status_completions_duration():
    assert printers.headers("Job") == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert row(job(completions=5, parallelism=2, succeeded=3, startTime=ago(125))) == [
        "pi", "Running", "3/5", "2m5s", "5m"]
    done = job([("Complete", "True")], completions=1, succeeded=1, startTime=ago(200),
               completionTime=ago(170))
    assert row(done)[:4] == ["pi", "Complete", "1/1", "30s"]
    assert row(job([("Failed", "True")], completions=1))[1:4] == ["Failed", "0/1", ""]
    assert row(job([("Suspended", "True")], completions=1))[1] == "Suspended"
    assert row(job([("Suspended", "True")], deleting=True))[1] == "Terminating"
    assert row(job([("Complete", "False"), ("FailureTarget", "True")]))[1] == "FailureTarget"
    assert row(job([("SuccessCriteriaMet", "True")]))[1] == "SuccessCriteriaMet"
    assert row(job(parallelism=3, succeeded=1))[2] == "1/1 of 3"  # a work queue
    assert row(job(parallelism=1))[2] == "0/1"
    assert row(job(completions=1), wide=True)[5:] == ["a,b", "nginx,redis",
                                                      "batch.kubernetes.io/controller-uid=u"]


def test_cronjob_rows():
    cj = {"kind": "CronJob", "metadata": {"name": "hello", "creationTimestamp": ago(3600)},
          "spec": {"schedule": "*/5 * * * *", "suspend": False,
                   "jobTemplate": {"spec": {"template": TEMPLATE}}},
          "status": {"active": [{"name": "hello-1"}], "lastScheduleTime": ago(65)}}
    assert printers.headers("CronJob") == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE",
                                           "LAST SCHEDULE", "AGE"]
    assert row(cj) == ["hello", "*/5 * * * *", "<none>", "False", "1", "65s", "60m"]
    cj["spec"].update(timeZone="Europe/Paris", suspend=True)
    cj["status"] = {}
    assert row(cj, wide=True) == ["hello", "*/5 * * * *", "Europe/Paris", "True", "0", "<none>", "60m",
                                  "a,b", "nginx,redis", "<none>"]


def test_persistentvolume_rows():
    pv = {"kind": "PersistentVolume", "metadata": {"name": "pvc-1234", "creationTimestamp": ago(10)},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                   "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard",
                   "claimRef": {"namespace": "default", "name": "data-web-0"}, "volumeMode": "Filesystem"},
          "status": {"phase": "Bound"}}
    assert printers.headers("PersistentVolume") == [
        "NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS",
        "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"]
    assert row(pv, wide=True) == ["pvc-1234", "1Gi", "RWO,RWX", "Delete", "Bound", "default/data-web-0",
                                  "standard", "<unset>", "", "10s", "Filesystem"]
    pv["metadata"]["deletionTimestamp"] = ago(1)
    del pv["spec"]["claimRef"]
    assert row(pv)[4:6] == ["Terminating", ""]


def test_persistentvolumeclaim_rows():
    pvc = {"kind": "PersistentVolumeClaim", "metadata": {"name": "data-web-0", "creationTimestamp": ago(10)},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                    "storageClassName": "standard"},
           "status": {"phase": "Pending"}}
    assert printers.headers("PersistentVolumeClaim") == [
        "NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"]
    assert row(pvc) == ["data-web-0", "Pending", "", "", "", "standard", "<unset>", "10s"]
    pvc["spec"]["volumeName"] = "pvc-1234"
    pvc["status"] = {"phase": "Bound", "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"]}
    assert row(pvc, wide=True) == ["data-web-0", "Bound", "pvc-1234", "2Gi", "RWO", "standard", "<unset>",
                                   "10s", "<unset>"]


def test_storageclass_rows():
    sc = {"kind": "StorageClass", "metadata": {"name": "standard", "creationTimestamp": ago(10), "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}},
          "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}
    assert printers.headers("StorageClass") == ["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE",
                                                "ALLOWVOLUMEEXPANSION", "AGE"]
    assert row(sc) == ["standard (default)", "rancher.io/local-path", "Delete", "WaitForFirstConsumer", "false",
                       "10s"]
    bare = {"kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "x", "allowVolumeExpansion": True}
    assert row(bare)[:5] == ["fast", "x", "Delete", "Immediate", "true"]


def test_poddisruptionbudget_rows():
    pdb = {"kind": "PodDisruptionBudget", "metadata": {"name": "web", "creationTimestamp": ago(10)},
           "spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}}
    assert printers.headers("PodDisruptionBudget") == ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE",
                                                       "ALLOWED DISRUPTIONS", "AGE"]
    assert row(pdb) == ["web", "2", "N/A", "1", "10s"]
    pdb["spec"] = {"maxUnavailable": "25%"}
    pdb["status"] = {}
    assert row(pdb) == ["web", "N/A", "25%", "0", "10s"]


def test_certificate_signing_requests_print_as_kubectls():
    csr = {"kind": "CertificateSigningRequest", "metadata": {"name": "node-csr-x",
                                                             "creationTimestamp": "2024-01-01T11:58:00Z"},
           "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                    "username": "system:bootstrap:abcdef", "expirationSeconds": 3600},
           "status": {"conditions": [{"type": "Approved", "status": "True"}]}}
    assert printers.headers("CertificateSigningRequest") == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR",
                                                             "REQUESTEDDURATION", "CONDITION"]
    assert printers.row("CertificateSigningRequest", csr, NOW) == [
        "node-csr-x", "2m", "kubernetes.io/kube-apiserver-client-kubelet", "system:bootstrap:abcdef", "60m",
        "Approved"]
    pending = {**csr, "spec": {**csr["spec"], "expirationSeconds": None}, "status": {}}
    assert printers.row("CertificateSigningRequest", pending, NOW)[4:] == ["<none>", "Pending"]
