"""Real kubectl (and the official Python client) against a real `kubemu up`, through the
apiserver's HTTPS door with kubeadm's certificates: the REST issue's §5.

One cluster for the module (each test works in its own namespace); kubectl runs with a fresh
HOME, since it caches discovery under ~/.kube/cache.
"""
from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import ssl
import struct
import subprocess
import sys
import termios
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from kubemu import cgroups
from tests.conftest import DEADLINE, alive, kill_marked, remove_cluster_cgroups, wait_for
from tests.kubemu.test_cli import kubemu

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

PY = sys.executable
LONG = DEADLINE * 3


class Kubectl:
    def __init__(self, state: Path, home: Path):
        self.state = state
        self.home = home
        self.kubeconfig = state / "admin.conf"

    def run(self, *args, check=True, input=None, timeout=LONG, kubeconfig=None, namespace=None):
        argv = ["kubectl", "--kubeconfig", str(kubeconfig or self.kubeconfig), *args]
        if namespace:
            argv[3:3] = ["-n", namespace]
        env = {"HOME": str(self.home), "PATH": os.environ["PATH"]}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, input=input, timeout=timeout,
                              stdin=None if input is not None else subprocess.DEVNULL)
        if check:
            assert done.returncode == 0, f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        return done

    def popen(self, *args, namespace=None) -> subprocess.Popen:
        argv = ["kubectl", "--kubeconfig", str(self.kubeconfig), *(["-n", namespace] if namespace else []), *args]
        return subprocess.Popen(argv, env={"HOME": str(self.home), "PATH": os.environ["PATH"]},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)

    def json(self, *args, namespace=None):
        return json.loads(self.run(*args, "-o", "json", namespace=namespace).stdout)

    @property
    def server(self) -> str:
        conf = yaml.safe_load(self.kubeconfig.read_text())
        return conf["clusters"][0]["cluster"]["server"]


@pytest.fixture(scope="module")
def k(tmp_path_factory):
    state = tmp_path_factory.mktemp("k")
    home = tmp_path_factory.mktemp("home")
    try:
        kubemu(state, "up", "--nodes", "2", "--fast", "--detach", "--api-port", "0", "--no-kubeconfig")
        yield Kubectl(state, home)
    finally:
        kubemu(state, "down", check=False)
        leaked = kill_marked(str(state))
        left = remove_cluster_cgroups(state)
        assert not leaked and not left, (leaked, left)


def namespace(k: Kubectl, name: str) -> str:
    k.run("create", "namespace", name)
    return name


def log_has_no_traceback(k: Kubectl) -> None:
    logs = list((k.state / "nodes").glob("*/logs/*")) + list((k.state / "nodes").glob("*/pods/**/*.log"))
    for path in logs:
        if path.is_file():
            assert "Traceback (most recent call last)" not in path.read_text(errors="replace"), path


# --- §2: the kubeconfig and the quick tour ---------------------------------------------------------

def test_get_nodes_right_after_up(k):
    out = k.run("get", "nodes").stdout
    assert out.splitlines()[0].split()[:2] == ["NAME", "STATUS"], out
    assert "node-0" in out and "Ready" in out
    version = k.run("version", "-o", "json").stdout
    assert json.loads(version)["serverVersion"]["minor"].startswith("32")


def test_api_resources_and_explain(k):
    out = k.run("api-resources").stdout
    for needle in ("pods", "po ", "deployments", "deploy", "rolebindings", "rbac.authorization.k8s.io",
                   "serviceaccounts", "sa "):
        assert needle in out, (needle, out)
    explain = k.run("explain", "pods.spec.containers").stdout
    assert "FIELDS:" in explain and "image" in explain, explain


# --- §4/§5: the verbs --------------------------------------------------------------------------------

DEPLOYMENT = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
    spec:
      replicas: {replicas}
      selector:
        matchLabels: {{app: web}}
      template:
        metadata:
          labels: {{app: web}}
        spec:
          terminationGracePeriodSeconds: 2
          containers:
          - name: web
            image: busybox
            command: ["{py}", "-u", "-c", "import time\\nwhile True:\\n    print('tick', flush=True); time.sleep(0.5)"]
            env:
            - name: VERSION
              value: "{version}"
    """)


def deployment(replicas: int, version: str = "1") -> str:
    return DEPLOYMENT.format(replicas=replicas, version=version, py=PY)


def test_apply_create_change_reapply_and_rollout(k):
    ns = namespace(k, "apply")
    assert "deployment.apps/web created" in k.run("apply", "-f", "-", input=deployment(1), namespace=ns).stdout
    assert "deployment.apps/web unchanged" in k.run("apply", "-f", "-", input=deployment(1), namespace=ns).stdout
    assert "deployment.apps/web configured" in k.run("apply", "-f", "-", input=deployment(2), namespace=ns).stdout
    k.run("rollout", "status", "deployment/web", "--timeout", f"{LONG:.0f}s", namespace=ns)
    assert k.json("get", "deployment", "web", namespace=ns)["status"]["readyReplicas"] == 2
    # a new template is a new revision; undo goes back
    k.run("apply", "-f", "-", input=deployment(2, version="2"), namespace=ns)
    k.run("rollout", "status", "deployment/web", "--timeout", f"{LONG:.0f}s", namespace=ns)
    history = k.run("rollout", "history", "deployment/web", namespace=ns).stdout
    assert "REVISION" in history and "2" in history, history
    k.run("rollout", "undo", "deployment/web", namespace=ns)
    wait_for(lambda: k.json("get", "deployment", "web", namespace=ns)["spec"]["template"]["spec"]["containers"][0]
             ["env"][0]["value"] == "1", timeout=LONG, message="the undo")
    k.run("rollout", "restart", "deployment/web", namespace=ns)
    annotations = k.json("get", "deployment", "web", namespace=ns)["spec"]["template"]["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/restartedAt" in annotations
    k.run("scale", "deployment/web", "--replicas", "3", namespace=ns)
    k.run("rollout", "status", "deployment/web", "--timeout", f"{LONG:.0f}s", namespace=ns)
    assert k.json("get", "deployment", "web", namespace=ns)["spec"]["replicas"] == 3


def test_server_side_apply_is_refused_clearly(k):
    ns = namespace(k, "ssa")
    done = k.run("apply", "--server-side", "-f", "-", input=deployment(1), namespace=ns, check=False)
    assert done.returncode != 0
    assert "server-side apply" in done.stderr, done.stderr


def test_validate_strict_warn_and_false(k):
    ns = namespace(k, "validate")
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: b}\nbogus: 1\n"
    refused = k.run("apply", "-f", "-", input=manifest % "strict", namespace=ns, check=False)  # strict: the default
    assert refused.returncode == 1
    assert ('Error from server (BadRequest): error when creating "STDIN": ConfigMap in version "v1" cannot be '
            'handled as a ConfigMap: strict decoding error: unknown field "bogus"') in refused.stderr, refused.stderr
    warned = k.run("apply", "--validate=warn", "-f", "-", input=manifest % "warned", namespace=ns)
    assert 'Warning: unknown field "bogus"' in warned.stderr and "configmap/warned created" in warned.stdout
    ignored = k.run("apply", "--validate=false", "-f", "-", input=manifest % "ignored", namespace=ns)
    assert "Warning" not in ignored.stderr, ignored.stderr
    assert "bogus" not in k.json("get", "configmap", "warned", namespace=ns), "dropped (kept only in last-applied)"


@pytest.mark.parametrize("kind", ["pods", "deployments", "replicasets", "nodes", "namespaces", "events", "leases",
                                  "serviceaccounts", "configmaps", "secrets", "roles", "clusterroles",
                                  "rolebindings", "clusterrolebindings"])
def test_get_and_describe_every_kind(k, kind):
    scope = [] if kind in ("nodes", "namespaces", "clusterroles", "clusterrolebindings") else ["-A"]
    for output in ("wide", "json", "yaml", "name", "jsonpath={.items[*].metadata.name}"):
        done = k.run("get", kind, *scope, "-o", output)
        assert done.stderr == "" or "No resources found" in done.stderr, done.stderr
    table = k.run("get", kind, *scope).stdout
    assert table.startswith("NAME") or table.startswith("NAMESPACE") or table == "", table
    k.run("describe", kind, *scope)


WORKLOADS = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 0
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: busybox}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {nodeSelector: {no-such-node: "true"}, containers: [{name: app, image: busybox}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: pi}
spec:
  suspend: true
  template:
    spec: {restartPolicy: Never, containers: [{name: pi, image: busybox}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: hello}
spec:
  schedule: "*/5 * * * *"
  suspend: true
  jobTemplate:
    spec:
      template:
        spec: {restartPolicy: OnFailure, containers: [{name: hello, image: busybox}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
"""


def test_workload_tables_and_validation_messages(k):
    ns = namespace(k, "workloads")
    k.run("apply", "-f", "-", input=WORKLOADS, namespace=ns)
    heads = {kind: k.run("get", kind, namespace=ns).stdout.splitlines()[0].split()
             for kind in ("statefulsets", "daemonsets", "jobs", "cronjobs", "poddisruptionbudgets")}
    assert heads == {"statefulsets": ["NAME", "READY", "AGE"],
                     "daemonsets": ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE",
                                    "SELECTOR", "AGE"],
                     "jobs": ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
                     "cronjobs": ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"],
                     "poddisruptionbudgets": ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED",
                                              "DISRUPTIONS", "AGE"]}
    wide = k.run("get", "statefulset", "web", "-o", "wide", namespace=ns).stdout.splitlines()
    assert wide[0].split() == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    assert wide[1].split()[:2] == ["web", "0/0"] and wide[1].split()[3:] == ["app", "busybox"]
    assert k.run("get", "cronjob", "hello", namespace=ns).stdout.splitlines()[1].split()[1:8] == [
        "*/5", "*", "*", "*", "*", "<none>", "True"]
    job = k.json("get", "job", "pi", namespace=ns)
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "pi"
    assert k.run("scale", "statefulset", "web", "--replicas", "0", namespace=ns).returncode == 0
    bad = k.run("create", "-f", "-", check=False, namespace=ns, input="""
apiVersion: batch/v1
kind: Job
metadata: {name: bad}
spec:
  completions: -1
  template:
    spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}
""")
    assert bad.returncode != 0
    assert "spec.completions: Invalid value: -1: must be greater than or equal to 0" in bad.stderr, bad.stderr
    bad = k.run("create", "-f", "-", check=False, namespace=ns, input=WORKLOADS.split("---")[0].replace(
        "name: web}", "name: web2}").replace("labels: {app: web}", "labels: {app: db}"))
    assert "`selector` does not match template `labels`" in bad.stderr, bad.stderr
    bad = k.run("create", "cronjob", "bad", "--image", "busybox", "--schedule", "61 * * * *", check=False,
                namespace=ns)
    assert 'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61' in bad.stderr, \
        bad.stderr
    # kubectl's typed creates send protobuf
    k.run("create", "cronjob", "tick", "--image", "busybox", "--schedule", "@hourly", namespace=ns)
    k.run("create", "job", "once", "--image", "busybox", "--", "true", namespace=ns)
    k.run("create", "job", "manual", "--from=cronjob/tick", namespace=ns)
    manual = k.json("get", "job", "manual", namespace=ns)
    assert manual["metadata"]["ownerReferences"][0]["name"] == "tick"
    assert manual["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_create_get_watch_delete(k):
    ns = namespace(k, "verbs")
    watch = k.popen("get", "pods", "-w", "--output-watch-events", namespace=ns)
    try:
        k.run("create", "configmap", "settings", "--from-literal", "a=1", namespace=ns)
        assert k.json("get", "configmap", "settings", namespace=ns)["data"] == {"a": "1"}
        done = k.run("create", "configmap", "settings", "--from-literal", "a=1", namespace=ns, check=False)
        assert done.returncode != 0 and 'configmaps "settings" already exists' in done.stderr, done.stderr
        k.run("run", "sleeper", "--image", "busybox", "--restart", "Never", "--", "sleep", "300", namespace=ns)
        k.run("wait", "--for=condition=Ready", "pod/sleeper", "--timeout", f"{LONG:.0f}s", namespace=ns)
        k.run("delete", "pod", "sleeper", namespace=ns)  # returns once the pod is gone
        assert k.run("get", "pod", "sleeper", namespace=ns, check=False).returncode != 0
    finally:
        watch.terminate()
        out, _ = watch.communicate(timeout=DEADLINE)
    assert "ADDED" in out and "sleeper" in out and "DELETED" in out, out


def ticker(k: Kubectl, ns: str) -> None:
    """A running pod "ticker" that prints "line N" five times a second."""
    k.run("run", "ticker", "--image", "busybox", "--restart", "Never", "--", PY, "-u", "-c",
          "import time\nfor i in range(1000):\n    print('line', i, flush=True); time.sleep(0.2)", namespace=ns)
    k.run("wait", "--for=condition=Ready", "pod/ticker", "--timeout", f"{LONG:.0f}s", namespace=ns)


def first_lines(k: Kubectl, n: int, *args: str, namespace: str) -> list[str]:
    """The first `n` lines a streaming kubectl command prints; then it is stopped."""
    proc = k.popen(*args, namespace=namespace)
    try:
        return [proc.stdout.readline() for _ in range(n)]
    finally:
        proc.terminate()
        proc.communicate(timeout=DEADLINE)


def test_logs_follow(k):
    ns = namespace(k, "logs")
    ticker(k, ns)
    seen = first_lines(k, 5, "logs", "-f", "ticker", namespace=ns)
    assert all(line.startswith("line ") for line in seen), seen
    tail = k.run("logs", "ticker", "--tail", "2", namespace=ns).stdout.splitlines()
    assert len(tail) == 2 and all(line.startswith("line ") for line in tail), tail


POD_CGROUPS = os.geteuid() == 0 and any("memory" in c for _, c in cgroups.everywhere("x"))


def test_top_pods_and_nodes(k):
    """kubectl top reads metrics.k8s.io, served from the kubelets' stats: a busy container's CPU
    and memory, each node against its allocatable; kubemu top shows the same pod. Without pod
    cgroups there are no figures, and kubectl says so in its own line."""
    if not POD_CGROUPS:
        done = k.run("top", "nodes", check=False)
        assert (done.returncode, done.stderr) == (1, "error: metrics not available yet\n")
        return
    ns = namespace(k, "top")
    k.run("run", "busy", "--image", "busybox", "--restart", "Never", "--", PY, "-c",
          "b = bytearray(32 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass", namespace=ns)

    def busy_row():
        done = k.run("top", "pod", "busy", "--containers", namespace=ns, check=False)
        rows = [line.split() for line in done.stdout.splitlines()]
        return done.returncode == 0 and int(rows[1][2].removesuffix("m")) > 0 and rows
    rows = wait_for(busy_row, timeout=LONG, message="the busy pod's CPU in kubectl top")
    assert rows[0] == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert rows[1][:2] == ["busy", "busy"] and int(rows[1][3].removesuffix("Mi")) >= 32, rows
    nodes = [line.split() for line in k.run("top", "nodes").stdout.splitlines()]
    assert nodes[0] == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    assert [row[0] for row in nodes[1:]] == ["node-0", "node-1"]
    assert all(row[2].endswith("%") and row[4].endswith("%") for row in nodes[1:]), nodes
    ours = kubemu(k.state, "top", "pods", "-n", ns).stdout.splitlines()
    assert ours[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"] and ours[1].split()[0] == "busy"
    gone = k.run("top", "pod", "nope", namespace=ns, check=False)
    assert (gone.returncode, gone.stderr) == (1, 'Error from server (NotFound): pods "nope" not found\n')


# --- §3: who is asking, and may they ------------------------------------------------------------------

def token_kubeconfig(k: Kubectl, path: Path, token: str) -> Path:
    """A kubeconfig that presents only `token` (with admin.conf's client certificate beside it,
    kubectl would send both, and the certificate is who the apiserver sees, as in Kubernetes)."""
    conf = yaml.safe_load(k.kubeconfig.read_text())
    conf["users"] = [{"name": "token", "user": {"token": token}}]
    conf["contexts"][0]["context"]["user"] = "token"
    path.write_text(yaml.safe_dump(conf))
    return path


def test_auth_can_i_and_a_service_account_bound_to_view(k, tmp_path):
    ns = namespace(k, "rbac")
    assert k.run("auth", "can-i", "create", "pods").stdout.strip() == "yes"
    k.run("create", "serviceaccount", "reader", namespace=ns)
    k.run("create", "rolebinding", "reader-view", "--clusterrole", "view", f"--serviceaccount={ns}:reader",
          namespace=ns)
    token = k.run("create", "token", "reader", namespace=ns).stdout.strip()
    reader = token_kubeconfig(k, tmp_path / "reader.conf", token)
    assert k.run("auth", "can-i", "list", "pods", namespace=ns, kubeconfig=reader).stdout.strip() == "yes"
    k.run("get", "pods", namespace=ns, kubeconfig=reader)
    denied = k.run("run", "x", "--image", "busybox", namespace=ns, kubeconfig=reader, check=False)
    assert denied.returncode != 0
    assert (f'pods is forbidden: User "system:serviceaccount:{ns}:reader" cannot create resource "pods" '
            f'in API group "" in the namespace "{ns}"') in denied.stderr, denied.stderr
    assert k.run("auth", "can-i", "create", "pods", namespace=ns, kubeconfig=reader,
                 check=False).stdout.strip() == "no"
    whoami = json.loads(k.run("auth", "whoami", "-o", "json", kubeconfig=reader).stdout)
    assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:reader"
    # the token dies with its ServiceAccount
    k.run("delete", "serviceaccount", "reader", namespace=ns)
    gone = k.run("get", "pods", namespace=ns, kubeconfig=reader, check=False)
    assert gone.returncode != 0 and "Unauthorized" in gone.stderr, gone.stderr


def test_a_user_certificate_without_a_binding_is_refused(k, tmp_path):
    from kubemu import kubeconfig, pki

    ca = pki.Pair(*pki._load(k.state / "pki", pki.CA_NAME))  # read only: the live cluster's CA stays as it is
    pair, _ = pki.ensure_cert(tmp_path, pki.CertSpec("jane", "jane", ("developers",)), ca)
    path = tmp_path / "jane.conf"
    path.write_text(kubeconfig.dump(kubeconfig.build(k.server, ca.cert_pem, "jane", pair.cert_pem, pair.key_pem)))
    done = k.run("get", "pods", "-n", "default", kubeconfig=path, check=False)
    assert done.returncode != 0
    assert ('Error from server (Forbidden): pods is forbidden: User "jane" cannot list resource "pods" in API '
            'group "" in the namespace "default"') in done.stderr, done.stderr
    assert k.run("auth", "can-i", "list", "pods", kubeconfig=path, check=False).stdout.strip() == "no"


def test_no_credentials_is_system_anonymous_whom_rbac_lets_read_only_the_public_parts(k):
    """kube-apiserver's --anonymous-auth (kubeadm's default): 403 from RBAC, not 401."""
    ctx = ssl.create_default_context(cafile=str(k.state / "pki" / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(k.server + "/api/v1/namespaces/default/pods", context=ctx, timeout=DEADLINE)
    assert err.value.code == 403
    status = json.loads(err.value.read())
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
    assert 'User "system:anonymous" cannot list resource "pods"' in status["message"]
    with urllib.request.urlopen(k.server + "/healthz", context=ctx, timeout=DEADLINE) as ok:
        assert ok.read() == b"ok"
    with urllib.request.urlopen(k.server + "/api/v1/namespaces/kube-public/configmaps/cluster-info",
                                context=ctx, timeout=DEADLINE) as ok:
        assert json.loads(ok.read())["data"]["kubeconfig"]


def test_a_namespace_stuck_terminating_is_released_through_finalize(k):
    k.run("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "stuck"},
                                                "spec": {"finalizers": ["example.com/never"]}}))
    k.run("delete", "namespace", "stuck", "--wait=false")
    # the namespace controller finalizes its own part ("kubernetes"); the other one holds it
    wait_for(lambda: k.json("get", "namespace", "stuck")["spec"]["finalizers"] == ["example.com/never"],
             timeout=LONG, message="the namespace controller to finalize")
    assert k.json("get", "namespace", "stuck")["status"]["phase"] == "Terminating"
    ns = k.json("get", "namespace", "stuck")
    ns["spec"]["finalizers"] = ["example.com/never", "example.com/other"]
    k.run("replace", "-f", "-", input=json.dumps(ns))
    assert k.json("get", "namespace", "stuck")["spec"]["finalizers"] == ["example.com/never"], \
        "a plain update leaves spec.finalizers alone"
    ns = k.json("get", "namespace", "stuck")
    ns["spec"]["finalizers"] = []
    k.run("replace", "--raw", "/api/v1/namespaces/stuck/finalize", "-f", "-", input=json.dumps(ns))
    wait_for(lambda: k.run("get", "namespace", "stuck", check=False).returncode != 0, timeout=LONG,
             message="the namespace to go")


# --- §4: exec and attach -----------------------------------------------------------------------------

class Terminal:
    """kubectl in a pseudo-terminal of its own, as a user at a shell runs `-it` commands."""

    def __init__(self, k: Kubectl, *args: str, rows: int = 33, cols: int = 101):
        self.master, slave = os.openpty()
        self.resize(rows, cols, signal_kubectl=False)
        argv = ["kubectl", "--kubeconfig", str(k.kubeconfig), *args]
        self.proc = subprocess.Popen(argv, env={"HOME": str(k.home), "PATH": os.environ["PATH"], "TERM": "xterm"},
                                     stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.out = b""

    def resize(self, rows: int, cols: int, signal_kubectl: bool = True) -> None:
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        if signal_kubectl:  # no controlling terminal, so the kernel does not send it
            self.proc.send_signal(signal.SIGWINCH)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: kubectl has closed the terminal
            return False
        self.out += data
        return bool(data)

    def expect(self, text: bytes, send: bytes | None = None, timeout: float = LONG) -> None:
        """Wait for `text` in the output; with `send`, type it (again each few seconds, for what
        may race with a resize or with the attach itself) until the text comes."""
        deadline = time.monotonic() + timeout
        next_send = 0.0
        start = len(self.out)
        while text not in self.out[start:]:
            now = time.monotonic()
            assert now < deadline, f"no {text!r} from kubectl within {timeout:g}s: {self.out!r}"
            if send is not None and now >= next_send:
                os.write(self.master, send)
                next_send = now + 3.0
            assert self._read(0.2), f"kubectl ended before {text!r}: {self.out!r}"

    def wait(self) -> int:
        code = self.proc.wait(LONG)
        while self._read(0.1):
            pass
        os.close(self.master)
        return code


BOX = """
apiVersion: v1
kind: Pod
metadata: {name: box}
spec:
  containers:
  - name: box
    image: busybox
    command: [%s, -c, "import time; time.sleep(3600)"]
    workingDir: /tmp
    env: [{name: GREETING, value: hello}]
"""


def box(k: Kubectl, ns: str) -> None:
    k.run("apply", "-f", "-", input=BOX % json.dumps(PY), namespace=ns)
    k.run("wait", "--for=condition=Ready", "pod/box", "--timeout", f"{LONG:.0f}s", namespace=ns)


def test_exec_runs_in_the_container_and_returns_its_exit_code(k):
    ns = namespace(k, "exec")
    box(k, ns)
    done = k.run("exec", "box", "--", "sh", "-c", 'echo "$GREETING from $(pwd)"; echo oops >&2; exit 3',
                 check=False, namespace=ns)
    assert done.returncode == 3, done
    assert done.stdout == "hello from /tmp\n"
    assert "oops" in done.stderr and "command terminated with exit code 3" in done.stderr, done.stderr
    k.run("exec", "box", "--", "true", namespace=ns)
    piped = k.run("exec", "-i", "box", "--", "tr", "a-z", "A-Z", input="shout\n", namespace=ns)
    assert piped.stdout == "SHOUT\n"
    missing = k.run("exec", "box", "--", "no-such-program", check=False, namespace=ns)
    assert missing.returncode == 1
    assert 'exec: "no-such-program": executable file not found in $PATH' in missing.stderr, missing.stderr
    audit = [json.loads(line) for line in (k.state / "nodes" / "node-0" / "logs" / "audit.log").read_text().splitlines()]
    assert {"verb": "create", "resource": "pods/exec", "namespace": ns, "name": "box", "code": 101,
            "user": "kubernetes-admin"}.items() <= next(a for a in audit if a["resource"] == "pods/exec").items()


@pytest.mark.parametrize("end", ["connection", "pod"])
def test_an_exec_ends_with_its_connection_or_its_pod(k, end):
    ns = namespace(k, f"exec-ends-with-{end}")
    box(k, ns)
    session = k.popen("exec", "box", "--", "sh", "-c", "echo $$; exec sleep 600", namespace=ns)
    try:
        pid = int(session.stdout.readline())
        assert alive(pid)
        if end == "pod":
            k.run("delete", "pod", "box", "--grace-period=1", namespace=ns)
            assert session.wait(LONG) != 0, "the session ends with its container"
    finally:
        session.kill()
        session.communicate(timeout=DEADLINE)
    wait_for(lambda: not alive(pid), timeout=LONG, message=f"the exec'd command to end with its {end}")


def test_exec_it_gives_a_terminal_that_follows_resizes(k):
    ns = namespace(k, "tty")
    box(k, ns)
    term = Terminal(k, "-n", ns, "exec", "-it", "box", "--", "sh")
    term.expect(b"33 101", send=b"stty size\n")
    term.expect(b"/dev/pts/", send=b"tty\n")
    term.resize(40, 120)
    term.expect(b"40 120", send=b"stty size\n")
    os.write(term.master, b"exit 5\n")
    assert term.wait() == 5, term.out
    assert b"command terminated with exit code 5" in term.out


def test_run_it_rm_attaches_a_terminal_and_cleans_up(k):
    ns = namespace(k, "runit")
    term = Terminal(k, "-n", ns, "run", "-it", "--rm", "--restart=Never", "shell", "--image=busybox", "--", "sh")
    term.expect(b"If you don't see a command prompt")
    term.expect(b"42", send=b"echo $((6*7))\n")
    os.write(term.master, b"exit 5\n")
    assert term.wait() == 5, term.out
    assert b'pod "shell" deleted' in term.out, term.out
    assert k.run("get", "pod", "shell", check=False, namespace=ns).returncode != 0


def test_attach_with_piped_stdin_and_to_a_running_pod(k):
    ns = namespace(k, "attach")
    done = k.run("run", "-i", "--rm", "--restart=Never", "reader", "--image=busybox", "--",
                 "sh", "-c", "read x; echo got $x", input="abc\n", namespace=ns)
    assert "got abc" in done.stdout, done
    ticker(k, ns)
    seen = first_lines(k, 3, "attach", "ticker", namespace=ns)
    assert all(line.startswith("line ") for line in seen), seen


def test_exec_needs_its_own_permission(k, tmp_path):
    ns = namespace(k, "execrbac")
    box(k, ns)
    k.run("create", "serviceaccount", "viewer", namespace=ns)
    k.run("create", "rolebinding", "viewer", "--clusterrole", "view", f"--serviceaccount={ns}:viewer", namespace=ns)
    viewer = token_kubeconfig(k, tmp_path / "viewer.conf", k.run("create", "token", "viewer", namespace=ns).stdout.strip())
    k.run("create", "serviceaccount", "editor", namespace=ns)
    k.run("create", "rolebinding", "editor", "--clusterrole", "edit", f"--serviceaccount={ns}:editor", namespace=ns)
    editor = token_kubeconfig(k, tmp_path / "editor.conf", k.run("create", "token", "editor", namespace=ns).stdout.strip())
    k.run("exec", "box", "--", "true", namespace=ns, kubeconfig=editor)  # edit (and admin) may, as in Kubernetes
    denied = k.run("exec", "box", "--", "true", namespace=ns, kubeconfig=viewer, check=False)
    assert denied.returncode != 0
    # the WebSocket's GET is refused, kubectl falls back to SPDY's POST, and shows that refusal
    assert (f'pods "box" is forbidden: User "system:serviceaccount:{ns}:viewer" cannot create resource '
            f'"pods/exec" in API group "" in the namespace "{ns}"') in denied.stderr, denied.stderr
    log_has_no_traceback(k)


# --- the official Python client -------------------------------------------------------------------------

def test_the_official_python_client(k):
    from kubernetes import client, config, watch

    api_client = config.new_client_from_config(str(k.kubeconfig))
    core = client.CoreV1Api(api_client)
    ns = namespace(k, "pyclient")
    listed = core.list_namespaced_pod(ns)
    events = []
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_config_map, ns, resource_version=listed.metadata.resource_version,
                      timeout_seconds=int(LONG))
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c"),
                                                             data={"k": "v"}))
    core.patch_namespaced_config_map("c", ns, {"data": {"k": "w"}})
    core.delete_namespaced_config_map("c", ns)
    for event in stream:
        if event["object"].metadata.name == "c":
            events.append((event["type"], (event["object"].data or {}).get("k")))
        if events and events[-1][0] == "DELETED":
            w.stop()
    assert events == [("ADDED", "v"), ("MODIFIED", "w"), ("DELETED", "w")], events
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="hello"), spec=client.V1PodSpec(
        restart_policy="Never", containers=[client.V1Container(name="c", image="busybox",
                                                                command=[PY, "-c", "print('hello there')"])]))
    core.create_namespaced_pod(ns, pod)
    wait_for(lambda: core.read_namespaced_pod("hello", ns).status.phase == "Succeeded", timeout=LONG,
             message="the pod to finish")
    assert core.read_namespaced_pod_log("hello", ns) == "hello there\n"
    api_client.close()
