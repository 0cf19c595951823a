"""kubelet/streaming.py with real processes: a Runtime with real shims and containers (the test
process plays init), the StreamingServer on an ipc endpoint, driven by a wire Client as the
apiserver drives it."""
from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import psutil
import pytest

from kubelet import holder
from kubelet.runtime import Runtime
from kubelet.streaming import CHUNK, HANGUP_GRACE, WINDOW, StreamingServer, exit_code
from kubemu import _wire_auth, wire
from tests.conftest import DEADLINE, alive, wait_for
from tests.kubelet.test_console import ECHO
from tests.kubelet.test_runtime import POD, exited, running, runtime, spec  # noqa: F401 - fixtures
from tests.kubelet.test_shim import SLEEP, make_cgroup, node, py, subreaper  # noqa: F401 - fixtures
from tests.kubelet.test_shimwatch import until

NAMESPACE, NAME, UID = POD.split("_")  # the pod directory test_runtime's containers live in
FOO = "from-the-container-spec"


def target(container: str = "c") -> dict:
    return {"namespace": NAMESPACE, "pod": NAME, "uid": UID, "container": container}


def exec_params(command: list[str], session: str = "s1", container: str = "c", **kw) -> dict:
    return {**target(container), "command": command, "session": session, **kw}


@pytest.fixture
def sleeper(runtime, tmp_path):  # noqa: F811 - the fixture imported above
    """A running container "c" whose spec sets FOO, a PATH starting with its own bin directory
    (holding `hello`, a program the test process's PATH does not find) and a working directory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hello = bin_dir / "hello"
    hello.write_text("#!/bin/sh\necho hello from the containers PATH\n")
    hello.chmod(0o755)
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = {"FOO": FOO, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
    runtime.start(spec(runtime, py(SLEEP), env=env, cwd=str(cwd)))
    running(runtime)
    yield cwd
    runtime.stop(runtime.pod_dir(POD), "c", grace=5)
    exited(runtime)


def serve(rt: Runtime, scenario, secrets_dir: str | None = None, credentials=None, with_server: bool = False) -> None:
    """Run `scenario(client)` (`scenario(client, server)` with_server) against a StreamingServer
    over `rt`, within DEADLINE."""
    async def main():
        endpoint = wire.ipc_endpoint(Path(rt.node_dir).parent / "w", "kubelet.sock")
        server = StreamingServer(rt, endpoint, secrets_dir)
        await server.start()
        client = wire.Client(endpoint, timeout=DEADLINE, credentials=credentials)
        try:
            await asyncio.wait_for(scenario(client, server) if with_server else scenario(client), DEADLINE)
        finally:
            await client.close()
            await server.close()
    asyncio.run(main())


async def started(stream: wire.Stream) -> wire.Stream:
    assert await stream.__anext__() == {"started": True}
    return stream


async def outcome(stream) -> tuple[bytes, bytes, int | None]:
    """(stdout, stderr, exit code) of an exec stream read to its end."""
    out = {1: b"", 2: b""}
    code = None
    async for item in stream:
        if "data" in item:
            assert code is None, "output after the exit code"
            out[item["fd"]] += item["data"]
        elif "exit" in item:
            code = item["exit"]
        else:
            assert item == {"started": True}
    return out[1], out[2], code


async def output_until(stream, text: bytes) -> bytes:
    """What the stream's output items carry, up to and including `text`."""
    seen = b""
    while text not in seen:
        item = await stream.__anext__()
        seen += item.get("data", b"")
    return seen


# --- exec

def test_exit_code_maps_a_death_by_signal_as_runtimes_do():
    assert [exit_code(0), exit_code(3), exit_code(-signal.SIGKILL), exit_code(-signal.SIGTERM)] == [0, 3, 137, 143]


def test_exec_runs_in_the_containers_env_and_cwd_with_stdout_and_stderr_apart(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        script = "echo $FOO; pwd; echo to-stderr >&2; exit 3"
        out, err, code = await outcome(client.stream("exec", exec_params(["sh", "-c", script])))
        assert (out, err, code) == (f"{FOO}\n{sleeper}\n".encode(), b"to-stderr\n", 3)
        out, err, code = await outcome(client.stream("exec", exec_params(["hello"])))
        assert (out, err, code) == (b"hello from the containers PATH\n", b"", 0)
    serve(runtime, scenario)


def test_a_death_by_signal_is_128_plus_the_signal(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        _, _, code = await outcome(client.stream("exec", exec_params(["sh", "-c", "kill -TERM $$"])))
        assert code == 128 + signal.SIGTERM
        _, _, code = await outcome(client.stream("exec", exec_params(["sh", "-c", "kill -KILL $$"])))
        assert code == 128 + signal.SIGKILL
    serve(runtime, scenario)


def test_stdin_reaches_the_command_and_close_is_its_end(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        stream = await started(client.stream("exec", exec_params(["cat"], stdin=True)))
        await client.call("stdin", {"session": "s1", "data": b"hello\n"})
        assert await output_until(stream, b"hello\n") == b"hello\n"
        await client.call("stdin", {"session": "s1", "data": b"world"})
        await client.call("stdin", {"session": "s1", "close": True})
        assert await outcome(stream) == (b"world", b"", 0)
    serve(runtime, scenario)


def test_without_stdin_the_command_reads_nothing(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        assert await outcome(client.stream("exec", exec_params(["cat"]))) == (b"", b"", 0)
    serve(runtime, scenario)


def test_a_tty_is_the_commands_controlling_terminal_and_takes_a_resize(runtime, sleeper):  # noqa: F811
    script = ("[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo is-a-tty; : </dev/tty && echo controlling; "
              "echo to-stderr >&2; read line; stty size; exit 4")

    async def scenario(client):
        stream = await started(client.stream("exec", exec_params(["sh", "-c", script], stdin=True, tty=True)))
        fds = set()
        out = b""
        code = None
        async for item in stream:
            if "data" in item:
                fds.add(item["fd"])
                out += item["data"]
                if out.endswith(b"to-stderr\r\n"):  # it reads now (the terminal would echo input at once)
                    await client.call("resize", {"session": "s1", "width": 123, "height": 45})
                    await client.call("stdin", {"session": "s1", "data": b"go\n"})
            elif "exit" in item:
                code = item["exit"]
        assert fds == {1} and code == 4, (fds, out, code)  # a terminal has one output
        assert out.replace(b"\r\n", b"\n").splitlines() == [b"is-a-tty", b"controlling", b"to-stderr", b"go",
                                                              b"45 123"]
    serve(runtime, scenario)


def test_closing_a_ttys_input_leaves_the_terminal_open(runtime, sleeper):  # noqa: F811
    """As containerd: a tty's stdin is not closed when the client's input ends (no ^D typed)."""
    async def scenario(client, server):
        stream = await started(client.stream("exec", exec_params(["cat"], "s1", stdin=True, tty=True)))
        await client.call("stdin", {"session": "s1", "data": b"typed\n"})
        assert (await output_until(stream, b"typed\r\ntyped")).count(b"typed") == 2  # echo, then cat's copy
        await client.call("stdin", {"session": "s1", "close": True})
        await client.call("stdin", {"session": "s1", "data": b"dropped\n"})
        session = server.sessions["s1"]
        await asyncio.sleep(0.5)  # give a wrongly delivered EOF or line time to show
        assert session.proc.returncode is None, "cat still runs: its terminal stays open"
        await stream.aclose()
        await until(lambda: session.proc.returncode is not None)
    serve(runtime, scenario, with_server=True)


def test_a_container_never_started_is_not_found(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        with pytest.raises(wire.NotFound, match=r'container not found \("nope"\)'):
            await outcome(client.stream("exec", exec_params(["true"], container="nope")))
        with pytest.raises(wire.NotFound):
            await outcome(client.stream("exec", {**exec_params(["true"]), "uid": "other-uid"}))
        with pytest.raises(wire.NotFound, match=r'container not found \("nope"\)'):
            await outcome(client.stream("attach", {**target("nope"), "session": "a1"}))
    serve(runtime, scenario)


def test_an_exited_container_is_a_bad_request(runtime):  # noqa: F811
    runtime.start(spec(runtime, py("pass"), name="done"))
    exited(runtime, "done")

    async def scenario(client):
        with pytest.raises(wire.BadRequest, match='container "done" is not running'):
            await outcome(client.stream("exec", exec_params(["true"], container="done")))
        with pytest.raises(wire.BadRequest, match='container "done" is not running'):
            await outcome(client.stream("attach", {**target("done"), "session": "a1"}))
    serve(runtime, scenario)


def test_a_name_that_leaves_the_pods_directory_is_a_bad_request(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        for field, value in (("container", ".."), ("pod", "a/b"), ("uid", "")):
            with pytest.raises(wire.BadRequest, match="invalid pod or container name"):
                await outcome(client.stream("exec", {**exec_params(["true"]), field: value}))
    serve(runtime, scenario)


def test_a_missing_program_is_runcs_message_and_frees_the_session(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        with pytest.raises(wire.Internal) as caught:
            await outcome(client.stream("exec", exec_params(["kubemu-no-such-program"])))
        assert caught.value.message == (
            'OCI runtime exec failed: exec failed: unable to start container process: exec: '
            '"kubemu-no-such-program": executable file not found in $PATH: unknown')
        assert caught.value.details == {"reason": "StartError"}
        assert await outcome(client.stream("exec", exec_params(["true"]))) == (b"", b"", 0)  # same session id
    serve(runtime, scenario)


def test_a_cancelled_stream_kills_the_execd_process_group(runtime, sleeper):  # noqa: F811
    """SIGHUP first, as a closed terminal; what ignores it (here both the command and its
    child) is SIGKILLed after HANGUP_GRACE."""
    script = "trap '' HUP; sleep 600 & echo $$ $!; wait"

    async def scenario(client):
        stream = await started(client.stream("exec", exec_params(["sh", "-c", script])))
        pids = [int(p) for p in (await output_until(stream, b"\n")).split()]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        await stream.aclose()
        await until(lambda: not any(alive(p) for p in pids))
    serve(runtime, scenario)


def test_a_cancelled_stream_ends_its_command_and_frees_its_session(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        stream = await started(client.stream("exec", exec_params(["sh", "-c", "echo $$; exec sleep 600"])))
        pid = int(await output_until(stream, b"\n"))
        await stream.aclose()
        await until(lambda: not alive(pid))

        async def reuse():  # the session id is free again once the kubelet has seen the stream go
            try:
                return await outcome(client.stream("exec", exec_params(["true"])))
            except wire.Conflict:
                return None
        while await reuse() is None:
            await asyncio.sleep(0.02)
    serve(runtime, scenario)


def test_output_waits_for_acknowledgements_beyond_the_window(runtime, sleeper):  # noqa: F811
    async def scenario(client, server):
        stream = await started(client.stream("exec", exec_params(["head", "-c", str(4 * WINDOW), "/dev/zero"])))
        received = 0
        while received < WINDOW:
            received += len((await stream.__anext__())["data"])
        with pytest.raises(asyncio.TimeoutError):  # nothing more until the caller says it passed it on
            while True:
                received += len((await asyncio.wait_for(stream.__anext__(), 0.5))["data"])
        assert received <= WINDOW + CHUNK, "one chunk may overshoot the window, no more"
        assert server.sessions["s1"].proc.returncode is None, "the command is held back by its pipe"
        size = received
        while True:
            try:
                await client.call("ack", {"session": "s1", "size": size})
            except wire.NotFound:  # it has ended: its exit is on its way
                pass
            item = await stream.__anext__()
            if "exit" in item:
                break
            size = len(item["data"])
            received += size
        assert received == 4 * WINDOW and item == {"exit": 0}
    serve(runtime, scenario, with_server=True)


def test_a_command_is_hung_up_when_its_container_ends(runtime, sleeper):  # noqa: F811
    async def scenario(client, server):
        stream = await started(client.stream("exec", exec_params(["sh", "-c", "echo $$; exec sleep 600"])))
        pid = int(await output_until(stream, b"\n"))
        server.container_ended(runtime.pod_dir(POD), "c", 1)  # another instance: not this session's
        assert alive(pid)
        server.container_ended(runtime.pod_dir(POD), "c", 0)
        _, _, code = await outcome(stream)
        assert code == 128 + signal.SIGHUP
    serve(runtime, scenario, with_server=True)


# The command prints its PID (its process group's id) and exits at once, leaving a child in its
# group that holds its stdout and writes on for ever.
LEAVES_A_WRITER = "echo $$; (while :; do echo x; sleep 0.2; done) & exit 5"
# An upper bound far above what the graces documented allow (never a speed test).
BOUND = 5 * (1 + HANGUP_GRACE)


def group_alive(pgid: int) -> bool:
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and alive(proc.pid):
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


async def end_group(stream, pgid: int) -> None:
    """Whatever the kubelet left of the group, the test ends it (it started it)."""
    await stream.aclose()
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    await until(lambda: not group_alive(pgid))


def test_a_cancelled_stream_hangs_up_the_group_its_command_left(runtime, sleeper):  # noqa: F811
    async def scenario(client, server):
        stream = await started(client.stream("exec", exec_params(["sh", "-c", LEAVES_A_WRITER], "s1")))
        pgid = int((await output_until(stream, b"\n")).split()[0])
        try:
            session = server.sessions["s1"]
            await until(lambda: session.proc.returncode is not None)  # it exited; its child writes on
            await stream.aclose()
            await asyncio.wait_for(until(lambda: not group_alive(pgid)), BOUND)
        finally:
            await end_group(stream, pgid)
    serve(runtime, scenario, with_server=True)


def leaves_running_and_stops(rt: Runtime):
    """Exec a command that leaves a process running, stop the container, and wait for that
    process to end (the test kills it if it does not, before failing)."""
    script = "sleep 600 </dev/null >/dev/null 2>&1 & echo $!"

    async def scenario(client):
        out, _, code = await outcome(client.stream("exec", exec_params(["sh", "-c", script])))
        left = int(out)
        try:
            assert code == 0 and alive(left)
            rt.stop(rt.pod_dir(POD), "c", grace=5)
            await until(lambda: (s := rt.state(rt.pod_dir(POD), "c")) and s.exited)
            await asyncio.wait_for(until(lambda: not alive(left)), BOUND)
        finally:
            try:
                os.kill(left, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await until(lambda: not alive(left))
    serve(rt, scenario)


def test_what_an_exec_leaves_running_dies_with_the_container(runtime, make_cgroup):  # noqa: F811
    """The exec'd command joins the container's cgroup (as runc puts it in the container's), and
    the container's shim kills what is left in its cgroup when the container ends."""
    procs = make_cgroup() / "cgroup.procs"  # skipped, with the reason, where there are no cgroups
    runtime.start(spec(runtime, py(SLEEP), cgroups=[str(procs)]))
    running(runtime)
    leaves_running_and_stops(runtime)


@pytest.mark.xfail(strict=True, raises=TimeoutError,
                   reason="without cgroups (README: kubectl exec) an exec'd process is the kubelet's child, outside "
                          "the container's shim tree, so what it leaves running survives the container's stop "
                          "(with cgroups it dies with the container)")
def test_without_cgroups_what_an_exec_leaves_running_outlives_the_container(runtime, sleeper):  # noqa: F811
    leaves_running_and_stops(runtime)


def test_an_exec_joins_the_containers_cgroups(runtime, make_cgroup):  # noqa: F811
    procs = make_cgroup() / "cgroup.procs"
    runtime.start(spec(runtime, py(SLEEP), cgroups=[str(procs)]))
    running(runtime)

    async def scenario(client):
        out, _, code = await outcome(client.stream("exec", exec_params(["sh", "-c", "cat /proc/self/cgroup"])))
        assert code == 0 and f":/{procs.parent.name}\n".encode() in out
    serve(runtime, scenario)
    runtime.stop(runtime.pod_dir(POD), "c", grace=5)
    exited(runtime)


@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox's namespaces need root (CAP_SYS_ADMIN)")
def test_an_exec_runs_in_the_pods_sandbox_and_a_dead_one_is_the_runtimes_error(runtime, tmp_path):  # noqa: F811
    info = holder.start(runtime.pod_dir(POD), "web-0", [], env=runtime.env_base)
    try:
        cwd = tmp_path / "work"
        cwd.mkdir()
        sandbox = {"pid": info.pid, "start": info.start_ticks, "id": "0123-1"}
        runtime.start(spec(runtime, py(SLEEP), cwd=str(cwd), sandbox=sandbox))
        running(runtime)

        async def scenario(client):
            command = ["sh", "-c", "hostname; pwd; readlink /proc/self/ns/net"]
            out, _, code = await outcome(client.stream("exec", exec_params(command)))
            assert (out, code) == (f"web-0\n{cwd}\nnet:[{info.netns_inode}]\n".encode(), 0)
            holder.kill(info.pid, info.start_ticks)
            await until(lambda: not alive(info.pid))
            with pytest.raises(wire.Internal) as caught:
                await outcome(client.stream("exec", exec_params(["true"])))
            assert caught.value.message == ('OCI runtime exec failed: exec failed: unable to start container '
                                            'process: sandbox container "0123-1" is not running: unknown')
        serve(runtime, scenario)
        runtime.stop(runtime.pod_dir(POD), "c", grace=5)
        exited(runtime)
    finally:
        holder.kill(info.pid, info.start_ticks)
        wait_for(lambda: not alive(info.pid), message="the holder to die")


def test_a_session_id_in_use_is_a_conflict(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        first = await started(client.stream("exec", exec_params(["sh", "-c", "echo $$; exec sleep 600"], "dup")))
        pid = int(await output_until(first, b"\n"))
        with pytest.raises(wire.Conflict, match="session 'dup' is already open"):
            await outcome(client.stream("exec", exec_params(["true"], "dup")))
        with pytest.raises(wire.Conflict):
            await outcome(client.stream("attach", {**target(), "session": "dup"}))
        assert await outcome(client.stream("exec", exec_params(["true"], "other"))) == (b"", b"", 0)
        await first.aclose()
        await until(lambda: not alive(pid))
    serve(runtime, scenario)


def test_input_for_an_unknown_session_is_not_found(runtime):  # noqa: F811
    async def scenario(client):
        with pytest.raises(wire.NotFound, match="no exec session 'nope'"):
            await client.call("stdin", {"session": "nope", "data": b"x"})
        with pytest.raises(wire.NotFound, match="no exec session 'nope'"):
            await client.call("resize", {"session": "nope", "width": 80, "height": 24})
        with pytest.raises(wire.BadRequest, match="width and height"):
            await client.call("resize", {"session": "nope", "width": 0, "height": 24})
    serve(runtime, scenario)


def test_only_the_apiserver_may_call(runtime, sleeper):  # noqa: F811
    secrets = Path(runtime.node_dir).parent / "pki" / "wire"
    apiserver = _wire_auth.load_credentials(_wire_auth.ensure_secret(secrets, _wire_auth.KUBELET_CLIENT))
    node_creds = _wire_auth.load_credentials(_wire_auth.ensure_secret(secrets, _wire_auth.node_identity("n1")))

    async def as_a_node(client):
        with pytest.raises(wire.Forbidden, match='User "system:node:n1" cannot use the kubelet'):
            await outcome(client.stream("exec", exec_params(["true"])))
        with pytest.raises(wire.Forbidden):
            await client.call("stdin", {"session": "s1", "data": b"x"})
    serve(runtime, as_a_node, str(secrets), node_creds)

    async def as_the_apiserver(client):
        assert await outcome(client.stream("exec", exec_params(["echo", "ok"]))) == (b"ok\n", b"", 0)
    serve(runtime, as_the_apiserver, str(secrets), apiserver)


# --- attach

# Prints "before", then "after" and "last" once the file its argument names exists, then exits.
TALKER = r"""
import os, sys, time
print("before", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
print("after", flush=True)
print("last", flush=True)
"""


def test_attach_follows_the_output_from_now_on_and_ends_with_the_container(runtime, tmp_path):  # noqa: F811
    go = tmp_path / "go"
    runtime.start(spec(runtime, py(TALKER, str(go))))
    running(runtime)
    log = Path(runtime.log_path(runtime.pod_dir(POD), "c", 0))

    async def scenario(client):
        await until(lambda: log.exists() and b"before" in log.read_bytes())
        stream = await started(client.stream("attach", {**target(), "session": "a1"}))
        go.touch()
        out = b""
        async for item in stream:  # to its end: the container exits
            assert item["fd"] == 1
            out += item["data"]
        assert out == b"after\nlast\n"
    serve(runtime, scenario)
    exited(runtime)



def echo_container(runtime: Runtime, **modes) -> Path:
    """A running ECHO container with these stdin/tty modes; its log file."""
    runtime.start(spec(runtime, py(ECHO), **modes))
    running(runtime)
    return Path(runtime.log_path(runtime.pod_dir(POD), "c", 0))


async def rest_of(stream) -> bytes:
    """The output an attach stream carries until it ends."""
    out = b""
    async for item in stream:
        out += item["data"]
    return out


def test_attach_writes_to_a_stdin_containers_pipe_and_its_close_is_eof_with_stdin_once(runtime):  # noqa: F811
    log = echo_container(runtime, stdin=True, stdin_once=True)

    async def scenario(client):
        await until(lambda: log.exists() and b"pipe" in log.read_bytes())
        peek = await started(client.stream("attach", {**target(), "session": "a0"}))
        await peek.aclose()  # an attach without stdin leaves a stdinOnce container's stdin alone
        stream = await started(client.stream("attach", {**target(), "session": "a1", "stdin": True}))
        await client.call("stdin", {"session": "a1", "data": b"hello\n"})
        assert await output_until(stream, b"got hello\n") == b"got hello\n"
        await client.call("stdin", {"session": "a1", "close": True})
        assert await rest_of(stream) == b"eof\n"  # to its end: the container read EOF and exited
    serve(runtime, scenario)
    assert exited(runtime).exit_code == 0


def test_attach_to_a_tty_container_types_on_its_terminal_and_resizes_it(runtime):  # noqa: F811
    log = echo_container(runtime, stdin=True, tty=True)

    async def scenario(client):
        await until(lambda: log.exists() and b"tty" in log.read_bytes())
        stream = await started(client.stream("attach", {**target(), "session": "a1", "stdin": True}))
        await client.call("resize", {"session": "a1", "width": 120, "height": 40})
        await client.call("stdin", {"session": "a1", "data": b"size\n"})
        assert (await output_until(stream, b"size 120 40\r\n")).endswith(b"size 120 40\r\n")
        await client.call("stdin", {"session": "a1", "data": b"\x04"})  # the user types ^D
        assert (await rest_of(stream)).endswith(b"eof\r\n")
    serve(runtime, scenario)
    assert exited(runtime).exit_code == 0


def test_input_for_an_attach_to_a_container_without_stdin_goes_nowhere(runtime):  # noqa: F811
    runtime.start(spec(runtime, py(SLEEP)))
    running(runtime)

    async def scenario(client):
        stream = await started(client.stream("attach", {**target(), "session": "a1", "stdin": True}))
        await client.call("stdin", {"session": "a1", "data": b"dropped\n", "close": True})
        await client.call("resize", {"session": "a1", "width": 80, "height": 24})  # no terminal: nothing to do
        await stream.aclose()
    serve(runtime, scenario)
    runtime.stop(runtime.pod_dir(POD), "c", grace=5)
    exited(runtime)


# --- stats

def test_stats_are_served_to_the_apiserver_and_the_cluster_admin_only(runtime):  # noqa: F811
    """The kubelet's `stats` answers what it is given; nodes/stats is the apiserver's to read,
    and the cluster admin's (kubemu top), no one else's."""
    secrets = Path(runtime.node_dir).parent / "pki" / "wire"
    summary = {"pods": [], "node": {"nodeName": "n1"}}

    def ask(identity: str):
        credentials = _wire_auth.load_credentials(_wire_auth.ensure_secret(secrets, identity))

        async def main():
            endpoint = wire.ipc_endpoint(Path(runtime.node_dir).parent / "w", "kubelet.sock")
            server = StreamingServer(runtime, endpoint, str(secrets), stats=lambda: summary)
            await server.start()
            client = wire.Client(endpoint, timeout=DEADLINE, credentials=credentials)
            try:
                return await client.call("stats", {})
            finally:
                await client.close()
                await server.close()
        return asyncio.run(main())

    assert ask(_wire_auth.KUBELET_CLIENT) == summary
    assert ask(_wire_auth.ADMIN) == summary
    with pytest.raises(wire.Forbidden, match='User "system:node:n1" cannot use the kubelet\'s \'stats\''):
        ask(_wire_auth.node_identity("n1"))


# --- port-forward (a pod without a sandbox of its own: the node's localhost; in a pod's network
# namespace: tests/kubelet/test_portforward.py and tests/test_e2e_portforward.py)

def forward_params(port: int, session: str = "f1") -> dict:
    return {"namespace": NAMESPACE, "pod": NAME, "uid": UID, "port": port, "session": session}


def test_a_port_forward_relays_both_ways_with_a_half_close_and_acks(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        async def upper(reader, writer):
            writer.write((await reader.read()).upper())  # all of it: the forward half-closed
            writer.close()
        pod_side = await asyncio.start_server(upper, "127.0.0.1", 0)
        try:
            stream = await started(client.stream("portforward", forward_params(pod_side.sockets[0].getsockname()[1])))
            await client.call("portforward_input", {"session": "f1", "data": b"hello"})
            await client.call("portforward_input", {"session": "f1", "close": True})
            assert [item async for item in stream] == [{"data": b"HELLO"}]
            with pytest.raises(wire.NotFound):  # the forward has ended
                await client.call("ack", {"session": "f1", "size": 5})
        finally:
            pod_side.close()
    serve(runtime, scenario)


def test_a_port_forward_that_cannot_connect_says_so_as_the_kubelet_does(runtime, sleeper):  # noqa: F811
    async def scenario(client):
        probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        free = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()
        with pytest.raises(wire.Internal) as err:
            await client.stream("portforward", forward_params(free)).__anext__()
        assert err.value.message.startswith(f"error forwarding port {free} to pod {POD}, uid : failed to execute "
                                            f'portforward in network namespace "host": failed to connect to '
                                            f'localhost:{free} inside namespace "{POD}", IPv4: dial tcp4 '
                                            f"127.0.0.1:{free}: connect: connection refused IPv6 ")
        with pytest.raises(wire.BadRequest, match="must be > 0"):
            await client.stream("portforward", forward_params(0)).__anext__()
        with pytest.raises(wire.NotFound, match=r'pod not found \("nope_'):
            await client.stream("portforward", {**forward_params(80), "pod": "nope"}).__anext__()
        with pytest.raises(wire.NotFound, match="no port-forward session"):
            await client.call("portforward_input", {"session": "f1", "data": b"x"})
    serve(runtime, scenario)
