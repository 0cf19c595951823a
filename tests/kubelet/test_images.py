"""The image catalog: Docker's reference normalisation, the file's format, and Kubernetes'
command/args rules over an image's ENTRYPOINT/CMD (pure); then a kubelet with real processes:
an nginx pod serves HTTP on loopback, an unknown image waits in ErrImagePull/ImagePullBackOff."""
from __future__ import annotations

import json
import urllib.request

import pytest

from kubelet import images
from kubelet.images import Catalog, PullError, Run, load, parse_reference, resolve
from kubemu import cluster
from kubemu.statedir import StateDir
from tests.conftest import spawn_marked, wait_for
from tests.kubelet.test_agent import PY, KubeletNode, _answers

CATALOG = load(None, "/s/images.yaml", python="/py")


# --- references -------------------------------------------------------------------------------

@pytest.mark.parametrize("ref, normalised", [
    ("nginx", "docker.io/library/nginx:latest"),
    ("nginx:1.14.2", "docker.io/library/nginx:1.14.2"),
    ("library/nginx", "docker.io/library/nginx:latest"),
    ("docker.io/library/nginx:1.25", "docker.io/library/nginx:1.25"),
    ("index.docker.io/library/nginx", "docker.io/library/nginx:latest"),
    ("bitnami/nginx:1", "docker.io/bitnami/nginx:1"),
    ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
    ("localhost/app", "localhost/app:latest"),
    ("localhost:5000/team/app:v2", "localhost:5000/team/app:v2"),
    ("nginx@sha256:" + "a" * 64, "docker.io/library/nginx@sha256:" + "a" * 64),
    ("nginx:1@sha256:" + "b" * 64, "docker.io/library/nginx:1@sha256:" + "b" * 64),
])
def test_references_normalise_as_docker_does(ref, normalised):
    assert str(parse_reference(ref)) == normalised


@pytest.mark.parametrize("ref", ["Nginx", "nginx:", "nginx@sha256:abc", "nginx:bad tag", "-x", "a//b", ":1",
                                 "docker.io/UPPER/x"])
def test_invalid_references(ref):
    with pytest.raises(ValueError, match="invalid reference format"):
        parse_reference(ref)


# --- the catalog file -------------------------------------------------------------------------

def entry_argv(catalog: Catalog, image: str, **container) -> tuple[str, ...] | PullError:
    run = resolve({"name": "c", "image": image, **container}, catalog)
    return run.argv if isinstance(run, Run) else run


@pytest.mark.parametrize("image, argv", [
    ("busybox", ("sh",)),
    ("busybox:1.36", ("sh",)),
    ("docker.io/library/busybox:latest", ("sh",)),
    ("alpine:3.20", ("/bin/sh",)),
    ("python:3.12-slim", ("/py",)),
    ("nginx:1.14.2", ("/py", f"{images.PROGRAMS_DIR}/httpd.py", "--port", "80")),
    ("httpd", ("/py", f"{images.PROGRAMS_DIR}/httpd.py", "--port", "80")),
    ("registry.k8s.io/pause:3.9", ("/py", f"{images.PROGRAMS_DIR}/pause.py")),
])
def test_shipped_defaults(image, argv):
    assert entry_argv(CATALOG, image) == argv


def test_kubeadms_component_images_run_kubemus_components_with_the_manifests_args():
    args = ["--api", "ipc:///s/api", "--hostname-override", "node-0"]
    for image, module in (("registry.k8s.io/kube-proxy:v1.32.0", "components.kube_proxy"),
                          ("registry.k8s.io/kube-proxy", "components.kube_proxy"),
                          ("registry.k8s.io/coredns/coredns:v1.11.3", "components.dns")):
        assert entry_argv(CATALOG, image) == ("/py", "-m", module)
        assert entry_argv(CATALOG, image, args=args) == ("/py", "-m", module, *args)
    assert isinstance(entry_argv(CATALOG, "registry.k8s.io/kube-apiserver:v1.32.0"), PullError)


def test_port_is_the_first_tcp_container_port():
    ports = [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 8080}, {"containerPort": 9090}]
    assert entry_argv(CATALOG, "nginx", ports=ports)[-2:] == ("--port", "8080")


def test_the_users_file_comes_first_and_patterns_match_tags():
    text = """
images:
- image: "python:2.*"
  cmd: ["/usr/bin/python2"]
- image: myregistry.example/team/*
  entrypoint: ["/opt/run"]
  cmd: ["--default"]
- image: nginx@sha256:""" + "c" * 64 + """
  cmd: ["pinned"]
"""
    catalog = load(text, "/s/images.yaml", python="/py")
    assert catalog.error is None
    assert entry_argv(catalog, "python:2.7") == ("/usr/bin/python2",)
    assert entry_argv(catalog, "python:3.12") == ("/py",)  # not matched: the defaults' entry
    assert entry_argv(catalog, "myregistry.example/team/app:v1") == ("/opt/run", "--default")
    assert entry_argv(catalog, "nginx@sha256:" + "c" * 64) == ("pinned",)
    assert entry_argv(catalog, "nginx:1") == ("/py", f"{images.PROGRAMS_DIR}/httpd.py", "--port", "80")


@pytest.mark.parametrize("text, error", [
    ("images: [", "/s/images.yaml: invalid YAML: "),
    ("- image: nginx\n", "/s/images.yaml: expected a mapping with one key, images: a list of entries"),
    ("images:\n- nginx\n", "/s/images.yaml: images[0]: expected a mapping (image, entrypoint, cmd, port)"),
    ("images:\n- cmd: [x]\n", "/s/images.yaml: images[0].image: required: an image name"),
    ("images:\n- image: x\n  command: [x]\n", "/s/images.yaml: images[0]: unknown field 'command'"),
    ("images:\n- image: x\n", "/s/images.yaml: images[0]: an entry needs an entrypoint or a cmd"),
    ("images:\n- image: x\n  cmd: sh\n", "/s/images.yaml: images[0].cmd: expected a list of strings"),
    ("images:\n- image: x\n  cmd: [a]\n  port: 0\n", "/s/images.yaml: images[0].port: expected a port number"),
    ("images:\n- image: x\n  cmd: ['{port}']\n", "/s/images.yaml: images[0]: uses {port}, so it needs a port"),
])
def test_a_bad_file_resolves_nothing_and_says_why(text, error):
    catalog = load(text, "/s/images.yaml", python="/py")
    assert catalog.error.startswith(error)
    failed = resolve({"name": "c", "image": "nginx"}, catalog)
    assert failed.reason == "ErrImagePull" and "the image catalog cannot be used: /s/images.yaml" in failed.message
    # a command runs whatever the catalog says
    assert resolve({"name": "c", "image": "nginx", "command": ["x"]}, catalog) == Run(("x",), None)


def test_an_empty_file_is_the_defaults():
    assert load("# nothing yet\n", "/s/images.yaml", python="/py").entries == images.DEFAULT_ENTRIES


# --- command and args over ENTRYPOINT and CMD (Kubernetes' table) ---------------------------------

ENTRY = load("images:\n- image: app\n  entrypoint: [/ep, '{python}']\n  cmd: [c1, c2]\n", "/f", python="/py")


@pytest.mark.parametrize("container, argv", [
    ({}, ("/ep", "/py", "c1", "c2")),                               # the image's ENTRYPOINT + CMD
    ({"command": ["run"]}, ("run",)),                               # command replaces both
    ({"args": ["a1", "{python}"]}, ("/ep", "/py", "a1", "{python}")),  # args replace CMD, as written
    ({"command": ["run"], "args": ["a1"]}, ("run", "a1")),          # command + args
])
def test_command_and_args_override_as_kubernetes_does(container, argv):
    assert resolve({"name": "c", "image": "app", **container}, ENTRY) == Run(argv, "app")


def test_a_command_runs_whatever_the_image():
    assert resolve({"name": "c", "image": "registry.k8s.io/kube-apiserver:v1.30.0", "command": ["apiserver"],
                    "args": ["--x"]}, CATALOG) == Run(("apiserver", "--x"), None)
    assert resolve({"name": "c", "command": ["sleep", "1"]}, CATALOG) == Run(("sleep", "1"), None)


def test_an_image_not_in_the_catalog_cannot_be_pulled():
    failed = resolve({"name": "c", "image": "nosuch/image:1"}, CATALOG)
    assert failed == PullError(
        "ErrImagePull", 'failed to resolve reference "docker.io/nosuch/image:1": not in the image catalog '
        "/s/images.yaml (no such file: kubemu's defaults only): add it there, or give the container a command",
        "nosuch/image:1")


def test_pull_policy_never_never_pulls():
    assert resolve({"name": "c", "image": "nosuch", "imagePullPolicy": "Never"}, CATALOG) == PullError(
        "ErrImageNeverPull", 'Container image "nosuch" is not present with pull policy of Never', "nosuch")
    assert isinstance(resolve({"name": "c", "image": "nginx", "imagePullPolicy": "Never"}, CATALOG), Run)


def test_an_invalid_image_name():
    assert resolve({"name": "c", "image": "Nginx"}, CATALOG) == PullError(
        "InvalidImageName", 'Failed to apply default image tag "Nginx": couldn\'t parse image reference '
        '"Nginx": invalid reference format', "Nginx")


# --- with real processes: the kubelet runs what the catalog says ----------------------------------

TIME_SCALE = 0.2  # image backoff 2 s, 4 s, 8 s...


class ScaledNode(KubeletNode):
    """test_agent's node, its kubelet's pod timings scaled by TIME_SCALE."""

    def __init__(self, state_dir):
        self.state = StateDir(state_dir)
        self.dir = cluster.write_node(self.state, "node-0", restart_sec=0.5, watchdog_sec=30,
                                      kubelet_args=f"--time-scale {TIME_SCALE} --file-check-frequency 2")
        self.manifests = self.dir / "manifests"
        self.init = spawn_marked([PY, "-m", "init", "--node-dir", str(self.dir)], state_dir)

    def pod_dir(self, name: str):
        return next((self.dir / "pods").glob(f"default_{name}-node-0_*"))


@pytest.fixture
def node(state_dir):
    n = ScaledNode(state_dir)
    wait_for(lambda: n.state.init_pid("node-0") and _answers(n), message="init")
    wait_for(lambda: n.kubelet()["active_state"] == "active", message="the kubelet to be ready")
    yield n
    n.stop()


def waiting_reason(n: KubeletNode, pod: str) -> str | None:
    c = n.container(pod)
    return ((c or {}).get("state") or {}).get("waiting", {}).get("reason")


def test_nginx_serves_http_on_loopback(node):
    port = _free_port()
    node.manifest("web", [{"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": port}]}])
    wait_for(lambda: node.pid("web"), message="the nginx container to run")

    def answers():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                return r.status == 200 and b"Welcome to kubemu!" in r.read()
        except OSError:
            return False
    wait_for(answers, message=f"HTTP on 127.0.0.1:{port}")
    reasons = [e["reason"] for e in _events(node) if e.get("involvedObject", {}).get("name") == "web-node-0"]
    assert reasons[:3] == ["Pulled", "Created", "Started"]


def test_an_unknown_image_waits_in_image_pull_backoff_and_never_runs(node):
    catalog = node.state.root / "images.yaml"
    node.manifest("ghost", [{"name": "main", "image": "nosuch/image:1"}])
    wait_for(lambda: waiting_reason(node, "ghost") == "ErrImagePull", message="ErrImagePull")
    c = node.container("ghost")
    assert str(catalog) in c["state"]["waiting"]["message"]
    # the kubelet's image backoff (10 s, 20 s, ... x TIME_SCALE): the second pull, at 10 s,
    # fails too; the sync 10 s later finds it backing off
    wait_for(lambda: waiting_reason(node, "ghost") == "ImagePullBackOff", message="ImagePullBackOff")
    c = node.container("ghost")
    assert c["state"]["waiting"]["message"] == 'Back-off pulling image "nosuch/image:1"'
    assert c["restartCount"] == 0 and "containerID" not in c and node.pod("ghost")["status"]["phase"] == "Pending"
    assert not list((node.pod_dir("ghost") / "main").glob("*.spec.json")), "no process was ever started"
    messages = [(e["reason"], e["message"]) for e in _events(node)
                if e.get("involvedObject", {}).get("name") == "ghost-node-0"]
    assert ("Failed", "Error: ErrImagePull") in messages and ("Failed", "Error: ImagePullBackOff") in messages
    assert ("BackOff", 'Back-off pulling image "nosuch/image:1"') in messages

    # The image appears in the catalog: the next pull finds it, without a kubelet restart.
    catalog.write_text(f'images:\n- image: nosuch/image\n  cmd: ["{PY}", "-c", "import time; time.sleep(3600)"]\n')
    wait_for(lambda: node.pid("ghost"), message="the container to start once its image is known")


def _events(n: KubeletNode) -> list[dict]:
    path = n.dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
