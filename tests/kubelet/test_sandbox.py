"""The sandbox state machine and the pod worker around it, driven by a fake clock."""
import pytest

from kubelet.podworker import (SANDBOX_CHANGED, KillContainer, PodWorker, RecordEvent, Settings,
                               StartContainer)
from kubelet.sandbox import CreateSandbox, RemoveSandbox, Sandbox, SState, needs_sandbox, sandbox_id

T0 = 1000.0
S = Settings(backoff_initial=10.0, backoff_max=300.0)
IP = ["10.244.1.5"]
NOT_READY = ("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
             "message:Network plugin returns error: cni plugin not initialized")


def ctr(name, **kw) -> dict:
    return {"name": name, "command": ["/bin/sleep", "1000"], **kw}


def pod(*containers, init=(), policy="Always", name="web", **spec) -> dict:
    spec = {"containers": list(containers) or [ctr("app")], "restartPolicy": policy, **spec}
    if init:
        spec["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": "u-1"},
            "spec": spec}


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def starts(actions):
    return [(a.container, a.restart_count) for a in of(actions, StartContainer)]


def events(actions):
    return [(a.reason, a.message, a.type) for a in of(actions, RecordEvent)]


def ready_pod(p=None, now=T0, pid=100) -> tuple[PodWorker, list]:
    """A sandboxed worker whose sandbox (attempt 0) is ready and whose containers run."""
    w = PodWorker(p or pod(), S, now, sandboxed=True)
    acts = w.sync(now)
    assert of(acts, CreateSandbox) == [CreateSandbox(0, "u-1-0", "web")]
    assert starts(acts) == []
    acts = w.sandbox_created(0, IP, now)
    for name, _ in starts(acts):
        acts += w.container_started(name, pid, now)
        pid += 1
    return w, acts


# --- the pure machine --------------------------------------------------------------------

def test_id_and_who_gets_a_sandbox():
    assert sandbox_id("abc", 2) == "abc-2"
    assert needs_sandbox(pod(), True) and not needs_sandbox(pod(), False)
    assert not needs_sandbox(pod(hostNetwork=True), True)


def test_the_sandbox_is_made_with_the_pods_hostname():
    w = PodWorker(pod(hostname="db-0"), S, T0, sandboxed=True)
    assert of(w.sync(T0), CreateSandbox) == [CreateSandbox(0, "u-1-0", "db-0")]


def test_machine_create_fail_retry_die_remove():
    sb = Sandbox("u", "h", retry_delay=10.0)
    assert sb.step(T0, wanted=True, containers_live=False, network_ready=False) == []
    assert sb.step(T0, wanted=True, containers_live=False, network_ready=True) == [CreateSandbox(0, "u-0", "h")]
    assert sb.state is SState.CREATING
    assert not sb.created(1, IP)  # not the attempt asked for
    assert sb.create_failed(0, T0 + 1)
    assert sb.next_deadline(wanted=True, network_ready=True) == T0 + 11
    assert sb.step(T0 + 5, wanted=True, containers_live=False, network_ready=True) == []
    assert sb.step(T0 + 11, wanted=True, containers_live=False, network_ready=True) == [CreateSandbox(0, "u-0", "h")]
    assert sb.created(0, IP) and sb.ready and sb.ips == tuple(IP)
    assert sb.step(T0 + 12, wanted=True, containers_live=True, network_ready=True) == []
    assert sb.died(0) and sb.state is SState.DEAD and sb.ips == ()
    assert not sb.died(0)
    assert sb.step(T0 + 13, wanted=True, containers_live=True, network_ready=True) == []  # containers first
    assert sb.step(T0 + 14, wanted=True, containers_live=False, network_ready=True) == [RemoveSandbox(0, "u-0")]
    assert sb.remove_failed(0, T0 + 14)
    assert sb.step(T0 + 15, wanted=True, containers_live=False, network_ready=True) == []
    assert sb.next_deadline(wanted=True, network_ready=True) == T0 + 24
    assert sb.step(T0 + 24, wanted=True, containers_live=False, network_ready=True) == [RemoveSandbox(0, "u-0")]
    assert sb.removed(0) and sb.gone and sb.attempt == 1
    assert sb.step(T0 + 25, wanted=True, containers_live=False, network_ready=True) == [CreateSandbox(1, "u-1", "h")]


def test_machine_unwanted_ready_sandbox_is_removed_once_containers_are_gone():
    sb = Sandbox("u", "h", 10.0)
    sb.step(T0, wanted=True, containers_live=False, network_ready=True)
    sb.created(0, IP)
    assert sb.step(T0, wanted=False, containers_live=True, network_ready=True) == []
    assert sb.step(T0, wanted=False, containers_live=False, network_ready=True) == [RemoveSandbox(0, "u-0")]


# --- the pod worker with a sandbox ----------------------------------------------------------

def test_containers_start_only_in_a_ready_sandbox_and_status_has_its_ip():
    w = PodWorker(pod(), S, T0, sandboxed=True)
    acts = w.sync(T0)
    assert of(acts, CreateSandbox) and not starts(acts)
    status = w.status(T0)
    assert status["phase"] == "Pending" and "podIP" not in status and status["hostIP"] == "127.0.0.1"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert w.next_deadline() is None  # nothing to do until the sandbox is answered for
    acts = w.sandbox_created(0, IP, T0 + 1)
    assert starts(acts) == [("app", 0)]
    w.container_started("app", 100, T0 + 1)
    status = w.status(T0 + 1)
    assert status["podIP"] == "10.244.1.5" and status["podIPs"] == [{"ip": "10.244.1.5"}]


def test_pods_without_a_sandbox_keep_the_node_ip():
    w = PodWorker(pod(), S, T0)
    assert starts(w.sync(T0)) == [("app", 0)]
    assert w.status(T0)["podIP"] == "127.0.0.1"


def test_network_not_ready_waits_with_one_event():
    w = PodWorker(pod(), S, T0, sandboxed=True)
    acts = w.set_network(False, NOT_READY, T0) + w.sync(T0)
    assert not of(acts, CreateSandbox)
    assert events(acts + w.sync(T0 + 1)) == [("NetworkNotReady", f"network is not ready: {NOT_READY}", "Warning")]
    acts = w.set_network(True, "", T0 + 2)
    assert of(acts, CreateSandbox) == [CreateSandbox(0, "u-1-0", "web")]


def test_failed_add_is_an_event_and_is_retried_after_the_backoff():
    w = PodWorker(pod(), S, T0, sandboxed=True)
    w.sync(T0)
    desc = 'failed to setup network for sandbox "u-1-0": plugin type="bridge" name="kubemu" failed (add): boom'
    acts = w.sandbox_create_failed(0, desc, T0 + 1)
    assert events(acts) == [("FailedCreatePodSandBox",
                             f"Failed to create pod sandbox: rpc error: code = Unknown desc = {desc}", "Warning")]
    assert not of(acts, CreateSandbox) and not starts(acts)
    assert w.next_deadline() == T0 + 11  # the kubelet's backOffPeriod, 10 s
    assert w.sync(T0 + 5) == []
    assert of(w.sync(T0 + 11), CreateSandbox) == [CreateSandbox(0, "u-1-0", "web")]
    assert starts(w.sandbox_created(0, IP, T0 + 12)) == [("app", 0)]


def test_sandbox_death_kills_tears_down_recreates_and_restarts_with_count_plus_one():
    w, _ = ready_pod(pod(ctr("a"), ctr("b")))
    acts = w.sandbox_died(0, T0 + 5)
    assert ("SandboxChanged", SANDBOX_CHANGED, "Normal") in events(acts)
    assert sorted(a.container for a in of(acts, KillContainer)) == ["a", "b"]
    assert not of(acts, RemoveSandbox)  # not before its containers are gone
    assert "podIP" not in w.status(T0 + 5)
    acts = w.container_exited("a", None, 15, False, T0 + 6)
    assert not of(acts, RemoveSandbox) and not starts(acts)
    acts = w.container_exited("b", None, 15, False, T0 + 6)
    assert of(acts, RemoveSandbox) == [RemoveSandbox(0, "u-1-0")]
    acts = w.sandbox_removed(0, T0 + 7)
    assert of(acts, CreateSandbox) == [CreateSandbox(1, "u-1-1", "web")]
    assert not starts(acts)
    acts = w.sandbox_created(1, ["10.244.1.6"], T0 + 8)
    assert sorted(starts(acts)) == [("a", 1), ("b", 1)]
    for name in "ab":
        w.container_started(name, 200, T0 + 8)
    status = w.status(T0 + 8)
    assert status["podIP"] == "10.244.1.6" and status["phase"] == "Running"
    assert [c["restartCount"] for c in status["containerStatuses"]] == [1, 1]
    # the old sandbox's news is ignored
    assert w.sandbox_died(0, T0 + 9) == []


def test_sandbox_death_reruns_init_containers_from_the_first():
    w = PodWorker(pod(init=[ctr("i1"), ctr("i2")]), S, T0, sandboxed=True)
    w.sync(T0)
    t = T0
    for name in ("i1", "i2"):
        acts = w.sandbox_created(0, IP, t) if name == "i1" else acts
        assert starts(acts) == [(name, 0)]
        w.container_started(name, 10, t)
        acts = w.container_exited(name, 0, None, False, t + 1)
        t += 1
    assert starts(acts) == [("app", 0)]
    w.container_started("app", 11, t)
    acts = w.sandbox_died(0, t + 1)
    acts += w.container_exited("app", None, 15, False, t + 2)
    acts += w.sandbox_removed(0, t + 3)
    assert of(acts, CreateSandbox)
    assert starts(w.sandbox_created(1, IP, t + 4)) == [("i1", 1)]


def test_restart_policy_never_gets_no_new_sandbox():
    w, _ = ready_pod(pod(policy="Never"))
    w.sandbox_died(0, T0 + 1)
    acts = w.container_exited("app", None, 15, False, T0 + 2)
    assert of(acts, RemoveSandbox)
    acts = w.sandbox_removed(0, T0 + 3)
    assert not of(acts, CreateSandbox) and not starts(acts)
    assert w.status(T0 + 3)["phase"] == "Failed"
    assert w.is_terminated()


def test_a_finished_pod_releases_its_sandbox_and_keeps_showing_its_ip():
    w, _ = ready_pod(pod(policy="OnFailure"))
    acts = w.container_exited("app", 0, None, False, T0 + 1)
    assert of(acts, RemoveSandbox) == [RemoveSandbox(0, "u-1-0")]
    assert not w.is_terminated()
    w.sandbox_removed(0, T0 + 2)
    assert w.is_terminated()
    status = w.status(T0 + 2)
    assert status["phase"] == "Succeeded" and status["podIP"] == "10.244.1.5"


def test_stop_kills_containers_then_removes_the_sandbox():
    w, _ = ready_pod()
    acts = w.stop(T0 + 1)
    assert of(acts, KillContainer) and not of(acts, RemoveSandbox)
    acts = w.container_exited("app", None, 15, False, T0 + 2)
    assert of(acts, RemoveSandbox) == [RemoveSandbox(0, "u-1-0")]
    assert not w.is_terminated()
    assert w.sandbox_removed(0, T0 + 3) == []
    assert w.is_terminated()


def test_stop_with_no_container_running_removes_the_sandbox_at_once():
    """A crash-looping pod deleted while its container waits out its backoff: nothing is left
    to exit, so nothing else would ever remove the sandbox."""
    w, _ = ready_pod()
    assert starts(w.container_exited("app", 1, None, False, T0 + 1)) == [("app", 1)]  # at once, the first time
    w.container_started("app", 101, T0 + 1)
    acts = w.container_exited("app", 1, None, False, T0 + 1.5)
    assert not starts(acts) and not of(acts, RemoveSandbox)  # CrashLoopBackOff
    acts = w.stop(T0 + 2)
    assert of(acts, RemoveSandbox) == [RemoveSandbox(0, "u-1-0")] and not of(acts, KillContainer)
    w.sandbox_removed(0, T0 + 3)
    assert w.is_terminated()


def test_stop_while_the_sandbox_is_being_made_removes_it_when_made():
    w = PodWorker(pod(), S, T0, sandboxed=True)
    w.sync(T0)
    w.stop(T0 + 1)
    acts = w.sandbox_created(0, IP, T0 + 2)
    assert of(acts, RemoveSandbox) and not starts(acts)


def test_a_container_that_reports_started_after_its_sandbox_died_is_killed():
    w = PodWorker(pod(), S, T0, sandboxed=True)
    w.sync(T0)
    assert starts(w.sandbox_created(0, IP, T0)) == [("app", 0)]
    w.sandbox_died(0, T0 + 1)
    acts = w.container_started("app", 100, T0 + 1)
    assert [a.container for a in of(acts, KillContainer)] == ["app"]


def test_adopted_live_sandbox_keeps_its_ip_and_creates_nothing():
    found = {"app": {"state": "running", "restart_count": 2, "pid": 100, "started_at": T0 - 50}}
    w = PodWorker.adopt(pod(), S, T0, found, sandboxed=True, sandbox=(3, IP))
    assert w.sync(T0) == []
    assert w.status(T0)["podIP"] == "10.244.1.5"
    # the shell found its holder dead: the sandbox-changed path, the next attempt is 4
    acts = w.sandbox_died(3, T0 + 1)
    assert ("SandboxChanged", SANDBOX_CHANGED, "Normal") in events(acts)
    acts = w.container_exited("app", None, 15, False, T0 + 2)
    assert of(acts, RemoveSandbox) == [RemoveSandbox(3, "u-1-3")]
    assert of(w.sandbox_removed(3, T0 + 3), CreateSandbox) == [CreateSandbox(4, "u-1-4", "web")]
    assert starts(w.sandbox_created(4, IP, T0 + 4)) == [("app", 3)]


def test_adopted_containers_without_a_sandbox_are_replaced_in_a_new_one():
    found = {"app": {"state": "running", "restart_count": 0, "pid": 100, "started_at": T0 - 50}}
    w = PodWorker.adopt(pod(), S, T0, found, sandboxed=True, sandbox=None)
    assert w.sandbox.ready  # a stand-in the shell reports dead
    acts = w.sandbox_died(w.sandbox.attempt, T0)
    assert [a.container for a in of(acts, KillContainer)] == ["app"]


def test_an_adopted_sandbox_found_dead_starts_nothing_whatever_the_network():
    """The stand-in is dead before the network's state is applied: a sync in between would
    start the exited container in a sandbox that does not exist (on the host's network)."""
    found = {"app": {"state": "running", "restart_count": 0, "pid": 100, "started_at": T0 - 50},
             "side": {"state": "exited", "restart_count": 0, "exit_code": 1, "started_at": T0 - 50,
                      "finished_at": T0 - 40}}
    for network_ready in (True, False):
        w = PodWorker.adopt(pod(ctr("app"), ctr("side")), S, T0, found, sandboxed=True, sandbox=None)
        acts = w.sandbox_found(False, network_ready, NOT_READY, T0)
        assert starts(acts) == [] and [a.container for a in of(acts, KillContainer)] == ["app"]
        assert ("SandboxChanged", SANDBOX_CHANGED, "Normal") in events(acts)


def test_an_adopted_live_sandbox_found_on_a_network_not_ready_runs_on():
    found = {"app": {"state": "running", "restart_count": 0, "pid": 100, "started_at": T0 - 50}}
    w = PodWorker.adopt(pod(), S, T0, found, sandboxed=True, sandbox=(0, IP))
    assert of(w.sandbox_found(True, False, NOT_READY, T0), KillContainer) == []
    assert w.sandbox.ready and w.status(T0)["podIP"] == "10.244.1.5"


@pytest.mark.parametrize("policy", ["Always", "OnFailure"])
def test_a_killed_container_restarts_after_sandbox_death_whatever_the_policy_allows(policy):
    w, _ = ready_pod(pod(policy=policy))
    w.sandbox_died(0, T0 + 1)
    w.container_exited("app", None, 15, False, T0 + 2)
    w.sandbox_removed(0, T0 + 3)
    assert starts(w.sandbox_created(1, IP, T0 + 4)) == [("app", 1)]
