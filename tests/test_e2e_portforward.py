"""`kubectl port-forward` (the real kubectl 1.32) and `kubemu port-forward` against a real `kubemu up`:
a server bound to 127.0.0.1 inside the pod is reached through its network namespace (issue 15 §2)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from tests.conftest import DEADLINE, kill_marked, remove_cluster_cgroups, wait_for
from tests.kubemu.test_cli import kubemu
from tests.test_kubectl import LONG, PY, Kubectl, log_has_no_traceback

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

WEB = """
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: web
    image: python
    command: [%(py)s, "-m", "http.server", "8000", "--bind", "127.0.0.1"]
    readinessProbe:  # Ready once it listens: a forwarded connection before that would be refused
      exec: {command: [%(py)s, "-c", "import socket; socket.create_connection(('127.0.0.1', 8000), 2)"]}
      periodSeconds: 1
"""


@pytest.fixture(scope="module")
def k(tmp_path_factory):
    state = tmp_path_factory.mktemp("pf")
    home = tmp_path_factory.mktemp("home")
    try:
        kubemu(state, "up", "--nodes", "2", "--fast", "--detach", "--api-port", "0", "--no-kubeconfig")
        k = Kubectl(state, home)
        k.run("apply", "-f", "-", input=WEB % {"py": json.dumps(PY)})
        k.run("wait", "--for=condition=Ready", "pod/web", "--timeout", f"{LONG:.0f}s")
        yield k
    finally:
        kubemu(state, "down", check=False)
        leaked = kill_marked(str(state))
        left = remove_cluster_cgroups(state)
        assert not leaked and not left, (leaked, left)


class Lines:
    """A forwarding process's output, gathered line by line as it comes (a thread per pipe)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.seen = {"out": [], "err": []}
        for name, pipe in (("out", proc.stdout), ("err", proc.stderr)):
            threading.Thread(target=lambda n=name, p=pipe: self.seen[n].extend(iter(p.readline, "")),
                             daemon=True).start()

    def until(self, pattern: str, stream: str = "out", timeout: float = LONG) -> re.Match:
        def match():
            return next((m for line in list(self.seen[stream]) if (m := re.search(pattern, line))), None)
        return wait_for(match, timeout, message=f"{pattern!r} in the {stream} of {self.proc.args}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def fetch(port: int) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=DEADLINE) as answer:
        return answer.status, answer.read().decode()


def refused(port: int) -> bool:
    try:
        fetch(port)
    except (urllib.error.URLError, ConnectionError, OSError):
        return True
    return False


def test_kubectl_port_forward_reaches_a_server_on_the_pods_localhost(k):
    pf = Lines(k.popen("port-forward", "pod/web", ":8000"))
    try:
        port = int(pf.until(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8000").group(1))
        for _ in range(2):  # two connections over one tunnel
            status, body = fetch(port)
            assert status == 200 and "Directory listing for /" in body
        pf.until(r"Handling connection for %d" % port)
        assert pf.proc.poll() is None
    finally:
        pf.stop()
    audit = k.state / "nodes" / "node-0" / "logs" / "audit.log"

    def recorded() -> bool:  # whole lines only: the apiserver may be appending one
        lines = audit.read_text().splitlines(keepends=True)
        return any(a.get("resource") == "pods/portforward" and a.get("code") == 101 and a.get("name") == "web"
                   for a in (json.loads(line) for line in lines if line.endswith("\n")))
    wait_for(recorded, message="the audit record of the port-forward")


def test_kubectl_port_forward_to_a_closed_port_prints_the_kubelets_error(k):
    pf = Lines(k.popen("port-forward", "pod/web", ":9999"))
    try:
        port = int(pf.until(r"Forwarding from 127\.0\.0\.1:(\d+) -> 9999").group(1))
        assert refused(port)
        line = pf.until(r"an error occurred forwarding \d+ -> 9999: (.*)", "err").group(1)
        assert "error forwarding port 9999 to pod " in line
        assert "failed to connect to localhost:9999 inside namespace" in line
        assert "IPv4: dial tcp4 127.0.0.1:9999: connect: connection refused" in line
        # kubectl 1.32 then drops the whole forward, as against a real cluster
        pf.until(r"error: lost connection to pod", "err")
        assert pf.proc.wait(timeout=LONG) == 1
    finally:
        pf.stop()
    log_has_no_traceback(k)


def test_kubemu_port_forward_serves_on_after_a_refused_connection(k):
    env = dict(os.environ, KUBEMU_STATE_DIR=str(k.state))
    pf = Lines(subprocess.Popen([sys.executable, "-m", "kubemu.cli", "port-forward", "web", ":8000", ":9999"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL))
    try:
        good = int(pf.until(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8000").group(1))
        bad = int(pf.until(r"Forwarding from 127\.0\.0\.1:(\d+) -> 9999").group(1))
        assert fetch(good)[0] == 200
        assert refused(bad)
        line = pf.until(r"error: an error occurred forwarding %d -> 9999: (.*)" % bad, "err").group(1)
        assert "connect: connection refused" in line
        status, body = fetch(good)  # still serving
        assert status == 200 and "Directory listing for /" in body
        assert pf.proc.poll() is None
    finally:
        pf.stop()
    assert "Traceback" not in "".join(pf.seen["err"])


def test_kubemu_port_forward_refuses_what_kubectl_refuses(k):
    bad = kubemu(k.state, "port-forward", "web", "x:80", check=False)
    assert bad.returncode == 1
    assert bad.stderr.strip() == "error: error parsing local port 'x': strconv.ParseUint: parsing \"x\": invalid syntax"
    missing = kubemu(k.state, "port-forward", "nope", "80", check=False)
    assert missing.returncode == 1 and missing.stderr.strip() == 'Error from server (NotFound): pods "nope" not found'


def test_the_official_python_clients_v4_port_forward(k):
    from kubernetes import client, config
    from kubernetes.stream import portforward

    api_client = config.new_client_from_config(str(k.kubeconfig))
    core = client.CoreV1Api(api_client)
    try:
        pf = portforward(core.connect_get_namespaced_pod_portforward, "web", "default", ports="8000,9999")
        sock = pf.socket(8000)
        sock.setblocking(True)
        sock.settimeout(DEADLINE)
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.0 200") and b"Directory listing for /" in answer
        sock.close()
        wait_for(lambda: pf.error(9999), message="the error of the closed port")
        assert "error forwarding port 9999 to pod" in pf.error(9999)
        assert "connect: connection refused" in pf.error(9999)
        pf.close()
    finally:
        api_client.close()
