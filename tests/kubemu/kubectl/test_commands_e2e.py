"""The kubectl-style commands end to end, against a real 3-replica store and apiserver.

There is no controller-manager or kubelet here: pods stay Pending unless a test writes their
status, and a Deployment's ReplicaSets are written by the test when it needs them.
"""
from __future__ import annotations

import copy
import itertools
import queue
import re
import signal
import subprocess
import threading
import time

import pytest
import yaml
from click.testing import CliRunner

from kubemu.apiclient import SyncApiClient
from kubemu.cli import main
from kubemu.events import make_event, object_reference
from tests.components.apiserver import REPO, api  # noqa: F401  (api is a fixture)
from tests.components.apiserver.rest import Kubectl, https, needs_kubectl  # noqa: F401  (https is a fixture)
from tests.conftest import DEADLINE, python, spawn_marked, terminate

_names = itertools.count()

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "c", "image": "nginx", "command": ["nginx"],
                                                   "env": [{"name": "A", "value": "1"}]}]}}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "labels": {"app": "solo"}},
       "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1000"]}]}}


def kubemu(api, *args: str, input: str | None = None):
    """Run `kubemu --server <the test apiserver> ARGS` in-process; the result has stdout,
    stderr and exit_code."""
    return CliRunner().invoke(main, ["--server", api.endpoint, *args], input=input, catch_exceptions=False)


def ok(api, *args: str, input: str | None = None) -> str:
    result = kubemu(api, *args, input=input)
    assert result.exit_code == 0, f"kubemu {' '.join(args)}: {result.stdout}{result.stderr}"
    return result.stdout


def failed(api, *args: str, input: str | None = None) -> str:
    result = kubemu(api, *args, input=input)
    assert result.exit_code == 1, f"kubemu {' '.join(args)} should fail: {result.stdout}{result.stderr}"
    return result.stderr


@pytest.fixture
def ns(api) -> str:
    """A namespace of the test's own."""
    name = f"t{next(_names)}"
    api.call("create", resource="namespaces", object={"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": name}})
    return name


def write(path, *docs: dict):
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_apply_get_describe_scale_delete(api, ns, tmp_path):
    app = write(tmp_path / "app.yaml", DEPLOYMENT, POD)
    assert ok(api, "apply", "-f", app, "-n", ns) == "deployment.apps/web created\npod/solo created\n"
    without_age = [r[:-1] for r in rows(ok(api, "get", "deploy,pods", "-n", ns))]
    assert without_age == [["NAME", "READY", "UP-TO-DATE", "AVAILABLE"], ["deployment.apps/web", "0/2", "0", "0"], [],
                           ["NAME", "READY", "STATUS", "RESTARTS"], ["pod/solo", "0/1", "Pending", "0"]]
    assert yaml.safe_load(ok(api, "get", "pod", "solo", "-n", ns, "-o", "yaml"))["metadata"]["name"] == "solo"
    listed = yaml.safe_load(ok(api, "get", "pods", "-n", ns, "-o", "json"))
    assert listed["kind"] == "List" and [p["metadata"]["name"] for p in listed["items"]] == ["solo"]
    assert ok(api, "get", "pods", "-l", "app=solo", "-n", ns, "-o", "name") == "pod/solo\n"
    assert ok(api, "get", "pods", "--field-selector", "status.phase=Running", "-n", ns) == ""

    # what a kubelet would report, and an event about it
    pod = api.call("get", resource="pods", namespace=ns, name="solo")
    pod["status"] = {"phase": "Running", "podIP": "10.0.0.9", "conditions": [{"type": "Ready", "status": "True"}],
                     "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0,
                                            "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}]}
    api.call("update_status", resource="pods", namespace=ns, object=pod)
    event = make_event(object_reference(pod), "Normal", "Started", "Started container c", "kubelet", "node-0",
                       time.time(), "x1")
    api.call("create", resource="events", namespace=ns, object=event)
    wide = rows(ok(api, "get", "pods", "-n", ns, "-o", "wide"))
    assert wide[1][:3] == ["solo", "1/1", "Running"] and wide[1][5] == "10.0.0.9"
    described = ok(api, "describe", "pod", "solo", "-n", ns)
    assert described.startswith(f"Name:         solo\nNamespace:    {ns}\n")
    assert "Status:       Running\n" in described and "    State:          Running\n" in described
    assert described.splitlines()[-3:] == ["  Type    Reason   Age   From     Message",
                                           "  ----    ------   ----  ----     -------",
                                           described.splitlines()[-1]]
    assert described.splitlines()[-1].split()[:2] == ["Normal", "Started"]
    assert "Replicas:               2 desired | 0 updated" in ok(api, "describe", "deployment/web", "-n", ns)
    assert rows(ok(api, "events", "-n", ns))[1][1:] == ["Normal", "Started", "Pod/solo", "Started", "container", "c"]

    assert ok(api, "apply", "-f", app, "-n", ns) == "deployment.apps/web unchanged\npod/solo unchanged\n"
    assert ok(api, "scale", "deployment/web", "--replicas", "4", "-n", ns) == "deployment.apps/web scaled\n"
    assert rows(ok(api, "get", "deploy", "web", "-n", ns))[1][1] == "0/4"
    changed = copy.deepcopy(DEPLOYMENT)
    del changed["spec"]["replicas"]  # no longer managed here: the last apply set it, so it goes
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    assert ok(api, "apply", "-f", "-", "-n", ns, input=yaml.safe_dump(changed)) == "deployment.apps/web configured\n"
    live = api.call("get", resource="deployments", namespace=ns, name="web")
    assert live["spec"]["replicas"] == 1  # defaulted again
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"

    assert ok(api, "delete", "-f", app, "-n", ns) == 'deployment.apps "web" deleted\npod "solo" deleted\n'
    result = kubemu(api, "get", "deploy,pods", "-n", ns)
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == f"No resources found in {ns} namespace.\n"


def test_errors_read_like_kubectl(api, ns, tmp_path):
    assert failed(api, "get", "pod", "nope", "-n", ns) == 'Error from server (NotFound): pods "nope" not found\n'
    assert failed(api, "describe", "deploy", "nope", "-n", ns) == \
        'Error from server (NotFound): deployments.apps "nope" not found\n'
    assert failed(api, "delete", "pod", "nope", "-n", ns) == 'Error from server (NotFound): pods "nope" not found\n'
    assert failed(api, "get", "foo") == 'error: the server doesn\'t have a resource type "foo"\n'

    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   labels: oops\n")
    assert failed(api, "apply", "-f", str(bad)).startswith(
        f"error: error parsing {bad}: error converting YAML to JSON: yaml: line 5: mapping values are not allowed")
    foo = write(tmp_path / "foo.yaml", {"apiVersion": "v1", "kind": "Foo", "metadata": {"name": "x"}})
    assert failed(api, "apply", "-f", foo).startswith(
        f'error: resource mapping not found for name: "x" namespace: "" from "{foo}": no matches for kind "Foo" '
        'in version "v1"\n')

    invalid = copy.deepcopy(DEPLOYMENT)
    invalid["spec"]["replicas"] = -1
    assert failed(api, "apply", "-f", write(tmp_path / "inv.yaml", invalid), "-n", ns) == \
        'The Deployment "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0\n'
    assert api.call("list", resource="deployments", namespace=ns)["items"] == []

    pod_file = write(tmp_path / "pod.yaml", POD)
    assert ok(api, "create", "-f", pod_file, "-n", ns) == "pod/solo created\n"
    assert failed(api, "create", "-f", pod_file, "-n", ns) == \
        f'Error from server (AlreadyExists): error when creating "{pod_file}": pods "solo" already exists\n'
    assert failed(api, "scale", "deploy", "nope", "--replicas", "1", "-n", ns) == \
        'Error from server (NotFound): deployments.apps "nope" not found\n'


def test_apply_applies_every_document_it_can(api, ns, tmp_path):
    """A kind kubemu does not serve, or a document that is not an object, is an error of its
    own: the other documents are applied (kubectl's ContinueOnError), then exit 1."""
    crd = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    mixed = write(tmp_path / "mixed.yaml", DEPLOYMENT, crd, POD)
    result = kubemu(api, "apply", "-f", mixed, "-n", ns)
    assert result.exit_code == 1
    assert result.stdout == "deployment.apps/web created\npod/solo created\n"
    assert result.stderr == (f'error: resource mapping not found for name: "w" namespace: "" from "{mixed}": '
                             'no matches for kind "Widget" in version "example.com/v1"\n'
                             'ensure CRDs are installed first\n')
    other = copy.deepcopy(crd)
    other["kind"] = "Gadget"
    twice = write(tmp_path / "twice.yaml", other, crd)
    result = kubemu(api, "create", "-f", twice, "-f", mixed, "-n", ns)
    assert result.exit_code == 1 and result.stdout == ""
    # several errors: one per line, without the "error: " of a single one (kubectl's MultipleErrors)
    assert result.stderr.splitlines() == [
        f'resource mapping not found for name: "w" namespace: "" from "{twice}": no matches for kind "Gadget" in '
        'version "example.com/v1"', "ensure CRDs are installed first",
        f'resource mapping not found for name: "w" namespace: "" from "{twice}": no matches for kind "Widget" in '
        'version "example.com/v1"', "ensure CRDs are installed first",
        f'resource mapping not found for name: "w" namespace: "" from "{mixed}": no matches for kind "Widget" in '
        'version "example.com/v1"', "ensure CRDs are installed first",
        f'Error from server (AlreadyExists): error when creating "{mixed}": deployments.apps "web" already exists',
        f'Error from server (AlreadyExists): error when creating "{mixed}": pods "solo" already exists']
    result = kubemu(api, "delete", "-f", mixed, "-n", ns, "--wait=false")
    assert result.exit_code == 1
    assert result.stdout == 'deployment.apps "web" deleted\npod "solo" deleted\n'
    assert result.stderr.startswith('error: resource mapping not found for name: "w"')
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n")
    assert failed(api, "apply", "-f", str(empty)) == "error: no objects passed to apply\n"


def test_apply_of_a_manifest_nested_too_deep_is_one_error_naming_the_file(api, ns, tmp_path):
    """JSON nested 10,000 deep once ended `kubemu apply` with a RecursionError traceback."""
    deep = tmp_path / "deep.json"
    deep.write_text('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "deep"}, "spec": '
                    + "[" * 10_000 + "]" * 10_000 + "}")
    assert failed(api, "apply", "-f", str(deep), "-n", ns) == \
        f"error: error parsing {deep}: nested more than 100 levels deep (the limit) at line 1 column 174\n"
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: deep}\nspec:\n  x:\n  " + "- " * 10_000 + "x\n")
    assert failed(api, "apply", "-f", str(deep_yaml), "-n", ns) == \
        f"error: error parsing {deep_yaml}: nested more than 100 levels deep (the limit) at line 6\n"
    assert api.call("list", resource="pods", namespace=ns)["items"] == []


def test_no_cluster_and_no_server(api, tmp_path):
    result = CliRunner().invoke(main, ["--state-dir", str(tmp_path), "get", "pods"], env={"KUBEMU_SERVER": None})
    assert result.exit_code == 1 and result.stderr.startswith("error: no apiserver known")
    unreachable = f"ipc://{tmp_path}/nothing.sock"
    result = CliRunner().invoke(main, ["--server", unreachable, "get", "pods"])
    assert result.exit_code == 1
    assert result.stderr == (f"The connection to the server {unreachable} was refused - did you specify the right "
                             "host or port?\n")


def test_a_server_list_reaches_the_live_apiserver_and_a_bad_entry_is_one_error(api, tmp_path):
    unreachable = f"ipc://{tmp_path}/nothing.sock"
    result = CliRunner().invoke(main, ["--server", f"{unreachable},{api.endpoint}", "get", "namespace", "default"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1].split()[:2] == ["default", "Active"]
    result = CliRunner().invoke(main, ["--server", f"{api.endpoint},http://x", "get", "pods"],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr == (f"error: bad server '{api.endpoint},http://x': unsupported endpoint 'http://x': "
                             "use ipc://, tcp:// or inproc://\n")


def test_delete_waits_for_a_pod_to_terminate(api, ns):
    pod = copy.deepcopy(POD)
    api.call("create", resource="pods", namespace=ns, object=pod)
    api.call("bind", name="solo", node="node-0", namespace=ns)  # bound, and no kubelet to stop it
    result = kubemu(api, "delete", "pod", "solo", "-n", ns, "--timeout", "1s")
    assert result.exit_code == 1 and result.stdout == 'pod "solo" deleted\n'
    assert result.stderr == "error: timed out waiting for the condition on pods/solo\n"
    assert rows(ok(api, "get", "pods", "-n", ns))[1][2] == "Terminating"
    assert ok(api, "delete", "pod", "solo", "-n", ns, "--grace-period=0", "--force") == 'pod "solo" force deleted\n'
    assert kubemu(api, "get", "pods", "-n", ns).stderr == f"No resources found in {ns} namespace.\n"


def test_rollout_status_history_and_undo(api, ns):
    deployment = api.call("create", resource="deployments", namespace=ns, object=copy.deepcopy(DEPLOYMENT))
    for revision, image in ((1, "nginx:1"), (2, "nginx")):  # what the deployment controller would write
        template = copy.deepcopy(deployment["spec"]["template"])
        template["metadata"]["labels"]["pod-template-hash"] = f"h{revision}"
        template["spec"]["containers"][0]["image"] = image
        api.call("create", resource="replicasets", namespace=ns, object={
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"web-h{revision}", "labels": template["metadata"]["labels"],
                         "annotations": {"deployment.kubernetes.io/revision": str(revision),
                                         "kubernetes.io/change-cause": f"image {image}"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                              "uid": deployment["metadata"]["uid"], "controller": True}]},
            "spec": {"replicas": 2 if revision == 2 else 0, "selector": {"matchLabels": template["metadata"]["labels"]},
                     "template": template}})
    deployment["metadata"].setdefault("annotations", {})["deployment.kubernetes.io/revision"] = "2"
    deployment = api.call("update", resource="deployments", namespace=ns, object=deployment)
    deployment["status"] = {"observedGeneration": deployment["metadata"]["generation"], "replicas": 2,
                            "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1}
    api.call("update_status", resource="deployments", namespace=ns, object=deployment)

    assert ok(api, "rollout", "status", "deployment/web", "-n", ns, "--watch=false") == \
        'Waiting for deployment "web" rollout to finish: 1 of 2 updated replicas are available...\n'
    result = kubemu(api, "rollout", "status", "deployment/web", "-n", ns, "--timeout", "1s")
    assert result.exit_code == 1 and result.stderr == "error: timed out waiting for the condition\n"

    def finish():  # on a client of its own: the test's is not for other threads
        with SyncApiClient(api.endpoint) as client:
            current = client.get("deployments", "web", ns)
            current["status"].update(readyReplicas=2, availableReplicas=2)
            client.update_status("deployments", current, ns)
    timer = threading.Timer(0.5, finish)
    timer.start()
    try:
        out = ok(api, "rollout", "status", "deploy", "web", "-n", ns, f"--timeout={DEADLINE}s")
    finally:
        timer.join()
    assert out.splitlines()[-1] == 'deployment "web" successfully rolled out'

    assert ok(api, "rollout", "history", "deployment/web", "-n", ns) == (
        "deployment.apps/web \nREVISION  CHANGE-CAUSE\n1         image nginx:1\n2         image nginx\n\n")
    assert ok(api, "rollout", "undo", "deployment/web", "-n", ns) == "deployment.apps/web rolled back\n"
    live = api.call("get", resource="deployments", namespace=ns, name="web")
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    assert "pod-template-hash" not in live["spec"]["template"]["metadata"]["labels"]
    assert live["metadata"]["annotations"]["kubernetes.io/change-cause"] == "image nginx:1"
    assert failed(api, "rollout", "undo", "deployment/web", "-n", ns, "--to-revision", "7") == \
        "error: unable to find specified revision 7 in history\n"


def test_get_watch_prints_a_row_per_change(api, ns):
    api.call("create", resource="pods", namespace=ns, object=dict(copy.deepcopy(POD), metadata={"name": "a"}))
    proc = spawn_marked([python(), "-m", "kubemu.cli", "--server", api.endpoint, "get", "pods", "-n", ns, "-w"],
                        api.dir, cwd=str(REPO), env={"PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def next_row() -> list[str]:
        return lines.get(timeout=DEADLINE).split()

    try:
        assert next_row() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert next_row()[:3] == ["a", "0/1", "Pending"]
        api.call("create", resource="pods", namespace=ns, object=dict(copy.deepcopy(POD), metadata={"name": "b"}))
        assert next_row()[:3] == ["b", "0/1", "Pending"]
        b = api.call("get", resource="pods", namespace=ns, name="b")
        b["status"]["phase"] = "Running"
        api.call("update_status", resource="pods", namespace=ns, object=b)
        assert next_row()[:3] == ["b", "0/1", "Running"]
        proc.send_signal(signal.SIGINT)  # Ctrl-C ends a watch, quietly, as it ends kubectl's
        assert proc.wait(DEADLINE) == -signal.SIGINT
        assert proc.stderr.read() == ""
    finally:
        terminate(proc)


def test_watch_timeout_bounds_get_and_events(api, ns):
    started = time.monotonic()
    assert ok(api, "get", "pods", "-n", ns, "-w", "--watch-timeout", "0.5") == ""
    assert ok(api, "events", "-n", ns, "-w", "--watch-timeout", "0.5") == ""
    assert time.monotonic() - started < DEADLINE


# --- Services, read by kubemu and by real kubectl from the same apiserver -----------------------

WEB = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "template": {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 8000, "name": "http"}]}]}}}}
SERVICES = [
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"app": "web"}},
     "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "np"},
     "spec": {"type": "NodePort", "selector": {"app": "web"},
              "ports": [{"name": "a", "port": 80, "nodePort": 30080}, {"name": "b", "port": 53, "protocol": "UDP"}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"},
     "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 443, "targetPort": 8443}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "headless"},
     "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 80}]}},
]


def endpoint_objects(ns: str) -> tuple[dict, dict]:
    """What the endpoint controllers would write for `web`: 4 ready pods and one that is not."""
    ips = [f"10.244.{i}.2" for i in range(1, 6)]
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": ns},
                 "subsets": [{"addresses": [{"ip": ip} for ip in ips[:4]], "notReadyAddresses": [{"ip": ips[4]}],
                              "ports": [{"port": 8000, "protocol": "TCP"}]}]}
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
              "metadata": {"name": "web-x1", "namespace": ns, "labels": {"kubernetes.io/service-name": "web"}},
              "ports": [{"name": "", "port": 8000, "protocol": "TCP"}],
              "endpoints": [{"addresses": [ip], "conditions": {"ready": i < 4}, "nodeName": "node-1",
                             "targetRef": {"kind": "Pod", "name": f"web-{i}", "namespace": ns}}
                            for i, ip in enumerate(ips)]}
    return endpoints, slice_


def cells(text: str, drop: str = "AGE") -> list[list[str]]:
    """A table's cells (columns are 2+ spaces apart), without the column `drop` of each of its
    tables (times may differ between two commands)."""
    out: list[list[str]] = []
    at = None
    for line in text.splitlines():
        row = re.split(r"\s{2,}", line.strip()) if line.strip() else []
        if not out or not out[-1]:  # a table's header
            at = row.index(drop) if drop in row else None
        out.append([c for i, c in enumerate(row) if i != at])
    return out


@needs_kubectl
def test_services_read_as_real_kubectl_reads_them(https, tmp_path):  # noqa: F811
    kubectl = Kubectl(https, tmp_path / "home")
    ns = "svc"
    ok(https, "create", "-f", write(tmp_path / "ns.yaml", {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": ns}}))
    app = write(tmp_path / "app.yaml", WEB, *SERVICES)
    assert ok(https, "apply", "-f", app, "-n", ns).splitlines() == [
        "deployment.apps/web created", "service/web created", "service/np created", "service/lb created",
        "service/headless created"]
    assert ok(https, "apply", "-f", app, "-n", ns).splitlines() == [
        "deployment.apps/web unchanged", "service/web unchanged", "service/np unchanged", "service/lb unchanged",
        "service/headless unchanged"]
    endpoints, slice_ = endpoint_objects(ns)
    https.call("create", resource="endpoints", namespace=ns, object=endpoints)
    https.call("create", resource="endpointslices", namespace=ns, object=slice_)

    for args in (["get", "svc"], ["get", "svc", "-o", "wide"], ["get", "ep"], ["get", "endpointslices"],
                 ["get", "svc", "web", "np"], ["get", "all"]):
        ours, theirs = ok(https, *args, "-n", ns), kubectl.run(*args, "-n", ns).stdout
        assert cells(ours) == cells(theirs), f"{args}:\n{ours}\n{theirs}"
    table = {r[0]: r for r in cells(ok(https, "get", "svc", "-n", ns))}
    assert table["headless"][2] == "None" and table["lb"][3] == "<pending>"
    assert table["np"][4].startswith("80:30080/TCP,53:") and table["np"][4].endswith("/UDP")
    assert cells(ok(https, "get", "ep", "-n", ns))[1] == \
        ["web", "10.244.1.2:8000,10.244.2.2:8000,10.244.3.2:8000 + 1 more..."]
    for args in (["svc", "web"], ["svc", "np"], ["svc", "lb"], ["svc", "headless"], ["ep", "web"],
                 ["endpointslice", "web-x1"]):
        ours, theirs = ok(https, "describe", *args, "-n", ns), kubectl.run("describe", *args, "-n", ns)
        assert ours == theirs.stdout, f"{args}:\n{ours}\n{theirs.stdout}"
    listed = ok(https, "get", "all", "-n", ns)
    assert [r[0] for r in cells(listed) if r and "/" in r[0]] == \
        ["service/headless", "service/lb", "service/np", "service/web", "deployment.apps/web"]


@needs_kubectl
def test_expose_makes_the_service_kubectl_makes(https, tmp_path):  # noqa: F811
    kubectl = Kubectl(https, tmp_path / "home")
    ns = "expose"
    https.call("create", resource="namespaces", object={"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": ns}})
    ok(https, "apply", "-f", write(tmp_path / "web.yaml", WEB), "-n", ns)
    bare = copy.deepcopy(DEPLOYMENT)
    bare["metadata"]["name"] = "bare"
    ok(https, "apply", "-f", write(tmp_path / "bare.yaml", bare), "-n", ns)
    for flags in (["--port", "80", "--target-port", "http"], ["--type", "NodePort"],
                  ["--port", "8080", "--protocol", "UDP", "--selector", "app=web,tier=fe", "-l", "x=y"]):
        assert ok(https, "expose", "deployment", "web", "--name", "ours", "-n", ns, *flags) == "service/ours exposed\n"
        kubectl.run("expose", "deployment", "web", "--name", "theirs", "-n", ns, *flags)
        made = {name: https.call("get", resource="services", namespace=ns, name=name) for name in ("ours", "theirs")}
        for svc in made.values():
            for volatile in ("clusterIP", "clusterIPs"):
                svc["spec"].pop(volatile, None)
            for port in svc["spec"]["ports"]:
                port.pop("nodePort", None)
        assert made["ours"]["spec"] == made["theirs"]["spec"], flags
        assert made["ours"]["metadata"].get("labels") == made["theirs"]["metadata"].get("labels"), flags
        for name in ("ours", "theirs"):
            https.call("delete", resource="services", namespace=ns, name=name)
    for args in (["deployment", "bare"], ["deployment", "nope"], ["namespace", ns], ["deployment"]):
        theirs = kubectl.run("expose", *args, "-n", ns, check=False)
        assert theirs.returncode == 1
        assert failed(https, "expose", *args, "-n", ns).replace("kubemu", "kubectl") == theirs.stderr, args


# --- workloads, storage and disruption budgets, read by kubemu and by real kubectl --------------

def _workload_objects(ns: str) -> list[tuple[str, dict, dict | None]]:
    """(resource, object, the status a controller would write) for each of the new kinds."""
    template = {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres"}]}}
    job_template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}
    meta = {"name": "db", "namespace": ns}
    return [
        ("statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": {
            "replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": template,
            "updateStrategy": {"rollingUpdate": {"partition": 1}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}},
         {"replicas": 2, "readyReplicas": 1, "currentReplicas": 2}),
        ("daemonsets", {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {
            "selector": {"matchLabels": {"app": "db"}},
            "template": {**template, "spec": {**template["spec"], "nodeSelector": {"disk": "ssd"}}}}},
         {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3,
          "numberAvailable": 2, "numberMisscheduled": 0}),
        ("jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
            "completions": 5, "parallelism": 2, "template": job_template}},
         {"startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:01:05Z", "succeeded": 5,
          "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}),
        ("cronjobs", {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": {
            "schedule": "*/5 * * * *", "timeZone": "Europe/Paris", "jobTemplate": {"spec": {"template": job_template}}}},
         {"active": [{"kind": "Job", "name": "db-1", "namespace": ns}]}),
        ("poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
                                  "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}},
         {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}),
        ("persistentvolumeclaims", {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "standard", "volumeName": "pv-db"}},
         {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}),
        ("persistentvolumes", {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-db"}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "standard", "hostPath": {"path": "/tmp/pv-db", "type": "DirectoryOrCreate"},
            "claimRef": {"namespace": ns, "name": "db"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}}}},
         {"phase": "Bound"}),
        ("storageclasses", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {
            "name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"}, None),
    ]


def columns(text: str, drop: str = "AGE") -> list[list[str]]:
    """A table's cells cut at its header's column starts (so empty cells stay in place), without
    the column `drop`."""
    lines = text.splitlines()
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", lines[0])] if lines else []
    heads = [lines[0][a:b].strip() for a, b in zip(starts, starts[1:] + [None])] if lines else []
    return [[line[a:b].strip() for a, b, h in zip(starts, starts[1:] + [None], heads) if h != drop]
            for line in lines]


@needs_kubectl
def test_workloads_read_as_real_kubectl_reads_them(https, tmp_path):  # noqa: F811
    kubectl = Kubectl(https, tmp_path / "home")
    ns = "workloads"
    https.call("create", resource="namespaces", object={"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": ns}})
    for resource, obj, status in _workload_objects(ns):
        namespace = ns if obj["metadata"].get("namespace") else None
        created = https.call("create", resource=resource, namespace=namespace, object=obj)
        if status is not None:
            created["status"] = status
            https.call("update_status", resource=resource, namespace=namespace, object=created)
    for resource, obj, _ in _workload_objects(ns):
        scope = ["-n", ns] if obj["metadata"].get("namespace") else []
        for args in (["get", resource], ["get", resource, "-o", "wide"]):
            ours, theirs = ok(https, *args, *scope), kubectl.run(*args, *scope).stdout
            assert columns(ours) == columns(theirs), f"{args}:\n{ours}\n{theirs}"
        if resource in ("statefulsets", "daemonsets", "jobs", "cronjobs", "poddisruptionbudgets",
                        "persistentvolumeclaims", "persistentvolumes"):
            ours = ok(https, "describe", resource, obj["metadata"]["name"], *scope)
            theirs = kubectl.run("describe", resource, obj["metadata"]["name"], *scope).stdout
            assert ours == theirs, f"{resource}:\n{ours}\n{theirs}"
