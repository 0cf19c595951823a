"""components/apiserver/rest/remotecommand.py: the pure parts, then pods/exec and pods/attach
through RestAPI end to end (aiohttp's test server and WebSocket client), with a fake kubelet:
a wire Server on the node's kubelet endpoint that requires the apiserver's wire credentials and
implements exec/attach/stdin/resize with the item shapes kubelet/streaming.py documents."""
from __future__ import annotations

import asyncio
import copy
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from aiohttp import WSMsgType, WSServerHandshakeError
from aiohttp.test_utils import RawTestServer, TestClient
from multidict import MultiDict

from components.apiserver.rest import query
from components.apiserver.rest.app import RestAPI
from components.apiserver.rest.remotecommand import Options, _size, exit_status, failure_status
from kubemu import _wire_auth, wire
from kubemu.api.authz import Decision
from kubemu.api.identity import authenticated
from kubemu.statedir import StateDir
from tests.conftest import DEADLINE

NODE = "n1"
PODS = "/api/v1/namespaces/default/pods"
# kubectl's side of the protocol, spelled out here: the module's constants must agree with it
V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
STDIN, STDOUT, ERROR, RESIZE, CLOSE = 0, 1, 3, 4, 255


def frame(channel: int, data: bytes) -> bytes:
    return bytes((channel,)) + data


# --- the pure parts

def options(query_string: str, exec_: bool = True) -> Options:
    return Options(MultiDict(pair.split("=", 1) for pair in query_string.split("&") if pair), exec_)


def test_options_read_the_query_as_kube_apiserver_does():
    o = options("command=sh&command=-c&command=exit 3&container=c&stdin=1&stdout=true&stderr=1")
    assert (o.command, o.container, o.stdin, o.stdout, o.stderr, o.tty) == (["sh", "-c", "exit 3"], "c", True,
                                                                           True, True, False)
    o = options("command=sh&stdout=1&stderr=1&tty=1")
    assert o.tty and o.stdout and not o.stderr, "a terminal has one output"
    o = options("command=ignored&stdout=1", exec_=False)
    assert o.command == [] and o.container is None


def test_options_refuse_what_kube_apiserver_refuses():
    for query_string, exec_, message in (
            ("stdout=1", True, "you must specify at least one command for the container"),
            ("command=true&tty=1", True, "you must specify at least 1 of stdin, stdout, stderr"),
            ("command=true&tty=1&stderr=1", True, "you must specify at least 1 of stdin, stdout, stderr"),
            ("", False, "you must specify at least 1 of stdin, stdout, stderr")):
        with pytest.raises(wire.BadRequest) as caught:
            options(query_string, exec_)
        assert caught.value.message == message
    with pytest.raises(query.QueryError, match='stdin: Invalid value: "maybe"'):
        options("command=true&stdin=maybe")


def test_exit_status_is_what_kubelets_exec_writes_on_the_error_channel():
    assert exit_status(0, ["true"]) == {"metadata": {}, "status": "Success"}
    assert exit_status(3, ["sh", "-c", "exit 3"]) == {
        "metadata": {}, "status": "Failure",
        "message": "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}


def test_a_kubelets_refusal_is_a_failure_status():
    assert failure_status(wire.BadRequest('container "c" is not running')) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'container "c" is not running', "reason": "BadRequest", "code": 400}
    got = failure_status(wire.Internal("OCI runtime exec failed", {"reason": "StartError"}))
    assert (got["code"], got["reason"], got["message"]) == (500, "InternalError",
                                                           "Internal error occurred: OCI runtime exec failed")


@pytest.mark.parametrize("data, size", [
    (b'{"Width": 80, "Height": 24}', (80, 24)),
    (b'{"Width": 80, "Height": 24, "Other": 1}', (80, 24)),
    (b'{"Width": 0, "Height": 24}', None),
    (b'{"Width": 80, "Height": -1}', None),
    (b'{"Width": 80.5, "Height": 24}', None),
    (b'{"Width": true, "Height": 24}', None),
    (b'{"Width": "80", "Height": 24}', None),
    (b'{"Width": 80}', None),
    (b'[80, 24]', None),
    (b'null', None),
    (b'not json', None),
    (b'\xff\xfe', None),
    (b'', None),
])
def test_a_resize_message_is_two_positive_integers_or_nothing(data, size):
    assert _size(data) == size


# --- end to end: RestAPI, a WebSocket client, and a fake kubelet

class FakeKubelet:
    """exec's behaviour is chosen by the command's first word (see `exec`); every call is
    recorded with the identity that made it."""

    def __init__(self):
        self.calls: list[tuple[str, str | None, dict]] = []
        self.inputs: dict[str, asyncio.Queue] = {}
        self.closed = asyncio.Event()  # a stream's generator was closed before its end

    def handlers(self) -> dict:
        return {"exec": self.exec, "attach": self.attach, "stdin": self.stdin, "resize": self.resize}

    def _record(self, method: str, params: dict) -> None:
        self.calls.append((method, wire.peer_identity.get(), params))

    def seen(self, method: str) -> list[dict]:
        return [params for m, _, params in self.calls if m == method]

    async def exec(self, namespace: str, pod: str, uid: str, container: str, command: list[str], session: str,
                   stdin: bool = False, tty: bool = False):
        self._record("exec", {"namespace": namespace, "pod": pod, "uid": uid, "container": container,
                              "command": command, "session": session, "stdin": stdin, "tty": tty})
        inputs = self.inputs[session] = asyncio.Queue()
        verb = command[0]
        if verb == "refuse":  # as the kubelet refuses a container that is not running
            raise wire.BadRequest('container "c" is not running')
        if verb == "missing":
            raise wire.Internal('OCI runtime exec failed: exec failed: unable to start container process: exec: '
                                '"missing": executable file not found in $PATH: unknown', {"reason": "StartError"})
        finished = False
        try:
            yield {"started": True}
            if verb == "talk":  # talk [CODE]
                yield {"fd": 1, "data": b"out"}
                yield {"fd": 2, "data": b"err"}
                yield {"exit": int(command[1]) if len(command) > 1 else 0}
            elif verb == "cat":  # its input back as output, until the input ends
                while (got := await inputs.get())[0] == "data":
                    yield {"fd": 1, "data": got[1]}
                yield {"exit": 0}
            elif verb == "size":  # the first size the terminal is given
                got = await inputs.get()
                yield {"fd": 1, "data": f"{got[1]}x{got[2]}".encode()}
                yield {"exit": 0}
            elif verb == "die":  # the kubelet fails half-way
                yield {"fd": 1, "data": b"partial"}
                raise wire.Unavailable("the kubelet is shutting down")
            elif verb == "hang":
                yield {"fd": 1, "data": b"ready"}
                await asyncio.Event().wait()
            finished = True
        finally:
            if not finished:
                self.closed.set()

    async def attach(self, namespace: str, pod: str, uid: str, container: str, session: str, stdin: bool = False):
        self._record("attach", {"namespace": namespace, "pod": pod, "uid": uid, "container": container,
                                "session": session, "stdin": stdin})
        yield {"started": True}
        yield {"fd": 1, "data": b"attached"}

    async def stdin(self, session: str, data: bytes = b"", close: bool = False) -> None:
        self._record("stdin", {"session": session, "data": data, "close": close})
        if session not in self.inputs:
            raise wire.NotFound(f"no exec session {session!r}")
        await self.inputs[session].put(("close",) if close else ("data", data))

    def resize(self, session: str, width: int, height: int) -> None:
        self._record("resize", {"session": session, "width": width, "height": height})
        self.inputs[session].put_nowait(("resize", width, height))


def pod(name: str, node: str | None = NODE, containers=("c",), annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "annotations": annotations or {}},
            "spec": {**({"nodeName": node} if node else {}),
                     "containers": [{"name": c, "image": "busybox"} for c in containers]}}


OBJECTS = {p["metadata"]["name"]: p for p in (
    pod("web"), pod("multi", containers=("a", "b")), pod("pending", node=None), pod("elsewhere", node="n2"),
    pod("static", annotations={"kubernetes.io/config.mirror": "static-uid"}))}


class BearerAuthn:
    """`Authorization: Bearer <user name>`."""

    async def authenticate(self, der, authorization):
        return authenticated(authorization.removeprefix("Bearer ")) if authorization else None


class Policy:
    """admin may do anything; getter may only get (not create) pods and their subresources."""

    def __init__(self):
        self.asked: list = []

    def authorize(self, attrs):
        self.asked.append(attrs)
        return Decision(attrs.user.name == "admin" or (attrs.user.name == "getter" and attrs.verb == "get"))


@pytest.fixture
def state():
    path = tempfile.mkdtemp(prefix="krc-")  # short: ipc socket paths are limited to 107 bytes
    try:
        yield Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run(state: Path, scenario) -> None:
    """`scenario(http, kubelet)` against a RestAPI whose node n1 has the fake kubelet (n2 has none)."""
    async def get(resource, name, namespace=None):
        if resource != "pods" or name not in OBJECTS:
            raise wire.NotFound(f'{resource} "{name}" not found', {"kind": resource, "name": name})
        return copy.deepcopy(OBJECTS[name])

    async def main():
        secrets = _wire_auth.secrets_dir(state)
        _wire_auth.ensure_secret(secrets, _wire_auth.KUBELET_CLIENT)
        _wire_auth.ensure_secret(secrets, _wire_auth.node_identity("n2"))
        StateDir(state).node_dir(NODE).mkdir(mode=0o700, parents=True)
        StateDir(state).node_dir("n2").mkdir(mode=0o700, parents=True)
        kubelet = FakeKubelet()
        server = wire.Server(StateDir(state).kubelet_endpoint(NODE), kubelet.handlers(), name="fake-kubelet",
                             auth=wire.ServerAuth(secrets))
        await server.start()
        rest = RestAPI({"get": get}, BearerAuthn(), Policy(), state_dir=state,
                       kubelet_credentials=_wire_auth.state_credentials(state, _wire_auth.KUBELET_CLIENT))
        http = TestClient(RawTestServer(rest.serve))
        await http.start_server()
        try:
            await asyncio.wait_for(scenario(http, kubelet), DEADLINE)
        finally:
            await http.close()
            await rest.close()
            await server.close()
    asyncio.run(main())


def admin(**headers) -> dict:
    return {"Authorization": "Bearer admin", **headers}


async def connect(http: TestClient, path: str, protocol: str = V5, user: str = "admin"):
    ws = await http.ws_connect(path, protocols=(protocol,), headers={"Authorization": f"Bearer {user}"})
    assert ws.protocol == protocol
    return ws


async def to_the_end(ws) -> tuple[dict[int, bytes], dict | None]:
    """What each output channel carried and the Status on channel 3, until the server closes."""
    out: dict[int, bytes] = {}
    end = None
    async for msg in ws:
        assert msg.type == WSMsgType.BINARY, msg
        channel, data = msg.data[0], msg.data[1:]
        if channel == ERROR:
            assert end is None, "two Statuses"
            end = json.loads(data)
        else:
            assert end is None, "output after the Status"
            out[channel] = out.get(channel, b"") + data
    return out, end


async def receive(ws) -> tuple[int, bytes]:
    msg = await ws.receive()
    assert msg.type == WSMsgType.BINARY, msg
    return msg.data[0], msg.data[1:]


async def status_of(response) -> tuple[int, dict]:
    body = await response.json()
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == response.status
    return response.status, body


SUCCESS = {"metadata": {}, "status": "Success"}


def test_exec_relays_stdout_stderr_and_the_exit_status_then_closes_normally(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/web/exec?command=talk&command=3&stdout=1&stderr=1")
        out, end = await to_the_end(ws)
        assert out == {1: b"out", 2: b"err"} and end == exit_status(3, ["talk", "3"])
        assert ws.close_code == 1000
        [params] = kubelet.seen("exec")
        assert params == {"namespace": "default", "pod": "web", "uid": "uid-web", "container": "c",
                          "command": ["talk", "3"], "session": params["session"], "stdin": False, "tty": False}
        assert {who for _, who, _ in kubelet.calls} == {_wire_auth.KUBELET_CLIENT}
        ws = await connect(http, f"{PODS}/web/exec?command=talk&stdout=1&stderr=1", protocol=V4)
        assert await to_the_end(ws) == ({1: b"out", 2: b"err"}, SUCCESS)
    run(state, scenario)


def test_only_the_outputs_asked_for_are_relayed_and_a_tty_merges_stderr(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/web/exec?command=talk&stderr=1")
        assert await to_the_end(ws) == ({2: b"err"}, SUCCESS)
        ws = await connect(http, f"{PODS}/web/exec?command=talk&stdout=1")
        assert await to_the_end(ws) == ({1: b"out"}, SUCCESS)
        ws = await connect(http, f"{PODS}/web/exec?command=talk&stdout=1&stderr=1&tty=1")
        assert await to_the_end(ws) == ({1: b"outerr"}, SUCCESS)
        assert kubelet.seen("exec")[-1]["tty"] is True
    run(state, scenario)


def test_a_static_pod_is_found_by_its_mirrors_uid(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/static/exec?command=talk&stdout=1")
        assert await to_the_end(ws) == ({1: b"out"}, SUCCESS)
        assert kubelet.seen("exec")[-1]["uid"] == "static-uid"
    run(state, scenario)


def test_stdin_frames_reach_the_session_and_the_v5_close_ends_its_input(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/web/exec?command=cat&stdin=1&stdout=1&stderr=1")
        await ws.send_bytes(frame(STDIN, b"hello"))
        assert await receive(ws) == (STDOUT, b"hello")
        await ws.send_bytes(frame(STDIN, b""))  # nothing to deliver
        await ws.send_str("text frames are not the protocol's")
        await ws.send_bytes(frame(STDIN, b"world"))
        assert await receive(ws) == (STDOUT, b"world")
        await ws.send_bytes(bytes((CLOSE, STDIN)))
        assert await to_the_end(ws) == ({}, SUCCESS)
        session = kubelet.seen("exec")[0]["session"]
        assert kubelet.seen("stdin") == [{"session": session, "data": b"hello", "close": False},
                                         {"session": session, "data": b"world", "close": False},
                                         {"session": session, "data": b"", "close": True}]
        assert kubelet.seen("exec")[0]["stdin"] is True
    run(state, scenario)


def test_stdin_is_not_relayed_unless_asked_for(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/web/exec?command=hang&stdout=1")
        assert await receive(ws) == (STDOUT, b"ready")
        await ws.send_bytes(frame(STDIN, b"ignored"))
        await ws.send_bytes(bytes((CLOSE, STDIN)))
        await ws.send_bytes(frame(RESIZE, b'{"Width": 80, "Height": 24}'))  # no tty
        await ws.close()
        await kubelet.closed.wait()
        assert kubelet.seen("stdin") == [] and kubelet.seen("resize") == []
    run(state, scenario)


def test_a_resize_message_reaches_the_sessions_terminal(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/web/exec?command=size&stdin=1&stdout=1&tty=1")
        await ws.send_bytes(frame(RESIZE, b"not json"))  # dropped, the session goes on
        await ws.send_bytes(frame(RESIZE, b'{"Width": 0, "Height": 24}'))
        await ws.send_bytes(frame(RESIZE, b'{"Width": 120, "Height": 40}'))
        assert await to_the_end(ws) == ({1: b"120x40"}, SUCCESS)
        session = kubelet.seen("exec")[0]["session"]
        assert kubelet.seen("resize") == [{"session": session, "width": 120, "height": 40}]
    run(state, scenario)


def test_attach_relays_the_containers_output_and_ends_with_success(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/multi/attach?container=b&stdout=1")
        assert await to_the_end(ws) == ({1: b"attached"}, SUCCESS)
        [params] = kubelet.seen("attach")
        assert params == {"namespace": "default", "pod": "multi", "uid": "uid-multi", "container": "b",
                          "session": params["session"], "stdin": False}, "no -i: the container's stdin is left alone"
    run(state, scenario)


def test_a_plain_get_or_an_spdy_upgrade_is_told_to_use_a_websocket(state):
    async def scenario(http, kubelet):
        path = f"{PODS}/web/exec?command=talk&stdout=1"
        code, body = await status_of(await http.get(path, headers=admin()))
        assert code == 400 and body["reason"] == "BadRequest" and "WebSocket" in body["message"]
        spdy = admin(Connection="Upgrade", Upgrade="SPDY/3.1", **{"X-Stream-Protocol-Version": V4})
        code, body = await status_of(await http.post(path, headers=spdy))
        assert code == 400 and "WebSocket" in body["message"] and "SPDY" in body["message"]
        code, body = await status_of(await http.get(f"{PODS}/web/attach?stdout=1", headers=spdy))
        assert code == 400 and "WebSocket" in body["message"]
        assert kubelet.calls == []
    run(state, scenario)


def test_a_websocket_without_a_known_subprotocol_is_refused(state):
    async def scenario(http, kubelet):
        with pytest.raises(WSServerHandshakeError) as caught:
            await http.ws_connect(f"{PODS}/web/exec?command=talk&stdout=1", protocols=("v3.channel.k8s.io",),
                                  headers=admin())
        assert caught.value.status == 400
        assert kubelet.calls == []
    run(state, scenario)


def test_what_is_checked_before_the_upgrade_is_an_http_status(state):
    async def scenario(http, kubelet):
        async def refused(path: str) -> tuple[int, dict]:
            return await status_of(await http.get(path, headers=admin()))
        code, body = await refused(f"{PODS}/web/exec?stdout=1")
        assert (code, body["message"]) == (400, "you must specify at least one command for the container")
        code, body = await refused(f"{PODS}/web/exec?command=talk")
        assert (code, body["message"]) == (400, "you must specify at least 1 of stdin, stdout, stderr")
        code, body = await refused(f"{PODS}/pending/exec?command=talk&stdout=1")
        assert (code, body["message"]) == (400, 'pod "pending" does not have a host assigned')
        code, body = await refused(f"{PODS}/multi/exec?command=talk&stdout=1")
        assert (code, body["message"]) == (400, "a container name must be specified for pod multi, choose one of: "
                                                "[a b]")
        code, body = await refused(f"{PODS}/web/exec?command=talk&stdout=1&container=nope")
        assert (code, body["message"]) == (400, "container nope is not valid for pod web")
        code, body = await refused(f"{PODS}/nope/exec?command=talk&stdout=1")
        assert (code, body["reason"]) == (404, "NotFound")
        code, body = await refused(f"{PODS}/elsewhere/exec?command=talk&stdout=1")
        assert (code, body["reason"]) == (503, "ServiceUnavailable") and 'node "n2"' in body["message"]
        assert kubelet.calls == []
    run(state, scenario)


def test_a_node_without_a_kubelet_socket_is_503_for_a_websocket_too(state):
    async def scenario(http, kubelet):
        with pytest.raises(WSServerHandshakeError) as caught:
            await connect(http, f"{PODS}/elsewhere/exec?command=talk&stdout=1")
        assert caught.value.status == 503
    run(state, scenario)


def test_a_websocket_get_must_also_be_allowed_to_create(state):
    async def scenario(http, kubelet):
        with pytest.raises(WSServerHandshakeError) as caught:
            await connect(http, f"{PODS}/web/exec?command=talk&stdout=1", user="getter")
        assert caught.value.status == 403
        code, body = await status_of(await http.get(f"{PODS}/web/exec?command=talk&stdout=1",
                                                    headers={"Authorization": "Bearer getter"}))
        assert code == 403 and body["message"] == ('pods "web" is forbidden: User "getter" cannot create resource '
                                                   '"pods/exec" in API group "" in the namespace "default"')
        code, _ = await status_of(await http.get(f"{PODS}/web/attach?stdout=1",
                                                 headers={"Authorization": "Bearer getter"}))
        assert code == 403
        assert kubelet.calls == []
    run(state, scenario)


def test_a_kubelet_error_after_the_upgrade_is_a_failure_status_on_channel_3(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/web/exec?command=refuse&stdout=1")
        assert await to_the_end(ws) == ({}, failure_status(wire.BadRequest('container "c" is not running')))
        assert ws.close_code == 1000
        ws = await connect(http, f"{PODS}/web/exec?command=missing&stdout=1")
        _, end = await to_the_end(ws)
        assert (end["status"], end["code"], end["reason"]) == ("Failure", 500, "InternalError")
        assert end["message"].endswith('exec: "missing": executable file not found in $PATH: unknown')
        ws = await connect(http, f"{PODS}/web/exec?command=die&stdout=1")
        out, end = await to_the_end(ws)
        assert out == {1: b"partial"}
        assert end == failure_status(wire.Unavailable("the kubelet is shutting down"))
        assert end["code"] == 503
    run(state, scenario)


def test_the_client_going_away_cancels_the_kubelets_stream(state):
    async def scenario(http, kubelet):
        ws = await connect(http, f"{PODS}/web/exec?command=hang&stdin=1&stdout=1")
        assert await receive(ws) == (STDOUT, b"ready")
        assert not kubelet.closed.is_set()
        await ws.close()
        await kubelet.closed.wait()  # its generator was closed: the kubelet's session ends
    run(state, scenario)
