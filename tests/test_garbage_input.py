"""Garbage in, a clear error out, and never a traceback: against a real one-node cluster.

`kubemu apply -f` gets manifests of the wrong types, nested too deep, too large, of kinds kubemu
does not serve, malformed YAML and JSON; every wire endpoint of the cluster (apiserver, store
replicas, init) gets raw garbage frames and well-formed requests with wrong-typed parameters.
Each command must end in one clear error (exit 1), each endpoint must still answer, and then no
log file of the state directory may hold a Python traceback: a traceback means a bug in kubemu.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import msgpack
import pytest
import yaml
import zmq

from kubemu import wire
from kubemu._wire_auth import state_credentials
from kubemu._wire_codec import NOTIFY, REQ, STREAM
from kubemu.api.limits import MAX_DEPTH, MAX_MANIFEST_BYTES
from kubemu.statedir import StateDir
from tests.conftest import DEADLINE, kill_marked, remove_cluster_cgroups, wait_for

TRACEBACK = "Traceback (most recent call last)"
LONG = DEADLINE * 3


def cli(state_dir, *args: str, timeout: float = LONG) -> subprocess.CompletedProcess:
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "kubemu.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for the module (its tests share it, in file order: the log scan is last)."""
    state_dir = tmp_path_factory.mktemp("g")
    up = cli(state_dir, "up", "--nodes", "1", "--fast", "--detach", timeout=LONG * 2)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield state_dir
    finally:
        cli(state_dir, "down")
        leaked = kill_marked(str(state_dir))
        cgroups_left = remove_cluster_cgroups(state_dir)
        assert not leaked and not cgroups_left, f"leaked processes {leaked}, cgroups {cgroups_left}"


def pod(name: str, **extra) -> dict:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1000"]}]}}
    obj.update(extra)
    return obj


def nested_json(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def alias_bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "apiVersion: v1\nkind: Pod\nmetadata: {name: bomb}\n" + "\n".join(lines) + "\n"


WRONG_TYPES = [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "t1"}, "spec": {"replicas": "three"}},
    pod("t2", spec={"containers": "x"}),
    pod("t3", metadata=[]),
    pod("t4", metadata={"name": 5}),
    pod("t5", metadata={"name": "t5", "labels": {"a": [1]}, "annotations": {"b": {"c": 1}}}),
    pod("t6", metadata={"name": "t6", "namespace": ["x"]}),
    {"apiVersion": 7, "kind": ["Pod"], "metadata": {"name": "t7"}},
    pod("t8", spec={"containers": [{"name": "c", "command": [1, None, {"a": "b"}]}]}),
    pod("t9", spec={"containers": [{"name": "c", "command": ["x"], "resources": {"limits": {"memory": "lots"}},
                                    "ports": [{"containerPort": "eighty"}]}]}),
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "t10"}, "spec": {"selector": "x",
                                                                                         "template": []}},
    pod("t11", metadata={"name": "t11", "ownerReferences": "x", "finalizers": {"a": 1}}),
    pod("t12", metadata="abc"),
    pod("t13", spec=None),
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad_Name!"}},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": "x"}},
]

TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1000"]}]}}
JOB_TEMPLATE = {"spec": {"restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}
WORKLOAD_WRONG_TYPES = [
    {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "w1"},
     "spec": {"replicas": [3], "volumeClaimTemplates": "x", "updateStrategy": 1}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "w2"},
     "spec": {"selector": {"matchLabels": ["x"]}, "updateStrategy": {"rollingUpdate": "x"}}},
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w3"},
     "spec": {"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"values": "x"}}]},
              "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": ["c"]}]}}}},
    {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "w4"},
     "spec": {"schedule": ["*"], "timeZone": 5, "jobTemplate": []}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "w5"},
     "spec": {"accessModes": "RWO", "resources": {"requests": {"storage": "lots"}}}},
    {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "w6"},
     "spec": {"capacity": [1], "hostPath": {"path": 5}, "nodeAffinity": "x"}},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "w7"}, "provisioner": {}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "w8"},
     "spec": {"minAvailable": [2], "maxUnavailable": "x%", "selector": "app=web"}},
]

# (file name, contents, what the error must say); every one must fail with exit 1
MANIFESTS = [
    ("deep.json", '{"apiVersion": "v1", "kind": "Pod", "spec": ' + "[" * 10_000 + "]" * 10_000 + "}",
     f"nested more than {MAX_DEPTH} levels deep"),
    ("deep900.json", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "d"}, "spec": '
     + nested_json(900) + "}", f"nested more than {MAX_DEPTH} levels deep"),
    ("deep.yaml", "apiVersion: v1\nkind: Pod\nspec:\n  x:\n  " + "- " * 10_000 + "x\n",
     f"nested more than {MAX_DEPTH} levels deep"),
    ("flow.yaml", "apiVersion: v1\nkind: Pod\nspec: " + "[" * 10_000 + "]" * 10_000 + "\n", "nest"),
    ("cycle.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: c}\nspec: &a [*a]\n", "levels deep"),
    ("bomb.yaml", alias_bomb(), "values (the limit)"),
    ("toolarge.yaml", "# " + "x" * MAX_MANIFEST_BYTES + "\n", f"more than the limit of {MAX_MANIFEST_BYTES}"),
    ("hugestring.json", json.dumps(pod("huge", metadata={"name": "huge", "annotations": {"a": "x" * 2_500_000}})),
     "exceeds the limit"),
    ("bigobject.json", json.dumps(pod("big", metadata={"name": "big", "annotations": {"a": "x" * 1_600_000}})),
     "limit"),
    ("longname.yaml", yaml.safe_dump(pod("x" * 100_000)), "is invalid"),
    ("bigint.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: bigint}\nspec:\n  terminationGracePeriodSeconds: "
     "123456789012345678901234567890\n  containers: [{name: c, command: [sleep, '1']}]\n", "must be an integer"),
    ("nan.json", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nan"}, "spec": '
     '{"terminationGracePeriodSeconds": NaN, "containers": [{"name": "c", "command": ["x"]}]}}', "is invalid"),
    ("nan.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: nan}\nspec: {x: .nan}\n", "not JSON compliant"),
    ("types.yaml", yaml.safe_dump_all(WRONG_TYPES), "is invalid"),
    ("kinds.yaml", yaml.safe_dump_all([{"apiVersion": "x/v1", "kind": "Foo", "metadata": {"name": "f"}},
                                       {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
                                       {"kind": "Pod"}, {"apiVersion": "v1"}, [1, 2], "text", 5]),
     "resource mapping not found"),
    ("list.yaml", "kind: List\nitems: [1, {kind: Pod}, {apiVersion: v1, kind: Pod, metadata: {name: [x]}}]\n",
     "unable to decode"),
    ("items.yaml", "kind: List\nitems: {a: 1}\n", "unable to decode"),
    ("tab.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n\t- tab\n", "error parsing"),
    ("unclosed.json", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}', "error parsing"),
    ("string.json", '{"kind": "Pod", "x": "unterminated \\', "error parsing"),
    ("tags.yaml", "kind: !!python/object:os.system x\n", "error parsing"),
    ("alias.yaml", "kind: Pod\nx: *nope\n", "error parsing"),
    ("keys.yaml", "kind: Pod\n? [a, b]\n: c\n", "error parsing"),
    ("binary.yaml", bytes(range(256)) * 40, "error reading"),
    ("nul.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: \"a\\0b\"}\n", "is invalid"),
    ("empty.yaml", "---\n---\n", "no objects passed to apply"),
    # the workload kinds' validation, in Kubernetes' words
    ("sts-selector.yaml", yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"serviceName": "web", "selector": {"matchLabels": {"app": "db"}}, "template": TEMPLATE}}),
     "`selector` does not match template `labels`"),
    ("cron-schedule.yaml", yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
        "spec": {"schedule": "61 * * * *", "jobTemplate": {"spec": {"template": JOB_TEMPLATE}}}}),
     'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61'),
    ("job-completions.yaml", yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"completions": -1, "template": JOB_TEMPLATE}}),
     "spec.completions: Invalid value: -1: must be greater than or equal to 0"),
    ("workload-types.yaml", yaml.safe_dump_all(WORKLOAD_WRONG_TYPES), "is invalid"),
]


@pytest.mark.parametrize("name, content, message", MANIFESTS, ids=[m[0] for m in MANIFESTS])
def test_bad_manifests_are_one_clear_error(cluster, tmp_path, name, content, message):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    done = cli(cluster, "apply", "-f", str(path))
    assert TRACEBACK not in done.stderr + done.stdout, done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    assert message in done.stderr, done.stderr[:2000]
    assert done.stdout == "", done.stdout


@pytest.mark.parametrize("command", ["apply", "create", "delete"])
def test_bad_input_on_stdin_and_every_manifest_command(cluster, command):
    env = dict(os.environ, KUBEMU_STATE_DIR=str(cluster))
    for data, message in [(b"[" * 200_000, "nest"), (b'{"kind": "Pod", "x": ' + b"[" * 200_000, "levels deep"),
                          (b"x" * (MAX_MANIFEST_BYTES + 10), f"error reading STDIN: the input is larger, more than "
                                                             f"the limit of {MAX_MANIFEST_BYTES} bytes"),
                          (b"\xff\xfekind: Pod\n", "error reading STDIN: 'utf-8' codec can't decode")]:
        run = subprocess.run([sys.executable, "-m", "kubemu.cli", command, "-f", "-"], input=data,
                             capture_output=True, env=env, timeout=LONG)
        done = subprocess.CompletedProcess(run.args, run.returncode, run.stdout.decode(errors="replace"),
                                           run.stderr.decode(errors="replace"))
        assert TRACEBACK not in done.stderr and done.returncode == 1, done.stderr[:2000]
        assert message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr[:2000]


def test_a_deep_object_sent_straight_to_the_apiserver_is_refused(cluster):
    deep: object = "x"
    for _ in range(900):
        deep = {"a": deep}
    with wire.SyncClient(StateDir(cluster).api_endpoint(), timeout=LONG, credentials=state_credentials(cluster)) as api:
        with pytest.raises(wire.BadRequest, match=f"object is nested more than {MAX_DEPTH} levels deep"):
            api.call("create", {"resource": "pods", "namespace": "default",
                                "object": pod("deep", spec={"x": deep})})


def pk(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def garbage_frames(rng: random.Random) -> list[list[bytes]]:
    """Messages no client sends: not msgpack, the wrong shapes, deep, huge, truncated, several parts."""
    frames = [[b""], [b"\xc1"], [b"\x91" * 3000 + b"\xc0"], [b"\xdd\xff\xff\xff\xff"], [b"\xdb\xff\xff\xff\xff"],
              [pk([REQ])], [pk([REQ, "x", 5, []])], [pk([REQ, 2**64 - 1, "status", 5])], [pk([99, 1, "x", {}])],
              [pk({"a": 1})], [pk([REQ, 1, "status", {"x": b"\xff" * 10}])[:-3]], [b"a", b"b", b"c"],
              [pk([STREAM, 3, "watch", {"x": 1}]), b"tail"], [pk([NOTIFY, 4, "status", [1]])],
              [pk([REQ, 5, "status", {"": None}]) + b"trailing"], [b"\x00" * (3 * 1024 * 1024)]]
    frames += [[bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))] for _ in range(50)]
    return frames


def wrong_typed(methods: dict[str, list[dict]]) -> list[list[bytes]]:
    return [[pk([REQ, 1000 + i, method, params])] for i, (method, params) in
            enumerate((m, p) for m, ps in methods.items() for p in ps)]


APISERVER_CALLS = {
    "create": [{"resource": 5, "object": "x"}, {"resource": "pods", "object": [1]},
               {"resource": "pods", "object": {"metadata": "x"}}, {"resource": "pods", "object": {"metadata": {
                   "name": 5, "namespace": [1]}}}, {"resource": "pods", "namespace": 5, "object": {}},
               {"resource": {"a": 1}, "object": {}}, {"resource": "pods", "object": pod("x", spec=[])}],
    "update": [{"resource": "pods", "object": {"metadata": {"name": [1]}}}, {"resource": "pods", "object": 5}],
    "update_status": [{"resource": "pods", "object": {"metadata": {"name": "nope", "resourceVersion": [1]}}}],
    "patch": [{"resource": "pods", "name": "x", "patch": "{{", "patch_type": 5},
              {"resource": "pods", "name": 5, "patch": []}, {"resource": "pods", "namespace": "default",
                                                             "name": "x", "patch": "[" * 5000}],
    "delete": [{"resource": "pods", "name": "nope", "grace_period_seconds": "x"},
               {"resource": "pods", "name": "nope", "namespace": "default", "preconditions": "x"},
               {"resource": "pods", "name": {"a": 1}}, {"resource": "pods", "name": "n", "propagation_policy": 5}],
    "get": [{"resource": "pods", "name": 5}, {"resource": None, "name": "x"}, {"resource": [1], "name": [2]}],
    "list": [{"resource": "pods", "limit": "x"}, {"resource": "pods", "continue": 5},
             {"resource": "pods", "label_selector": 5}, {"resource": "pods", "continue": "garbage"},
             {"resource": "pods", "field_selector": "status.phase==="}],
    "watch": [{"resource": "pods", "resource_version": [1]}, {"resource": 5}],
    "log": [{"name": 5, "tail_lines": "x"}, {"name": "nope", "namespace": "default", "limit_bytes": -1}],
    "bind": [{"name": "nope", "node": 5}, {"name": [1], "node": "n"}],
    "get_scale": [{"resource": "pods", "name": "x"}, {"resource": "deployments", "name": 5}],
    "update_scale": [{"resource": "deployments", "name": "x", "replicas": "x"}],
    "healthz": [{"x": 1}],
}
STORE_CALLS = {  # wrong types only: nothing here may be taken for a real write or a member change
    "put": [{"key": 5}, {"key": [1], "value": {"a": 1}}], "range": [{"key": [1]}, {"key": b"a", "limit": "x"}],
    "txn": [{"compare": "x"}, {"compare": [1], "success": 5}], "compact": [{"revision": "x"}],
    "delete_range": [{"key": {"a": 1}}], "lease_grant": [{"ttl": "x"}], "lease_revoke": [{"id": "x"}],
    "lease_keepalive": [{"id": [1]}], "watch": [{"key": 5}], "status": [{"x": 1}],
    "member_remove": [{"name": [1]}], "raft": [{"x": 1}], "raft_snapshot": [{"x": 1}],
}
INIT_CALLS = {  # wrong types only: nothing here may be taken for a unit to stop
    "stop": [{"unit": 5}, {"unit": [1]}, {"unit": {"a": 1}}], "start": [{"unit": 5}],
    "restart": [{"unit": [1]}], "status": [{"unit": 5}], "reset-failed": [{"unit": [1]}],
}


def dealer(credentials=None) -> zmq.Socket:
    """A raw DEALER; with credentials, it authenticates as the cluster's clients do (PLAIN)."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if credentials is not None:
        sock.setsockopt(zmq.PLAIN_USERNAME, credentials.user.encode())
        sock.setsockopt(zmq.PLAIN_PASSWORD, credentials.secret.encode())
    return sock


def send_garbage(endpoint: str, messages: list[list[bytes]], credentials=None) -> None:
    """Send every message from one raw DEALER, then a request for an unknown method: its answer
    (on the same connection, after all the rest) shows the endpoint read the garbage and lives.
    The apiserver and the store take messages only from authenticated peers: the garbage comes
    from one (the admin), the worst case, since what an unauthenticated peer sends is never read."""
    sock = dealer(credentials)
    try:
        sock.connect(endpoint)
        for parts in messages:
            sock.send_multipart(parts)
        probe = 424242
        sock.send(pk([REQ, probe, "no-such-method", {}]))
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        deadline = LONG * 1000
        while True:
            assert poller.poll(deadline), f"{endpoint} did not answer after the garbage"
            reply = msgpack.unpackb(sock.recv_multipart()[-1], raw=False, strict_map_key=False)
            if isinstance(reply, list) and len(reply) > 2 and reply[1] == probe:
                assert reply[2] == "UnknownMethod", reply
                return
    finally:
        sock.close()


def wire_endpoints(state_dir) -> dict[str, str]:
    state = StateDir(state_dir)
    found = {"apiserver": state.api_endpoint()}
    stores = (state.root / "store-endpoints").read_text().split()
    found.update({f"store-{i}": ep for i, ep in enumerate(stores)})
    found.update({f"init {node}": state.init_endpoint(node) for node in state.nodes()})
    return found


def test_garbage_on_every_wire_endpoint(cluster):
    rng = random.Random(13)
    calls = {"apiserver": APISERVER_CALLS, "store": STORE_CALLS, "init": INIT_CALLS}
    admin = state_credentials(cluster)
    for name, endpoint in wire_endpoints(cluster).items():
        kind = name.split("-")[0].split(" ")[0]
        send_garbage(endpoint, garbage_frames(rng) + wrong_typed(calls[kind]),
                     credentials=None if kind == "init" else admin)
    # a peer without credentials is refused at the handshake: nothing it sends is read
    stranger = dealer()
    stranger.connect(wire_endpoints(cluster)["apiserver"])
    for parts in garbage_frames(rng)[:5]:
        try:
            stranger.send_multipart(parts, zmq.NOBLOCK)
        except zmq.Again:  # no connection to queue on: refused already
            break
    assert not stranger.poll(1000), "an unauthenticated peer got an answer"
    stranger.close()
    # watchers that go away mid-stream, then events they would have been sent: a peer gone is
    # one INFO/WARNING line (naming it) for the server, not a traceback
    endpoints = wire_endpoints(cluster)
    gone = []
    for endpoint, ident, params in [(endpoints["apiserver"], b"gone-api-watcher", {"resource": "pods"}),
                                    (endpoints["store-0"], b"gone-store-watcher", {"key": b"/", "range_end": b"\0"})]:
        watcher = dealer(admin)
        watcher.setsockopt(zmq.ROUTING_ID, ident)
        watcher.connect(endpoint)
        watcher.send(pk([STREAM, 1, "watch", params]))
        assert watcher.poll(LONG * 1000), f"{endpoint} did not start the watch"
        watcher.close()
        gone.append(ident.hex())
    churn = json.dumps(pod("churn"))
    for _ in range(3):
        apply = subprocess.run([sys.executable, "-m", "kubemu.cli", "apply", "-f", "-"], input=churn, text=True,
                               capture_output=True, env=dict(os.environ, KUBEMU_STATE_DIR=str(cluster)))
        assert apply.returncode == 0, apply.stderr
        assert cli(cluster, "delete", "pod", "churn", "--grace-period=0", "--force").returncode == 0
        if all(any(ident in p.read_text(errors="replace") for p in cluster.rglob("*.log")) for ident in gone):
            break
    wait_for(lambda: all(any(ident in p.read_text(errors="replace") for p in cluster.rglob("*.log"))
                         for ident in gone), timeout=LONG, message="the servers to notice the watchers left")
    nodes = cli(cluster, "get", "nodes")
    assert nodes.returncode == 0 and " Ready " in nodes.stdout, nodes.stdout + nodes.stderr
    assert cli(cluster, "ps").returncode == 0


def test_no_traceback_in_any_log(cluster):
    """The module's last test: every log the cluster wrote while the tests above ran."""
    with_tracebacks = {}
    for path in sorted(cluster.rglob("*.log")):
        text = path.read_text(errors="replace")
        if TRACEBACK in text:
            at = text.index(TRACEBACK)
            with_tracebacks[str(path.relative_to(cluster))] = text[max(0, at - 300):at + 1500]
    assert not with_tracebacks, "tracebacks in logs:\n" + "\n\n".join(
        f"== {path}\n{excerpt}" for path, excerpt in with_tracebacks.items())
