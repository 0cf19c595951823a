"""Real kubectl (v1.32, on PATH) against the HTTPS door: a fresh HOME per module, a kubeconfig
with the admin's certificate (or jane's, bound to nothing)."""
from __future__ import annotations

import json
import time

import pytest

from tests.conftest import DEADLINE

from . import Kubectl, https, needs_kubectl  # noqa: F401  (https is a fixture)

pytestmark = needs_kubectl

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: kc
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: c
        image: nginx
        command: ["nginx"]
"""


@pytest.fixture(scope="module")
def kubectl(https, tmp_path_factory):  # noqa: F811
    return Kubectl(https, tmp_path_factory.mktemp("home"))


def test_version_and_namespaces(kubectl):
    out = kubectl.run("get", "--raw", "/version").stdout
    assert json.loads(out)["minor"] == "32"
    assert kubectl.run("create", "namespace", "kc").stdout.strip() == "namespace/kc created"  # protobuf body
    assert "kc " in kubectl.run("get", "namespaces").stdout
    assert kubectl.run("get", "ns", "kc", "-o", "jsonpath={.status.phase}").stdout == "Active"
    again = kubectl.run("create", "namespace", "kc", check=False)
    assert again.returncode == 1 and 'Error from server (AlreadyExists): namespaces "kc" already exists' in again.stderr


def test_pods_create_get_list_describe_delete(kubectl):
    kubectl.run("-n", "kc", "run", "p1", "--image=busybox", "--restart=Never", "--", "sleep", "100")
    lines = kubectl.run("-n", "kc", "get", "pods").stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert lines[1].split()[:3] == ["p1", "0/1", "Pending"]
    wide = kubectl.run("-n", "kc", "get", "po", "-o", "wide").stdout.splitlines()[0]
    assert "NOMINATED NODE" in wide and "NODE" in wide
    assert kubectl.run("-n", "kc", "get", "pods", "-o", "name").stdout.strip() == "pod/p1"
    assert json.loads(kubectl.run("-n", "kc", "get", "pod", "p1", "-o", "json").stdout)["kind"] == "Pod"
    assert "p1" in kubectl.run("get", "pods", "-A").stdout
    assert "Name:         p1" in kubectl.run("-n", "kc", "describe", "pod", "p1").stdout
    kubectl.run("-n", "kc", "label", "pod", "p1", "x=y")
    assert kubectl.run("-n", "kc", "get", "pods", "-l", "x=y", "-o", "name").stdout.strip() == "pod/p1"
    missing = kubectl.run("-n", "kc", "get", "pod", "nope", check=False)
    assert missing.returncode == 1 and 'Error from server (NotFound): pods "nope" not found' in missing.stderr
    assert kubectl.run("-n", "kc", "delete", "pod", "p1", "--wait=false").stdout.strip() == 'pod "p1" deleted'


def test_get_watch_prints_new_pods(kubectl, https):  # noqa: F811
    kubectl.run("create", "namespace", "kw")
    proc = kubectl.popen("-n", "kw", "get", "pods", "-w", "--request-timeout=0")
    try:
        # the pod shows in kubectl's list or in its watch, whichever comes first
        kubectl.run("-n", "kw", "run", "w1", "--image=busybox", "--restart=Never", "--", "sleep", "1")
        line = ""
        deadline = time.monotonic() + DEADLINE
        while "w1" not in line:
            assert time.monotonic() < deadline, "kubectl get -w printed nothing"
            line = proc.stdout.readline()
            assert line or proc.poll() is None, proc.stderr.read()
        assert line.split()[:3] == ["w1", "0/1", "Pending"]
    finally:
        proc.terminate()
        proc.wait(DEADLINE)


def test_apply_reapply_scale_and_delete(kubectl):
    kubectl.run("create", "namespace", "kapply", check=False)
    manifest = DEPLOYMENT.replace("namespace: kc", "namespace: kapply")
    assert kubectl.run("apply", "-f", "-", input=manifest).stdout.strip() == "deployment.apps/web created"
    assert kubectl.run("apply", "-f", "-", input=manifest).stdout.strip() == "deployment.apps/web unchanged"
    changed = manifest.replace("image: nginx", "image: nginx:2")
    assert kubectl.run("apply", "-f", "-", input=changed).stdout.strip() == "deployment.apps/web configured"
    assert kubectl.run("-n", "kapply", "scale", "deployment", "web", "--replicas=3").stdout.strip() == \
        "deployment.apps/web scaled"
    assert kubectl.run("-n", "kapply", "get", "deploy", "web", "-o", "jsonpath={.spec.replicas}").stdout == "3"
    assert "deployment.apps/web" in kubectl.run("-n", "kapply", "get", "all").stdout
    ssa = kubectl.run("apply", "--server-side", "-f", "-", input=manifest, check=False)
    assert ssa.returncode != 0 and "server-side apply is not supported by kubemu" in ssa.stderr
    assert kubectl.run("-n", "kapply", "delete", "deployment", "web").stdout.strip() == \
        'deployment.apps "web" deleted'
    created = kubectl.run("-n", "kapply", "create", "deployment", "made", "--image=nginx", "--port=80", "--", "nginx")
    assert created.stdout.strip() == "deployment.apps/made created"  # a protobuf body
    assert kubectl.run("-n", "kapply", "get", "deploy", "made", "-o",
                       "jsonpath={.spec.template.spec.containers[0].ports[0].containerPort}").stdout == "80"


def test_auth_can_i_and_forbidden_user(kubectl, https, tmp_path_factory):  # noqa: F811
    assert kubectl.run("auth", "can-i", "create", "pods").stdout.strip() == "yes"
    jane = Kubectl(https, tmp_path_factory.mktemp("jane-home"), user="jane")
    refused = jane.run("get", "pods", "-n", "default", check=False)
    assert refused.returncode == 1
    assert ('Error from server (Forbidden): pods is forbidden: User "jane" cannot list resource "pods" in API '
            'group "" in the namespace "default"') in refused.stderr
    no = jane.run("auth", "can-i", "create", "pods", check=False)
    assert no.stdout.strip() == "no"


def test_api_resources_and_explain(kubectl):
    out = kubectl.run("api-resources").stdout
    assert "deployments" in out and "deploy" in out
    assert "FIELD: containers <[]Container>" in kubectl.run("explain", "pods.spec.containers").stdout


def test_logs_and_logs_follow(kubectl, https):  # noqa: F811
    kubectl.run("create", "namespace", "klogs")
    code, created = https.json("POST", "/api/v1/namespaces/klogs/pods",
                               {"metadata": {"name": "talker"},
                                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    assert code == 201
    https.json("POST", "/api/v1/namespaces/klogs/pods/talker/binding",
               {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "talker"},
                "target": {"kind": "Node", "name": "node-7"}})
    d = https.dir / "nodes" / "node-7" / "pods" / f"klogs_talker_{created['metadata']['uid']}" / "c"
    d.mkdir(parents=True)
    (d / "0.log").write_text("hello\nworld\n")
    assert kubectl.run("-n", "klogs", "logs", "talker").stdout == "hello\nworld\n"
    assert kubectl.run("-n", "klogs", "logs", "talker", "--tail=1").stdout == "world\n"
    proc = kubectl.popen("-n", "klogs", "logs", "-f", "talker")
    try:
        assert proc.stdout.readline() == "hello\n" and proc.stdout.readline() == "world\n"
        with open(d / "0.log", "a") as f:
            f.write("again\n")
        assert proc.stdout.readline() == "again\n"
        (d / "0.exit.json").write_text("{}")
        assert proc.wait(DEADLINE) == 0  # the stream ended with the container
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
