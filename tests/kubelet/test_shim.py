"""kubelet/shim.py with real processes: `python -m kubelet.shim` started the way a kubelet
would, the test process playing init (a child subreaper) unless a test brings its own init."""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from kubelet.shim import instance_file, oom_killed, oom_kills, read_json
from kubemu import cgroups, prctl
from kubemu.child import proc_stat
from tests.conftest import alive, marked_processes, wait_for

# A container that reports how it was started, then waits for the test to open its FIFO.
REPORT = r"""
import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "foo": os.environ.get("FOO"),
                  "pgid": os.getpgid(0), "sid": os.getsid(0), "pid": os.getpid(),
                  "stdin": os.readlink("/proc/self/fd/0")}), flush=True)
print("to stderr", file=sys.stderr, flush=True)
open(sys.argv[1]).read()
sys.exit(3)
"""
SLEEP = "import time; time.sleep(600)"
# Ignores SIGTERM, says so, then sleeps.
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(600)")
# Two helpers, one in the container's process group and one that left it (a new session).
FAMILY = r"""
import subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
a = subprocess.Popen(sleep)
b = subprocess.Popen(sleep, start_new_session=True)
print(a.pid, b.pid, flush=True)
time.sleep(600)
"""
# Allocates (and touches) memory well past any limit the tests set, 8 MiB at a time.
HOG = r"""
import time
hoard = []
for _ in range(64):
    hoard.append(b"\x01" * (8 << 20))
    time.sleep(0.02)
time.sleep(600)
"""


@pytest.fixture
def subreaper():
    """The test process plays init: orphans (every shim) are re-parented to it. At teardown
    it reaps the zombies left and stops being a subreaper."""
    prctl.set_child_subreaper()
    try:
        yield
    finally:
        prctl._prctl(prctl.PR_SET_CHILD_SUBREAPER, 0)
        reap_zombies()


def reap_zombies() -> None:
    for child in psutil.Process().children():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError):
            pass


@pytest.fixture
def make_cgroup():
    """make_cgroup(hierarchy=None) -> a new cgroup directory kmtest-<random> at the root of
    /sys/fs/cgroup/<hierarchy> (default: the first hierarchy kubemu would use); the test is
    skipped, with the reason, where none can be made. At teardown every process left in them
    is killed and they are removed."""
    made: list[cgroups.Cgroup] = []

    def make(hierarchy: str | None = None) -> Path:
        found = cgroups.hierarchies()
        if hierarchy is not None:
            base = Path("/sys/fs/cgroup") / hierarchy
        elif found:
            base = found[0].mount
        else:
            pytest.skip("no cgroup hierarchy mounted")
        path = base / f"kmtest-{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except OSError as exc:
            pytest.skip(f"cannot make a cgroup in {base}: {exc.strerror}")
        made.append(cgroups.Cgroup(path, 2 if (path / "cgroup.controllers").exists() else 1))
        return path

    yield make
    for cg in made:
        wait_for(lambda: cg.kill() or not cg.pids(), message=f"{cg.path} to empty")
        wait_for(lambda: cg.remove() or not cg.path.exists(), message=f"{cg.path} removed")


@pytest.fixture
def node(subreaper, state_dir):
    """A node directory. At teardown, waits for the shims of ended containers to finish
    exiting (they drain after writing the exit file); state_dir then kills what is left."""
    yield state_dir / "node"
    for exit_file in (state_dir / "node").rglob("*.exit.json"):
        shim = (read_json(str(exit_file)) or {}).get("shim_pid")
        if shim:
            wait_for(lambda: not alive(shim), message=f"shim {shim} to exit")


def marker_env(node: Path) -> dict[str, str]:
    return dict(os.environ, KUBEMU_STATE_DIR=str(node.parent))


def container_dir(node: Path, name: str = "c") -> Path:
    path = node / "pods" / "default_p_1" / name
    path.mkdir(parents=True)
    return path


def launch(cdir: Path, argv: list[str] | None, *flags: str, n: int = 0, env=None) -> subprocess.Popen:
    """Start the shim as a kubelet does; the launcher exits at once."""
    command = [sys.executable, "-m", "kubelet.shim", "--dir", str(cdir), "--restart-count", str(n), *flags]
    if argv is not None:
        command += ["--", *argv]
    with open(cdir / "shim.log", "ab") as shim_log:
        proc = subprocess.Popen(command, env=env or marker_env(cdir.parents[2]), stdin=subprocess.DEVNULL,
                                stderr=shim_log)
    proc.wait(60)
    return proc


def state_of(cdir: Path, n: int = 0) -> dict:
    return wait_for(lambda: read_json(instance_file(str(cdir), n, "state.json")), message="state.json")


def exit_of(cdir: Path, n: int = 0) -> dict:
    return wait_for(lambda: read_json(instance_file(str(cdir), n, "exit.json")), message="exit.json")


def log_line(cdir: Path, n: int = 0) -> str:
    """The container's first line of output, once there is one."""
    log = Path(instance_file(str(cdir), n, "log"))
    return wait_for(lambda: log.exists() and "\n" in log.read_text() and log.read_text().splitlines()[0],
                    message="output in the log")


def py(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def test_runs_the_spec_and_reports_the_exit_code(node):
    cdir = container_dir(node)
    fifo = cdir.parent / "go"
    os.mkfifo(fifo)
    spec = {"argv": py(REPORT, str(fifo)), "env": dict(marker_env(node), FOO="bar"), "cwd": "/tmp", "grace": 5}
    (cdir / "0.spec.json").write_text(json.dumps(spec))
    assert launch(cdir, None, "--spec", str(cdir / "0.spec.json")).returncode == 0

    state = state_of(cdir)
    report = json.loads(log_line(cdir))
    assert report == {"argv": [str(fifo)], "cwd": "/tmp", "foo": "bar", "pid": state["pid"],
                      "pgid": state["pid"], "sid": state["pid"], "stdin": "/dev/null"}
    assert state["pgid"] == state["pid"] and state["restart_count"] == 0 and state["argv"] == spec["argv"]
    shim = psutil.Process(state["shim_pid"])
    assert shim.ppid() == os.getpid(), "the shim is re-parented to the subreaper"
    assert os.getsid(shim.pid) == shim.pid, "the shim left the kubelet's session"
    assert psutil.Process(state["pid"]).ppid() == shim.pid
    assert abs(state["started_at"] - time.time()) < 3600

    with open(fifo, "w"):
        pass
    ended = exit_of(cdir)
    assert ended["exit_code"] == 3 and ended["signal"] is None and ended["oom_killed"] is False
    assert ended["started_at"] == state["started_at"] <= ended["finished_at"]
    assert (cdir / "0.log").read_text().splitlines()[1] == "to stderr"


def test_argv_is_never_given_to_a_shell(node):
    cdir = container_dir(node)
    argv = py("import sys; print(repr(sys.argv[1:]))", "a;b", "$HOME", "`id`", "*", "x > y")
    launch(cdir, argv, "--grace", "5")
    assert exit_of(cdir)["exit_code"] == 0
    assert log_line(cdir) == repr(["a;b", "$HOME", "`id`", "*", "x > y"])


@pytest.mark.parametrize("argv, cwd, message", [
    (["kubemu-no-such-program"], None, 'exec: "kubemu-no-such-program": executable file not found in $PATH'),
    (["/nonexistent/prog"], None, 'exec: "/nonexistent/prog": stat /nonexistent/prog: no such file or directory'),
    (["./plain-file"], None, 'exec: "./plain-file": permission denied'),
    ([sys.executable], "/nonexistent", 'chdir to cwd ("/nonexistent") set in config.json failed: '
                                       'no such file or directory'),
])
def test_a_container_that_cannot_start_is_a_start_error(node, argv, cwd, message):
    cdir = container_dir(node)
    (cdir / "plain-file").write_text("not a program\n")  # mode 0644: not executable
    (cdir / "0.spec.json").write_text(json.dumps({"argv": argv, "cwd": cwd or str(cdir)}))
    launch(cdir, None, "--spec", str(cdir / "0.spec.json"))
    ended = exit_of(cdir)
    assert ended["reason"] == "StartError" and ended["exit_code"] == 128
    assert ended["message"] == message
    assert not (cdir / "0.state.json").exists()


def test_sigkill_is_reported_and_takes_the_whole_container_down(node):
    cdir = container_dir(node)
    launch(cdir, py(FAMILY), "--grace", "5")
    state = state_of(cdir)
    helpers = [int(p) for p in log_line(cdir).split()]
    assert os.getpgid(helpers[0]) == state["pgid"] and os.getpgid(helpers[1]) != state["pgid"]

    os.kill(state["pid"], signal.SIGKILL)
    ended = exit_of(cdir)
    assert ended["signal"] == 9 and ended["exit_code"] is None and ended["oom_killed"] is False
    for pid in helpers:
        wait_for(lambda: not alive(pid), message=f"helper {pid} to be killed")


def test_sigterm_to_the_shim_stops_the_container_gracefully(node):
    cdir = container_dir(node)
    launch(cdir, py(SLEEP), "--grace", "600")
    state = state_of(cdir)
    os.kill(state["shim_pid"], signal.SIGTERM)
    # Well before the grace period: SIGTERM ended it, not the SIGKILL 600 s later.
    assert exit_of(cdir)["signal"] == signal.SIGTERM


def test_a_container_ignoring_sigterm_is_killed_after_the_grace(node):
    cdir = container_dir(node)
    launch(cdir, py(STUBBORN), "--grace", "1.5")
    state = state_of(cdir)
    assert log_line(cdir) == "ready"
    began = time.monotonic()
    os.kill(state["shim_pid"], signal.SIGTERM)
    ended = exit_of(cdir)
    assert time.monotonic() - began >= 1.5
    assert ended["signal"] == signal.SIGKILL and ended["oom_killed"] is False


def test_stop_json_overrides_the_grace(node):
    cdir = container_dir(node)
    launch(cdir, py(STUBBORN), "--grace", "600")
    state = state_of(cdir)
    assert log_line(cdir) == "ready"
    (cdir / "0.stop.json").write_text(json.dumps({"grace": 0.5}))
    began = time.monotonic()
    os.kill(state["shim_pid"], signal.SIGTERM)
    ended = exit_of(cdir)  # within the test deadline, far below the 600 s of --grace
    assert time.monotonic() - began >= 0.5
    assert ended["signal"] == signal.SIGKILL


def test_the_memory_limit_is_an_oom_kill(node):
    cdir = container_dir(node)
    launch(cdir, py(HOG), "--grace", "5", "--memory-limit", str(64 << 20))
    ended = exit_of(cdir)
    assert ended["exit_code"] == 137 and ended["signal"] == 9
    assert ended["oom_killed"] is True and ended["reason"] == "OOMKilled"
    assert "memory limit of 67108864 bytes exceeded" in ended["message"]


def test_the_container_dies_with_its_shim(node):
    cdir = container_dir(node)
    launch(cdir, py(SLEEP), "--grace", "5")
    state = state_of(cdir)
    os.kill(state["shim_pid"], signal.SIGKILL)
    wait_for(lambda: not alive(state["pid"]), message="the container to die with its shim")
    assert not (cdir / "0.exit.json").exists()


# init (a subreaper) -> kubelet (dies with init) -> the shim's launcher.
FAKE_INIT = r"""
import signal, subprocess, sys
from kubemu import prctl
prctl.set_child_subreaper()
kubelet = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]])
while True:
    signal.pause()
"""
FAKE_KUBELET = r"""
import signal, subprocess, sys, time
from kubemu import prctl
prctl.set_pdeathsig(signal.SIGKILL)
subprocess.run([sys.executable, "-m", "kubelet.shim", *sys.argv[1:]], check=True)
print("kubelet", flush=True)
time.sleep(600)
"""


def test_a_power_cut_takes_shim_and_container_down(node):
    cdir = container_dir(node)
    flags = ["--dir", str(cdir), "--restart-count", "0", "--grace", "5", "--", *py(SLEEP)]
    init = subprocess.Popen(py(FAKE_INIT, FAKE_KUBELET, *flags), env=marker_env(node),
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        state = state_of(cdir)
        shim = psutil.Process(state["shim_pid"])
        assert shim.ppid() == init.pid, "re-parented to init past the living kubelet"
        kubelet = [p for p in psutil.Process(init.pid).children() if p.pid != shim.pid]
        init.kill()
        init.wait()
        for pid in (shim.pid, state["pid"], *(k.pid for k in kubelet)):
            wait_for(lambda: not alive(pid), message=f"{pid} to die with init")
    finally:
        init.kill()
        init.wait()


def test_bad_usage_exits_2_without_detaching(node):
    cdir = container_dir(node)
    proc = launch(cdir, None, "--grace", "5")
    assert proc.returncode == 2
    assert "no command" in (cdir / "shim.log").read_text()


def test_a_shim_whose_init_died_during_the_launch_does_not_start(node):
    """--init-pid names a process that is gone by the time the shim is armed: init died
    mid-launch (a power cut), and the shim must not live on under PID 1."""
    cdir = container_dir(node)
    gone = subprocess.Popen(py("pass"))
    start = proc_stat(gone.pid)[1]  # readable until the process is reaped
    gone.wait()
    launch(cdir, py(SLEEP), "--grace", "5", "--init-pid", f"{gone.pid}:{start}")
    wait_for(lambda: "died while the shim was launched" in (cdir / "shim.log").read_text())
    wait_for(lambda: not marked_processes(str(node.parent)), message="the shim to exit")
    assert not (cdir / "0.state.json").exists() and not (cdir / "0.exit.json").exists()


# --- cgroups and the kernel's OOM killer

def write_spec(cdir: Path, n: int = 0, **spec) -> list[str]:
    """N.spec.json with the marker environment; the flags that launch a shim on it."""
    spec.setdefault("env", marker_env(cdir.parents[2]))
    spec.setdefault("grace", 5)
    (cdir / f"{n}.spec.json").write_text(json.dumps(spec))
    return ["--spec", str(cdir / f"{n}.spec.json")]


def test_the_oom_kill_count_is_read_from_v1_and_v2_files(tmp_path):
    v1, v2, other = tmp_path / "memory.oom_control", tmp_path / "memory.events", tmp_path / "other"
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    v2.write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n")
    other.write_text("oom_kill_disable 1\n")
    assert [oom_kills(str(p)) for p in (v1, v2, other, tmp_path / "missing")] == [3, 2, 0, None]


@pytest.mark.parametrize("before, after, sig, killed", [
    (0, 1, signal.SIGKILL, True),
    (2, 2, signal.SIGKILL, False),      # killed by someone else (a stop's grace ran out)
    (0, 1, None, False),                # a process of it was OOM-killed, the container exited itself
    (0, 1, signal.SIGTERM, False),
    (None, 1, signal.SIGKILL, False),   # unreadable at the start: no verdict
    (0, None, signal.SIGKILL, False),
])
def test_an_oom_kill_is_a_sigkill_while_the_count_went_up(before, after, sig, killed):
    assert oom_killed(before, after, sig) is killed


def test_the_kernels_oom_kill_is_read_from_the_containers_memory_cgroup(node, make_cgroup):
    """A v1 memory cgroup limited to 32 MiB and a container allocating far more: the kernel
    kills it, and the shim says OOMKilled because the cgroup's counter went up (no RSS watch:
    no --memory-limit)."""
    memory = make_cgroup("memory")
    (memory / "memory.limit_in_bytes").write_text(str(32 << 20))
    cdir = container_dir(node)
    launch(cdir, None, *write_spec(cdir, argv=py(HOG), cgroups=[str(memory / "cgroup.procs")],
                                   oom_counter={"path": str(memory / "memory.oom_control")}))
    ended = exit_of(cdir)
    assert ended["exit_code"] == 137 and ended["signal"] == 9
    assert ended["oom_killed"] is True and ended["reason"] == "OOMKilled"
    assert oom_kills(str(memory / "memory.oom_control")) >= 1


def test_a_sigkill_without_an_oom_kill_is_not_oomkilled(node, make_cgroup):
    memory = make_cgroup("memory")
    cdir = container_dir(node)
    launch(cdir, None, *write_spec(cdir, argv=py(SLEEP), cgroups=[str(memory / "cgroup.procs")],
                                   oom_counter={"path": str(memory / "memory.oom_control")}))
    os.kill(state_of(cdir)["pid"], signal.SIGKILL)
    ended = exit_of(cdir)
    assert ended["signal"] == 9 and ended["oom_killed"] is False and ended["reason"] is None


def join_cgroup(procs: Path):
    return lambda: procs.write_text("0")


def test_what_is_left_in_the_containers_cgroup_dies_with_it(node, make_cgroup):
    """A process in the container's cgroup that is not the shim's descendant (what `kubectl
    exec` starts) is killed when the container ends, as the container's cgroup is."""
    cg = make_cgroup()
    cdir = container_dir(node)
    launch(cdir, None, *write_spec(cdir, argv=py(SLEEP), cgroups=[str(cg / "cgroup.procs")]))
    state = state_of(cdir)
    assert state["pid"] in [int(p) for p in (cg / "cgroup.procs").read_text().split()]
    outsider = subprocess.Popen(py(SLEEP), env=marker_env(node), stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=join_cgroup(cg / "cgroup.procs"))
    try:
        assert state["shim_pid"] not in [p.pid for p in psutil.Process(outsider.pid).parents()]
        os.kill(state["pid"], signal.SIGKILL)
        assert exit_of(cdir)["signal"] == 9
        assert outsider.wait(60) == -signal.SIGKILL
    finally:
        outsider.kill()
        outsider.wait()


def test_a_cgroup_that_cannot_be_joined_is_a_start_error(node):
    cdir = container_dir(node)
    launch(cdir, None, *write_spec(cdir, argv=py(SLEEP), cgroups=["/nonexistent-kmtest/cgroup.procs"]))
    ended = exit_of(cdir)
    assert ended["reason"] == "StartError" and ended["exit_code"] == 128
    assert ended["message"] == ("unable to apply cgroup configuration: failed to write 0 to "
                                "/nonexistent-kmtest/cgroup.procs: no such file or directory")


def test_a_cgroup_holding_the_shim_itself_is_refused(node, make_cgroup):
    """Everything in a container's cgroups dies with it: a cgroup the shim is in (a node's, by
    mistake) must not be one."""
    cg = make_cgroup()
    cdir = container_dir(node)
    command = [sys.executable, "-m", "kubelet.shim", "--dir", str(cdir), "--restart-count", "0",
               *write_spec(cdir, argv=py(SLEEP), cgroups=[str(cg / "cgroup.procs")])]
    subprocess.run(command, env=marker_env(node), stdin=subprocess.DEVNULL, preexec_fn=join_cgroup(cg / "cgroup.procs"),
                   check=True, timeout=60)
    ended = exit_of(cdir)
    assert ended["reason"] == "StartError" and "holds the container's shim" in ended["message"]


@pytest.mark.parametrize("key, value", [("sandbox", {"pid": "1"}), ("sandbox", 5), ("cgroups", "x"),
                                        ("cgroups", [""]), ("oom_counter", {"file": "x"})])
def test_a_malformed_sandbox_cgroups_or_oom_counter_is_a_usage_error(node, key, value):
    cdir = container_dir(node)
    proc = launch(cdir, None, *write_spec(cdir, argv=py(SLEEP), **{key: value}))
    assert proc.returncode == 2
    assert f"{key}: expected" in (cdir / "shim.log").read_text()
