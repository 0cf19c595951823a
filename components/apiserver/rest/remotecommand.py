"""pods/exec and pods/attach: kubectl's remote command protocol over WebSocket, relayed to the kubelet.

kubectl (1.30 and later) opens `pods/<name>/exec?command=...&container=...&stdin=&stdout=&stderr=&tty=`
(or `attach`) as a WebSocket, subprotocol `v5.channel.k8s.io`. Every binary message is one byte
naming a channel, then data: 0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize (JSON
{"Width", "Height"}); in v5, [255, channel] closes a channel (the client's stdin has ended). When
the command ends the server writes one meta/v1 Status on channel 3 (Success, or NonZeroExitCode
with the code as the ExitCode cause, which kubectl makes its own exit code) and closes the
connection normally. v4 is the same without the close signal. SPDY, the protocol kubectl falls
back to when a WebSocket upgrade fails, is not served: it gets a 400 Status that says so.

Kubernetes' apiserver hands these requests to the kubelet of the pod's node; so does kubemu's,
over the wire to the kubelet's streaming server (kubelet/streaming.py) as the identity
kube-apiserver-kubelet-client. What can be checked before the upgrade is (the pod, its node,
the container, a kubelet that serves), so kubectl gets those errors as HTTP Statuses; what the
kubelet says after it (container not running, no such program) ends the session on channel 3.
"""
from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path

from aiohttp import WSMsgType, web

from kubemu import wire
from kubemu.statedir import StateDir

from .. import caller, podlogs
from . import query, status

log = logging.getLogger("kubemu.apiserver.rest")

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
PROTOCOLS = (V5, V4)
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
MAX_MESSAGE = 1024 * 1024  # one WebSocket message from the client (kubectl sends <= 32 KiB)
OPEN_TIMEOUT = 5.0         # to reach the kubelet (it answers before it starts the command)
# Input waits while the command does not read it (that wait is the flow control); a kubelet
# that goes away fails the call at once, so this bounds only a kubelet that hangs.
INPUT_TIMEOUT = 24 * 3600.0
ACK_EVERY = 256 * 1024     # output bytes passed on before the kubelet is told (its window is 1 MiB)


class Options:
    """The query of an exec or attach request, checked as kube-apiserver's NewOptions does."""

    def __init__(self, q, exec_: bool):
        self.command = q.getall("command", []) if exec_ else []
        self.container = q.get("container") or None
        self.stdin = query.boolean(q, "stdin")
        self.stdout = query.boolean(q, "stdout")
        self.tty = query.boolean(q, "tty")
        self.stderr = query.boolean(q, "stderr") and not self.tty  # a terminal has one output
        if exec_ and not self.command:
            raise wire.BadRequest("you must specify at least one command for the container")
        if not (self.stdin or self.stdout or self.stderr):  # after a tty took stderr, as kubelet's NewOptions
            raise wire.BadRequest("you must specify at least 1 of stdin, stdout, stderr")


def exit_status(code: int, command: list[str]) -> dict:
    """The Status kubelet's exec writes on the error channel for a command's exit code."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command "
                       f"[{' '.join(command)}], exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def failure_status(err: wire.WireError) -> dict:
    """What the kubelet refused, as a Status on the error channel."""
    return status.from_wire(err)[1]


def frame(channel: int, data: bytes) -> bytes:
    return bytes((channel,)) + data


class RemoteCommand:
    """Serves pods/exec and pods/attach; one wire Client per node's kubelet, made when first used."""

    def __init__(self, state_dir: Path | None, credentials: tuple[str, str] | None, audit=None):
        self.state = StateDir(state_dir) if state_dir is not None else None
        self.credentials = credentials
        self.audit = audit  # AuditLog.record: one line per session opened
        self.kubelets: dict[str, wire.Client] = {}

    async def close(self) -> None:
        for client in self.kubelets.values():
            await client.close()
        self.kubelets.clear()

    def kubelet(self, node: str) -> wire.Client:
        """The wire Client of `node`'s kubelet; a 500-class error when it serves no exec/attach."""
        if self.state is None or not podlogs.is_segment(node):
            raise wire.Internal(f'error dialing backend: no kubelet endpoint for node "{node}"')
        if not self.state.node_dir(node).is_dir():
            raise wire.Unavailable(podlogs.elsewhere(node))
        endpoint = self.state.kubelet_endpoint(node)
        if not Path(endpoint.removeprefix("ipc://")).exists():
            raise wire.Unavailable(f'error dialing backend: the kubelet of node "{node}" serves no '
                                   f"exec/attach (a hollow node, or a kubelet that is not running)")
        client = self.kubelets.get(node)
        if client is None:
            client = self.kubelets[node] = wire.Client(endpoint, timeout=OPEN_TIMEOUT, credentials=self.credentials)
        return client

    async def serve(self, request: web.Request, pod: dict, subresource: str) -> web.StreamResponse:
        opts = Options(request.query, subresource == "exec")
        container = podlogs.pod_container(pod, opts.container)
        uid = podlogs.pod_uid(pod)
        if not podlogs.is_segment(uid):
            raise wire.BadRequest(f'container "{container}" in pod "{pod["metadata"]["name"]}" not found')
        client = self.kubelet(podlogs.pod_node(pod))
        ws = web.WebSocketResponse(protocols=PROTOCOLS, autoping=True, max_msg_size=MAX_MESSAGE)
        ready = ws.can_prepare(request)
        if not ready.ok:
            raise wire.BadRequest(f"pods/{subresource} is served over WebSocket ({V5}, {V4}); "
                                  "SPDY and plain requests are not supported by kubemu")
        if ready.protocol not in PROTOCOLS:
            raise wire.BadRequest(f"pods/{subresource}: none of the WebSocket subprotocols offered is "
                                  f"supported ({V5}, {V4})")
        meta = pod["metadata"]
        session = uuid.uuid4().hex
        params = {"namespace": meta["namespace"], "pod": meta["name"], "uid": uid, "container": container,
                  "session": session, "stdin": opts.stdin}
        if subresource == "exec":
            params.update(command=opts.command, tty=opts.tty)
        await ws.prepare(request)
        if self.audit is not None:
            self.audit(verb="create", resource=f"pods/{subresource}", namespace=meta["namespace"],
                       name=meta["name"], code=101, user=caller.caller_name())
        stream = client.stream(subresource, params, timeout=OPEN_TIMEOUT)
        try:
            await self._relay(ws, client, stream, opts, session, ready.protocol)
        except ConnectionError:
            pass  # the client went away while output was sent
        except Exception as exc:  # the upgraded connection has no room for a 500: one line, then close
            log.error("%s of pod %s/%s failed: %s: %s", subresource, meta["namespace"], meta["name"],
                      type(exc).__name__, exc)
        finally:
            await stream.aclose()
            if not ws.closed:
                await ws.close()
        return ws

    async def _relay(self, ws: web.WebSocketResponse, client: wire.Client, stream, opts: Options,
                     session: str, protocol: str) -> None:
        try:
            await stream.__anext__()  # {"started": True}: the session takes input now
        except StopAsyncIteration:
            return
        except wire.WireError as err:
            await ws.send_bytes(frame(ERROR, json.dumps(failure_status(err)).encode()))
            return
        inputs = asyncio.ensure_future(self._input(ws, client, opts, session, protocol))
        try:
            outputs = asyncio.ensure_future(self._output(ws, client, stream, opts, session))
            done, _ = await asyncio.wait({inputs, outputs}, return_when=asyncio.FIRST_COMPLETED)
            if outputs in done:
                end = outputs.result()
            else:
                outputs.cancel()
                await asyncio.gather(outputs, return_exceptions=True)
                end = inputs.result()  # None: the client went away, and the session ends with it
            if end is not None:
                await ws.send_bytes(frame(ERROR, json.dumps(end).encode()))
        finally:
            inputs.cancel()
            await asyncio.gather(inputs, return_exceptions=True)

    @staticmethod
    async def _output(ws: web.WebSocketResponse, client: wire.Client, stream, opts: Options, session: str) -> dict:
        """Relay the kubelet's output, acknowledging what was passed on (or dropped: a stream the
        client did not ask for); the Status for channel 3 when the command has ended."""
        wanted = {STDOUT: opts.stdout, STDERR: opts.stderr}
        unacked = 0
        try:
            async for item in stream:
                if "data" in item:
                    fd = STDOUT if opts.tty else item["fd"]  # a terminal has one output
                    if wanted.get(fd):
                        await ws.send_bytes(frame(fd, item["data"]))
                    unacked += len(item["data"])
                    if unacked >= ACK_EVERY:
                        try:
                            await client.call("ack", {"session": session, "size": unacked}, timeout=INPUT_TIMEOUT)
                        except wire.NotFound:
                            pass  # the command has ended: its exit status is on its way
                        unacked = 0
                elif "exit" in item:
                    return exit_status(item["exit"], opts.command)
        except wire.WireError as err:
            return failure_status(err)
        return exit_status(0, [])  # an attach ends with its container, as CRI's attach stream

    @staticmethod
    async def _input(ws: web.WebSocketResponse, client: wire.Client, opts: Options, session: str,
                     protocol: str) -> dict | None:
        """Relay what the client sends until it closes the connection (None), or until input
        cannot be delivered (the failure Status that ends the session)."""
        async for msg in ws:
            if msg.type != WSMsgType.BINARY or not msg.data:
                continue  # the protocols are binary; anything else is ignored, as kubelet's
            channel, data = msg.data[0], msg.data[1:]
            try:
                if channel == STDIN and opts.stdin and data:
                    await client.call("stdin", {"session": session, "data": data}, timeout=INPUT_TIMEOUT)
                elif channel == RESIZE and opts.tty:
                    size = _size(data)
                    if size is not None:
                        await client.call("resize", {"session": session, "width": size[0], "height": size[1]})
                elif channel == CLOSE and protocol == V5 and data[:1] == bytes((STDIN,)) and opts.stdin:
                    await client.call("stdin", {"session": session, "close": True})
            except (wire.NotFound, wire.BadRequest):
                pass  # the session ended meanwhile, or a size out of range: nothing to deliver
            except wire.WireError as err:
                log.info("exec session %s: input not delivered: %s", session, err)
                return failure_status(err)
        return None


def _size(data: bytes) -> tuple[int, int] | None:
    try:
        size = json.loads(data)
        width, height = size["Width"], size["Height"]
    except (ValueError, TypeError, KeyError):
        return None
    if type(width) is not int or type(height) is not int or width <= 0 or height <= 0:
        return None
    return width, height
