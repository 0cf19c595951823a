"""The pod worker's state machine, driven by a fake clock: no processes, no sleeping."""
import signal

import pytest
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kubelet.images import load, resolve
from kubelet.podworker import (KillContainer, PodWorker, RecordEvent, RunProbe, Settings,
                               StartContainer, format_time)

T0 = 1000.0
S = Settings()
EXEC = {"exec": {"command": ["check"]}}


def ctr(name, **kw) -> dict:
    return {"name": name, "command": ["/bin/sleep", "1000"], **kw}


def pod(*containers, init=(), policy="Always", grace=None, name="web", ns="default") -> dict:
    spec = {"containers": list(containers) or [ctr("app")], "restartPolicy": policy}
    if init:
        spec["initContainers"] = list(init)
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": "u-1"}, "spec": spec}


def starts(actions):
    return [(a.container, a.restart_count) for a in actions if isinstance(a, StartContainer)]


def kills(actions):
    return [(a.container, a.grace, a.reason) for a in actions if isinstance(a, KillContainer)]


def probes(actions):
    return [(a.container, a.kind) for a in actions if isinstance(a, RunProbe)]


def events(actions):
    return [(a.reason, a.message, a.type) for a in actions if isinstance(a, RecordEvent)]


def cstatus(w, name, now=T0):
    status = w.status(now)
    for entry in status["containerStatuses"] + status.get("initContainerStatuses", []):
        if entry["name"] == name:
            return entry
    raise KeyError(name)


def cond(w, kind, now=T0):
    return next(c for c in w.status(now)["conditions"] if c["type"] == kind)


def boot(p=None, settings=S, now=T0, pid=100) -> tuple[PodWorker, list]:
    """A worker whose app containers all started at `now`, and the actions that produced."""
    w = PodWorker(p or pod(), settings, now)
    acts = w.sync(now)
    for name, _ in starts(acts):
        acts += w.container_started(name, pid, now)
        pid += 1
    return w, acts


def running(p=None, settings=S, now=T0) -> PodWorker:
    return boot(p, settings, now)[0]


# --- restartPolicy x how the container ended ----------------------------------------------------

# How an instance can end: the call into the worker, and the terminated state it leaves.
ENDINGS = {
    "exit0": (dict(exit_code=0, signal=None, oom_killed=False), 0, "Completed"),
    "exit1": (dict(exit_code=1, signal=None, oom_killed=False), 1, "Error"),
    "signal": (dict(exit_code=None, signal=signal.SIGKILL, oom_killed=False), 137, "Error"),
    "oom": (dict(exit_code=None, signal=signal.SIGKILL, oom_killed=True), 137, "OOMKilled"),
    "startfail": (None, 128, "StartError"),
}
# Which policies restart after which ending (Kubernetes' restartPolicy: Always whatever the exit,
# OnFailure on a non-zero exit or signal, Never never; a failed start is a crash).
RESTARTED = {
    "Always": {"exit0", "exit1", "signal", "oom", "startfail"},
    "OnFailure": {"exit1", "signal", "oom", "startfail"},
    "Never": set(),
}


def end_first_instance(policy, ending):
    w = PodWorker(pod(policy=policy), S, T0)
    assert starts(w.sync(T0)) == [("app", 0)]
    kwargs, _, _ = ENDINGS[ending]
    if kwargs is None:
        return w, w.container_start_failed("app", "CreateContainerError",
                                           'exec: "foo": executable file not found in $PATH', T0 + 1)
    w.container_started("app", 42, T0)
    return w, w.container_exited("app", now=T0 + 5, **kwargs)


@pytest.mark.parametrize("ending", list(ENDINGS))
@pytest.mark.parametrize("policy", list(RESTARTED))
def test_restart_policy_table(policy, ending):
    w, acts = end_first_instance(policy, ending)
    _, code, reason = ENDINGS[ending]
    status = w.status(T0 + 5)
    app = cstatus(w, "app", T0 + 5)
    if ending in RESTARTED[policy]:
        assert starts(acts) == [("app", 1)]  # the first restart is immediate
        assert status["phase"] == "Running"
        assert app["restartCount"] == 1
        assert app["lastState"]["terminated"]["exitCode"] == code
        assert app["lastState"]["terminated"]["reason"] == reason
        assert not w.is_terminated()
    else:
        assert starts(acts) == []
        assert status["phase"] == ("Succeeded" if code == 0 else "Failed")
        assert app["restartCount"] == 0
        assert app["state"]["terminated"]["exitCode"] == code
        assert app["state"]["terminated"]["reason"] == reason
        assert app["lastState"] == {}
        assert w.is_terminated()
        assert w.next_deadline() is None


def test_signal_is_reported_with_its_exit_code():
    w, _ = end_first_instance("Never", "signal")
    term = cstatus(w, "app")["state"]["terminated"]
    assert (term["exitCode"], term["signal"]) == (137, signal.SIGKILL)


def test_start_failure_shows_the_shells_reason_then_backs_off():
    w, acts = end_first_instance("Always", "startfail")
    assert ("Failed", 'Error: exec: "foo": executable file not found in $PATH', "Warning") in events(acts)
    waiting = cstatus(w, "app", T0 + 1)["state"]["waiting"]
    assert waiting == {"reason": "CreateContainerError",
                       "message": 'exec: "foo": executable file not found in $PATH'}
    acts = w.container_start_failed("app", "CreateContainerError", "again", T0 + 1)
    assert starts(acts) == []  # the second failure waits like a crash
    assert w.next_deadline() == T0 + 11
    assert cstatus(w, "app", T0 + 1)["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cstatus(w, "app", T0 + 1)["lastState"]["terminated"]["message"] == "again"
    assert starts(w.sync(T0 + 11)) == [("app", 2)]


def test_never_with_one_failure_fails_only_when_all_are_done():
    w = running(pod(ctr("a"), ctr("b"), policy="Never"))
    w.container_exited("a", 1, None, False, T0 + 1)
    assert w.status(T0 + 1)["phase"] == "Running"
    w.container_exited("b", 0, None, False, T0 + 2)
    assert w.status(T0 + 2)["phase"] == "Failed"


def test_onfailure_all_succeeded():
    w = running(pod(ctr("a"), ctr("b"), policy="OnFailure"))
    w.container_exited("a", 0, None, False, T0 + 1)
    assert w.status(T0 + 1)["phase"] == "Running"
    w.container_exited("b", 0, None, False, T0 + 2)
    assert w.status(T0 + 2)["phase"] == "Succeeded"
    assert cond(w, "Ready", T0 + 2)["reason"] == "PodCompleted"


def test_pending_until_started():
    w = PodWorker(pod(), S, T0)
    assert w.status(T0)["phase"] == "Pending"
    assert cstatus(w, "app")["state"] == {"waiting": {"reason": "ContainerCreating"}}
    w.sync(T0)
    assert w.status(T0)["phase"] == "Pending"
    w.container_started("app", 7, T0 + 1)
    assert w.status(T0 + 1)["phase"] == "Running"


# --- CrashLoopBackOff -----------------------------------------------------------------------------

def crash_loop(w, n, up=1.0, now=T0, name="app"):
    """Let the container crash n times, each `up` seconds after its start; restart it as soon as
    the worker allows. Return the waits between each exit and the restart, and the final time."""
    waits = []
    pid = 1000
    for _ in range(n):
        w.container_started(name, pid, now)
        pid += 1
        now += up
        count = cstatus(w, name, now)["restartCount"]
        acts = w.container_exited(name, 1, None, False, now)
        if starts(acts):
            assert starts(acts) == [(name, count + 1)]
            waits.append(0.0)
            continue
        deadline = w.next_deadline()
        assert starts(w.sync(deadline - 1e-6)) == []  # not a moment early
        assert starts(w.sync(deadline)) == [(name, count + 1)]
        waits.append(deadline - now)
        now = deadline
    return waits, now


def test_crash_loop_backoff_series():
    w = PodWorker(pod(), S, T0)
    w.sync(T0)
    waits, _ = crash_loop(w, 9)
    assert waits == pytest.approx([0, 10, 20, 40, 80, 160, 300, 300, 300])
    assert cstatus(w, "app")["restartCount"] == 9


def test_crash_loop_backoff_waiting_state_and_event():
    w = PodWorker(pod(name="web", ns="prod"), S, T0)
    w.sync(T0)
    _, now = crash_loop(w, 3)  # waits 0, 10, 20: the next crash waits 40 s
    w.container_started("app", 1, now)
    acts = w.container_exited("app", 2, None, False, now + 1)
    app = cstatus(w, "app", now + 2)
    assert app["state"]["waiting"] == {
        "reason": "CrashLoopBackOff",
        "message": "back-off 40s restarting failed container=app pod=prod/web"}
    assert app["lastState"]["terminated"]["exitCode"] == 2
    assert app["ready"] is False and app["started"] is False
    assert ("BackOff", "Back-off restarting failed container app in pod prod/web", "Warning") in events(acts)
    assert w.status(now + 2)["phase"] == "Running"  # restarting counts as running


def test_backoff_message_at_the_cap_uses_go_duration():
    w = PodWorker(pod(), S, T0)
    w.sync(T0)
    _, now = crash_loop(w, 7)  # ... 160, 300: the next wait is 300 s too
    w.container_started("app", 1, now)
    w.container_exited("app", 1, None, False, now + 1)
    assert cstatus(w, "app", now + 1)["state"]["waiting"]["message"].startswith("back-off 5m0s restarting")


def test_backoff_resets_after_ten_minutes_running():
    w = PodWorker(pod(), S, T0)
    w.sync(T0)
    waits, now = crash_loop(w, 5)
    assert waits == pytest.approx([0, 10, 20, 40, 80])
    more, now = crash_loop(w, 3, up=600, now=now)  # each run is "stable": the series starts over
    assert more == [0, 0, 0]
    more, _ = crash_loop(w, 3, up=1, now=now)
    assert more == pytest.approx([10, 20, 40])


def test_backoff_not_reset_short_of_ten_minutes():
    w = PodWorker(pod(), S, T0)
    w.sync(T0)
    _, now = crash_loop(w, 3)
    more, _ = crash_loop(w, 1, up=599, now=now)
    assert more == pytest.approx([40])


def test_time_scale_speeds_up_backoff():
    w = PodWorker(pod(), Settings(time_scale=0.01), T0)
    w.sync(T0)
    waits, now = crash_loop(w, 8, up=0.001)
    assert waits == pytest.approx([0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.0, 3.0])
    w.container_started("app", 1, now)
    w.container_exited("app", 1, None, False, now)
    assert "back-off 3s restarting" in cstatus(w, "app", now)["state"]["waiting"]["message"]
    # The reset is scaled too: 6 s up is "stable" at this scale.
    deadline = w.next_deadline()
    w.sync(deadline)
    more, _ = crash_loop(w, 2, up=6.01, now=deadline)
    assert more == [0, 0]


def test_custom_backoff_settings():
    w = PodWorker(pod(), Settings(backoff_initial=1, backoff_max=4, backoff_reset=50), T0)
    w.sync(T0)
    waits, now = crash_loop(w, 6)
    assert waits == pytest.approx([0, 1, 2, 4, 4, 4])
    more, _ = crash_loop(w, 2, up=50, now=now)
    assert more == [0, 0]


def test_sync_is_idempotent_and_deadline_is_in_the_future():
    w = PodWorker(pod(), S, T0)
    assert w.next_deadline() == T0  # the first start is due at once
    assert starts(w.sync(T0)) == [("app", 0)]
    assert w.sync(T0) == [] and w.sync(T0 + 100) == []  # one StartContainer outstanding
    assert w.next_deadline() is None  # waiting for the shell's answer
    w.container_started("app", 1, T0)
    w.container_exited("app", 1, None, False, T0 + 1)  # restarted at once
    w.container_started("app", 2, T0 + 1)
    w.container_exited("app", 1, None, False, T0 + 2)
    assert w.next_deadline() == T0 + 12
    assert w.sync(T0 + 5) == []
    assert starts(w.sync(T0 + 12)) == [("app", 2)]
    assert w.sync(T0 + 12) == []


# --- init containers ------------------------------------------------------------------------------

def test_init_containers_run_in_order_before_app_containers():
    w = PodWorker(pod(ctr("app"), ctr("side"), init=[ctr("i1"), ctr("i2")]), S, T0)
    assert starts(w.sync(T0)) == [("i1", 0)]
    status = w.status(T0)
    assert status["phase"] == "Pending"
    assert cond(w, "Initialized")["status"] == "False"
    assert cond(w, "Initialized")["message"] == "containers with incomplete status: [i1 i2]"
    assert cstatus(w, "app")["state"]["waiting"]["reason"] == "PodInitializing"
    assert cstatus(w, "i2")["state"]["waiting"]["reason"] == "PodInitializing"
    assert starts(w.container_started("i1", 1, T0 + 1)) == []
    assert starts(w.container_exited("i1", 0, None, False, T0 + 2)) == [("i2", 0)]
    w.container_started("i2", 2, T0 + 2)
    assert starts(w.sync(T0 + 3)) == []  # app containers wait for the last init container
    acts = w.container_exited("i2", 0, None, False, T0 + 4)
    assert starts(acts) == [("app", 0), ("side", 0)]
    assert cond(w, "Initialized", T0 + 4)["status"] == "True"
    assert cond(w, "Initialized", T0 + 4)["lastTransitionTime"] == format_time(T0 + 4)
    assert [s["name"] for s in w.status(T0 + 4)["initContainerStatuses"]] == ["i1", "i2"]
    term = cstatus(w, "i1", T0 + 4)["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")
    assert term["startedAt"] == format_time(T0 + 1) and term["finishedAt"] == format_time(T0 + 2)
    assert w.status(T0 + 4)["phase"] == "Pending"  # app containers not started yet
    w.container_started("app", 3, T0 + 5)
    w.container_started("side", 4, T0 + 5)
    assert w.status(T0 + 5)["phase"] == "Running"


def test_failing_init_container_with_never_fails_the_pod():
    w = PodWorker(pod(init=[ctr("i1"), ctr("i2")], policy="Never"), S, T0)
    w.sync(T0)
    w.container_started("i1", 1, T0)
    acts = w.container_exited("i1", 3, None, False, T0 + 1)
    assert starts(acts) == []
    assert w.status(T0 + 1)["phase"] == "Failed"
    assert cond(w, "Initialized", T0 + 1)["status"] == "False"
    assert cstatus(w, "app", T0 + 1)["state"]["waiting"]["reason"] == "PodInitializing"
    assert w.is_terminated() and w.next_deadline() is None
    assert w.sync(T0 + 1000) == []


@pytest.mark.parametrize("policy", ["Always", "OnFailure"])
def test_failing_init_container_is_restarted_with_backoff(policy):
    w = PodWorker(pod(init=[ctr("i1")], policy=policy), S, T0)
    w.sync(T0)
    waits, now = crash_loop(w, 3, name="i1")
    assert waits == pytest.approx([0, 10, 20])
    w.container_started("i1", 1, now)
    w.container_exited("i1", 1, None, False, now + 1)
    i1 = cstatus(w, "i1", now + 1)
    assert i1["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert i1["restartCount"] == 3
    assert w.status(now + 1)["phase"] == "Pending"
    acts = w.sync(w.next_deadline())
    assert starts(acts) == [("i1", 4)]
    w.container_started("i1", 2, now + 50)
    # Success ends the init container even under Always: the app container starts.
    assert starts(w.container_exited("i1", 0, None, False, now + 51)) == [("app", 0)]
    assert cond(w, "Initialized", now + 51)["status"] == "True"


# --- probes ---------------------------------------------------------------------------------------

def test_probe_initial_delay_and_period():
    live = {**EXEC, "initialDelaySeconds": 5, "periodSeconds": 10, "timeoutSeconds": 2}
    w = running(pod(ctr("app", livenessProbe=live)))
    assert w.next_deadline() == T0 + 5
    assert probes(w.sync(T0 + 4)) == []
    acts = w.sync(T0 + 5)
    assert acts == [RunProbe("app", "liveness", {**live, "successThreshold": 1, "failureThreshold": 3}, 2.0)]
    assert w.sync(T0 + 5) == [] and w.next_deadline() is None  # one in flight, no more
    w.probe_result("app", "liveness", True, "", T0 + 6)
    assert w.next_deadline() == T0 + 15
    assert probes(w.sync(T0 + 15)) == [("app", "liveness")]


def test_one_probe_in_flight_at_a_time():
    w, acts = boot(pod(ctr("app", livenessProbe={**EXEC, "periodSeconds": 10})))
    assert probes(acts) == [("app", "liveness")]  # no initial delay: due as soon as it started
    assert probes(w.sync(T0 + 10)) == [] and probes(w.sync(T0 + 25)) == []  # still running
    # The answer comes back late: the missed tick runs at once, the next one a period later.
    assert probes(w.probe_result("app", "liveness", True, "", T0 + 27)) == [("app", "liveness")]
    assert w.next_deadline() is None
    w.probe_result("app", "liveness", True, "", T0 + 28)
    assert w.next_deadline() == T0 + 37


def test_liveness_failure_threshold_kills_and_restarts():
    live = {**EXEC, "initialDelaySeconds": 1, "periodSeconds": 10, "failureThreshold": 3}
    w = running(pod(ctr("app", livenessProbe=live), grace=20))
    now = T0 + 1
    for i in range(3):
        assert probes(w.sync(now)) == [("app", "liveness")]
        acts = w.probe_result("app", "liveness", False, "exit status 1", now + 1)
        assert ("Unhealthy", "Liveness probe failed: exit status 1", "Warning") in events(acts)
        if i < 2:
            assert kills(acts) == []
        now += 10
    message = "Container app failed liveness probe, will be restarted"
    assert kills(acts) == [("app", 20.0, message)]
    assert ("Killing", message, "Normal") in events(acts)
    assert cstatus(w, "app", now)["state"].get("running")  # still running while it is killed
    assert w.sync(now) == []  # no probes while being killed
    acts = w.container_exited("app", None, signal.SIGTERM, False, now + 2)
    assert starts(acts) == [("app", 1)]
    last = cstatus(w, "app", now + 2)["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"], last["message"]) == (143, "Error", message)


def test_liveness_kill_is_restarted_under_onfailure_even_on_exit_0():
    w = running(pod(ctr("app", livenessProbe={**EXEC, "failureThreshold": 1}), policy="OnFailure"))
    w.sync(T0)
    acts = w.probe_result("app", "liveness", False, "boom", T0)
    assert kills(acts)
    assert starts(w.container_exited("app", 0, None, False, T0 + 1)) == [("app", 1)]


def test_liveness_kill_under_never_is_final():
    w = running(pod(ctr("app", livenessProbe={**EXEC, "failureThreshold": 1}), policy="Never"))
    w.sync(T0)
    acts = w.probe_result("app", "liveness", False, "boom", T0)
    assert kills(acts) == [("app", 30.0, "Container app failed liveness probe")]
    assert starts(w.container_exited("app", None, signal.SIGTERM, False, T0 + 1)) == []
    assert w.status(T0 + 1)["phase"] == "Failed"
    assert w.is_terminated()


def test_probe_level_grace_period():
    live = {**EXEC, "failureThreshold": 1, "terminationGracePeriodSeconds": 5}
    w = running(pod(ctr("app", livenessProbe=live), grace=60), settings=Settings(time_scale=0.5))
    w.sync(T0)
    assert kills(w.probe_result("app", "liveness", False, "", T0))[0][1] == 2.5


def test_non_consecutive_failures_do_not_kill():
    w = running(pod(ctr("app", livenessProbe={**EXEC, "periodSeconds": 1, "failureThreshold": 2})))
    now = T0
    for ok in [False, True, False, True, False]:
        w.sync(now)
        assert kills(w.probe_result("app", "liveness", ok, "", now)) == []
        now += 1


def test_startup_probe_gates_liveness_and_readiness():
    c = ctr("app", startupProbe={**EXEC, "periodSeconds": 1, "failureThreshold": 5},
            livenessProbe={**EXEC, "periodSeconds": 10}, readinessProbe={**EXEC, "periodSeconds": 10})
    w, acts = boot(pod(c))
    assert probes(acts) == [("app", "startup")]
    app = cstatus(w, "app")
    assert (app["started"], app["ready"]) == (False, False)
    w.probe_result("app", "startup", False, "not yet", T0 + 0.5)
    assert probes(w.sync(T0 + 1)) == [("app", "startup")]  # only startup, however long
    assert w.next_deadline() is None
    acts = w.probe_result("app", "startup", True, "", T0 + 1.5)
    assert probes(acts) == [("app", "liveness"), ("app", "readiness")]  # both overdue: run now
    app = cstatus(w, "app", T0 + 1.5)
    assert (app["started"], app["ready"]) == (True, False)
    assert probes(w.sync(T0 + 100)) == []  # the startup probe never runs again
    acts = w.probe_result("app", "readiness", True, "", T0 + 2)
    assert cstatus(w, "app", T0 + 2)["ready"] is True


def test_startup_failure_threshold_kills_and_restarts():
    c = ctr("app", startupProbe={**EXEC, "periodSeconds": 1, "failureThreshold": 2},
            livenessProbe=EXEC)
    w = running(pod(c))
    w.sync(T0)
    assert kills(w.probe_result("app", "startup", False, "", T0)) == []
    w.sync(T0 + 1)
    acts = w.probe_result("app", "startup", False, "", T0 + 1)
    assert kills(acts) == [("app", 30.0, "Container app failed startup probe, will be restarted")]
    acts = w.container_exited("app", 0, None, False, T0 + 2)
    assert starts(acts) == [("app", 1)]
    # The new instance starts its probes afresh.
    assert probes(w.container_started("app", 9, T0 + 2)) == [("app", "startup")]


def test_readiness_thresholds_flip_conditions():
    ready = {**EXEC, "periodSeconds": 5, "successThreshold": 2, "failureThreshold": 2}
    w = running(pod(ctr("app", readinessProbe=ready), ctr("plain")))
    assert cstatus(w, "plain")["ready"] is True  # no readiness probe: ready once running
    assert cond(w, "Ready")["status"] == "False"
    assert cond(w, "ContainersReady")["message"] == "containers with unready status: [app]"
    now = T0
    results = [(True, False), (True, True), (False, True), (False, False)]
    for ok, ready_after in results:
        w.sync(now)
        w.probe_result("app", "readiness", ok, "nope", now + 1)
        assert cstatus(w, "app", now + 1)["ready"] is ready_after
        for kind in ("Ready", "ContainersReady"):
            assert cond(w, kind, now + 1)["status"] == str(ready_after)
        now += 5
    # Transition times: ready at T0+6 (second success), unready at T0+16 (second failure).
    assert cond(w, "Ready", now)["lastTransitionTime"] == format_time(T0 + 16)
    assert cond(w, "PodScheduled", now)["status"] == "True"


def test_ready_when_exited_is_false():
    w = running()
    assert cond(w, "Ready")["status"] == "True"
    assert starts(w.container_exited("app", 1, None, False, T0 + 3)) == [("app", 1)]
    assert cstatus(w, "app", T0 + 3)["ready"] is False  # being restarted: not ready
    for kind in ("Ready", "ContainersReady"):
        assert cond(w, kind, T0 + 3)["status"] == "False"
        assert cond(w, kind, T0 + 3)["lastTransitionTime"] == format_time(T0 + 3)
    w.container_started("app", 2, T0 + 4)
    assert cond(w, "Ready", T0 + 4)["status"] == "True"


def test_stale_probe_results_are_ignored():
    w = running(pod(ctr("app", livenessProbe={**EXEC, "initialDelaySeconds": 5, "failureThreshold": 1})))
    w.sync(T0 + 5)
    w.container_exited("app", 1, None, False, T0 + 6)  # restarted at once
    assert w.probe_result("app", "liveness", False, "", T0 + 2) == []
    assert w.probe_result("ghost", "liveness", False, "", T0 + 2) == []
    w.container_started("app", 5, T0 + 7)
    assert w.probe_result("app", "liveness", False, "", T0 + 8) == []  # not asked for yet


def test_init_containers_are_not_probed():
    w = PodWorker(pod(init=[ctr("i1", livenessProbe=EXEC)]), S, T0)
    w.sync(T0)
    assert probes(w.container_started("i1", 1, T0)) == []


# --- stop -----------------------------------------------------------------------------------------

def test_stop_kills_with_grace_and_never_restarts():
    w = running(pod(ctr("a"), ctr("b"), grace=12))
    acts = w.stop(T0 + 1)
    assert kills(acts) == [("a", 12.0, "Stopping container a"), ("b", 12.0, "Stopping container b")]
    assert ("Killing", "Stopping container a", "Normal") in events(acts)
    assert w.sync(T0 + 2) == [] and w.next_deadline() is None
    assert not w.is_terminated()
    assert starts(w.container_exited("a", None, signal.SIGTERM, False, T0 + 2)) == []
    assert not w.is_terminated()
    assert w.status(T0 + 2)["phase"] == "Running"
    w.container_exited("b", 0, None, False, T0 + 3)
    assert w.is_terminated()
    assert w.status(T0 + 3)["phase"] == "Failed"  # a died of SIGTERM (143)
    assert w.stop(T0 + 4) == []


def test_stop_with_explicit_grace_is_scaled():
    w = running(settings=Settings(time_scale=0.1))
    assert kills(w.stop(T0, grace=5)) == [("app", 0.5, "Stopping container app")]


def test_stop_default_grace_is_30s():
    w = running()
    assert kills(w.stop(T0))[0][1] == 30.0


def test_stop_again_with_shorter_grace_shortens_the_kill():
    w = running()
    w.stop(T0)
    assert kills(w.stop(T0 + 10, grace=5)) == [("app", 5.0, "Stopping container app")]
    assert kills(w.stop(T0 + 11, grace=60)) == []


def test_stop_during_backoff_cancels_the_restart():
    w = PodWorker(pod(), S, T0)
    w.sync(T0)
    crash_loop(w, 1)
    w.container_started("app", 5, T0 + 2)
    w.container_exited("app", 1, None, False, T0 + 3)
    assert w.next_deadline() == T0 + 13
    assert w.stop(T0 + 4) == []
    assert w.next_deadline() is None and w.sync(T0 + 20) == []
    assert w.is_terminated()
    assert cstatus(w, "app", T0 + 20)["state"]["terminated"]["exitCode"] == 1
    assert w.status(T0 + 20)["phase"] == "Failed"


def test_stop_while_starting_kills_once_started_in_the_time_left():
    w = PodWorker(pod(grace=10), S, T0)
    w.sync(T0)
    assert w.stop(T0 + 1) == []
    acts = w.container_started("app", 5, T0 + 4)
    assert kills(acts) == [("app", 7.0, "Stopping container app")]
    w.container_exited("app", 0, None, False, T0 + 5)
    assert w.is_terminated()
    assert w.status(T0 + 5)["phase"] == "Succeeded"


def test_stop_while_starting_and_start_fails():
    w = PodWorker(pod(), S, T0)
    w.sync(T0)
    w.stop(T0)
    assert starts(w.container_start_failed("app", "CreateContainerError", "nope", T0 + 1)) == []
    assert w.is_terminated()


def test_stop_during_liveness_kill_prevents_the_restart():
    w = running(pod(ctr("app", livenessProbe={**EXEC, "failureThreshold": 1})))
    w.sync(T0)
    w.probe_result("app", "liveness", False, "", T0)
    w.stop(T0 + 1)
    assert starts(w.container_exited("app", None, 9, False, T0 + 2)) == []
    assert w.is_terminated()


def test_stop_during_init():
    w = PodWorker(pod(init=[ctr("i1")]), S, T0)
    w.sync(T0)
    w.container_started("i1", 1, T0)
    assert kills(w.stop(T0 + 1)) == [("i1", 30.0, "Stopping container i1")]
    assert starts(w.container_exited("i1", 0, None, False, T0 + 2)) == []
    assert w.is_terminated()
    assert w.status(T0 + 2)["phase"] == "Failed"  # the app never ran


# --- adoption after a kubelet restart -------------------------------------------------------------

def test_adopt_running_containers_carries_restart_counts():
    p = pod(ctr("a"), ctr("b"), init=[ctr("i1")])
    w = PodWorker.adopt(p, S, T0, {
        "a": {"state": "running", "pid": 11, "started_at": T0 - 50, "restart_count": 4},
        "b": {"state": "running", "pid": 12, "started_at": T0 - 40, "restart_count": 0},
    })
    assert starts(w.sync(T0)) == []
    status = w.status(T0)
    assert status["phase"] == "Running"
    assert cond(w, "Initialized")["status"] == "True"  # app containers ran: init completed
    assert status["startTime"] == format_time(T0 - 50)
    a = cstatus(w, "a")
    assert a["restartCount"] == 4 and a["containerID"] == "process://11"
    assert a["state"]["running"]["startedAt"] == format_time(T0 - 50)
    assert starts(w.container_exited("a", 1, None, False, T0 + 1)) == [("a", 5)]


def test_adopt_exited_container_is_restarted_per_policy():
    found = {"app": {"state": "exited", "pid": 11, "started_at": T0 - 50, "restart_count": 2,
                     "exit_code": 1, "signal": None, "finished_at": T0 - 5}}
    w = PodWorker.adopt(pod(policy="OnFailure"), S, T0, found)
    assert cstatus(w, "app")["lastState"]["terminated"]["exitCode"] == 1
    assert starts(w.sync(T0)) == [("app", 3)]
    found["app"]["exit_code"] = 0
    w = PodWorker.adopt(pod(policy="OnFailure"), S, T0, found)
    assert starts(w.sync(T0)) == []
    assert w.status(T0)["phase"] == "Succeeded"


def test_adopt_mid_init_continues_with_the_next_init_container():
    p = pod(init=[ctr("i1"), ctr("i2")])
    w = PodWorker.adopt(p, S, T0, {"i1": {"state": "exited", "started_at": T0 - 9, "restart_count": 0,
                                          "exit_code": 0, "finished_at": T0 - 8}})
    assert starts(w.sync(T0)) == [("i2", 0)]


def test_adopt_probes_running_containers_afresh():
    c = ctr("app", livenessProbe={**EXEC, "initialDelaySeconds": 30, "periodSeconds": 10})
    w = PodWorker.adopt(pod(c), S, T0, {"app": {"state": "running", "pid": 3, "started_at": T0 - 100,
                                                "restart_count": 1}})
    assert probes(w.sync(T0)) == [("app", "liveness")]  # long past its initial delay


def test_adopt_ignores_unknown_containers():
    w = PodWorker.adopt(pod(), S, T0, {"ghost": {"state": "running", "pid": 1, "started_at": T0}})
    assert starts(w.sync(T0)) == [("app", 0)]


# --- the status a restarted kubelet rebuilds ------------------------------------------------------

WALL = 1_700_000_000  # the wall clock's offset from the fake clock
SHIM_DIED = "the container's shim (pid 99) died: the container was killed"


def record(state, n, started_at, pid=None, **end) -> dict:
    """A start as the runtime's files keep it (Runtime.found's records)."""
    out = {"state": state, "restart_count": n, "pid": pid, "started_at": started_at, "exit_code": None,
           "signal": None, "oom_killed": False, "finished_at": None, "reason": None, "message": None}
    return {**out, **end}


def crashed_and_restarted(policy="Always"):
    """A container crashed (exit 1) and was restarted: the live worker, and its records."""
    w = PodWorker(pod(policy=policy), S, T0, wall_offset=WALL)
    w.sync(T0)
    w.container_started("app", 100, T0 + 0.2, started_at=T0 + 0.1)
    w.container_exited("app", 1, None, False, T0 + 5.2, started_at=T0 + 0.1, finished_at=T0 + 5.1)
    w.sync(T0 + 5.2)
    w.container_started("app", 101, T0 + 5.4, started_at=T0 + 5.3)
    return w, {"app": record("running", 1, T0 + 5.3, 101, previous=record("exited", 0, T0 + 0.1, 100, exit_code=1,
                                                                             finished_at=T0 + 5.1))}


def shim_killed():
    w = PodWorker(pod(), S, T0, wall_offset=WALL)
    w.sync(T0)
    w.container_started("app", 100, T0 + 0.2, started_at=T0 + 0.1)
    w.container_exited("app", None, signal.SIGKILL, False, T0 + 3.2, finished_at=T0 + 3.1, message=SHIM_DIED)
    w.sync(T0 + 3.2)
    w.container_started("app", 101, T0 + 3.4, started_at=T0 + 3.3)
    previous = record("exited", 0, T0 + 0.1, 100, signal=9, finished_at=T0 + 3.1, message=SHIM_DIED)
    return w, {"app": record("running", 1, T0 + 3.3, 101, previous=previous)}


def probe_killed():
    liveness = {**EXEC, "periodSeconds": 1, "failureThreshold": 1}
    w = PodWorker(pod(ctr("app", livenessProbe=liveness)), S, T0, wall_offset=WALL)
    w.sync(T0)
    w.container_started("app", 100, T0, started_at=T0)
    w.sync(T0 + 1)
    kill = kills(w.probe_result("app", "liveness", False, "no", T0 + 1))
    message = kill[0][2]
    w.container_exited("app", None, signal.SIGTERM, False, T0 + 1.5, finished_at=T0 + 1.4)
    w.sync(T0 + 1.5)
    w.container_started("app", 101, T0 + 1.6, started_at=T0 + 1.6)
    previous = record("exited", 0, T0, 100, signal=15, finished_at=T0 + 1.4, message=message)
    return w, {"app": record("running", 1, T0 + 1.6, 101, previous=previous)}


def start_failed():
    w = PodWorker(pod(), S, T0, wall_offset=WALL)
    w.sync(T0)
    w.container_start_failed("app", "CreateContainerError", "exec: nope", T0 + 0.2, failed_at=T0 + 0.1)
    w.sync(T0 + 0.2)
    w.container_started("app", 101, T0 + 0.4, started_at=T0 + 0.3)
    previous = record("exited", 0, None, None, exit_code=128, finished_at=T0 + 0.1, reason="StartError",
                      message="exec: nope")
    return w, {"app": record("running", 1, T0 + 0.3, 101, previous=previous)}


def completed_after_a_crash():
    w, _ = crashed_and_restarted("OnFailure")
    w.container_exited("app", 0, None, False, T0 + 8.2, started_at=T0 + 5.3, finished_at=T0 + 8.1)
    previous = record("exited", 0, T0 + 0.1, 100, exit_code=1, finished_at=T0 + 5.1)
    return w, {"app": record("exited", 1, T0 + 5.3, 101, exit_code=0, finished_at=T0 + 8.1, previous=previous)}


@pytest.mark.parametrize("history", [crashed_and_restarted, shim_killed, probe_killed, start_failed,
                                     completed_after_a_crash])
def test_adoption_rebuilds_the_same_status_from_the_runtimes_records(history):
    """What a kubelet restart must not change: lastState and its times (the "(3s ago)" of
    RESTARTS), the running instance's start, restartCount, the pod's startTime."""
    live, found = history()
    now = T0 + 20
    adopted = PodWorker.adopt(live.pod, S, now, found, wall_offset=WALL, start_time=T0)
    before, after = live.status(now), adopted.status(now)
    assert after["containerStatuses"] == before["containerStatuses"]
    assert (after["phase"], after["startTime"]) == (before["phase"], before["startTime"])
    assert before["containerStatuses"][0]["lastState"]["terminated"]  # there is something to keep


def test_shim_death_is_a_crash_with_the_runtimes_report():
    w = running()
    acts = w.container_exited("app", None, signal.SIGKILL, False, T0 + 3, finished_at=T0 + 2.9, message=SHIM_DIED)
    assert starts(acts) == [("app", 1)]  # the first restart is immediate, as after any crash
    term = cstatus(w, "app", T0 + 3)["lastState"]["terminated"]
    assert (term["exitCode"], term["reason"], term["signal"], term["message"]) == (137, "Error", 9, SHIM_DIED)
    assert term["finishedAt"] == format_time(T0 + 2.9)
    assert "containerID" not in cstatus(w, "app", T0 + 3)  # the dead PID is not reported running


def test_probe_kill_says_what_the_terminated_state_will_say():
    liveness = {**EXEC, "periodSeconds": 1, "failureThreshold": 1}
    w = running(pod(ctr("app", livenessProbe=liveness)))
    w.sync(T0 + 1)
    kill = [a for a in w.probe_result("app", "liveness", False, "no", T0 + 1) if isinstance(a, KillContainer)]
    assert kill[0].termination_message == "Container app failed liveness probe, will be restarted"
    assert [a.termination_message for a in running().stop(T0) if isinstance(a, KillContainer)] == [None]


# --- status shape ---------------------------------------------------------------------------------

def test_status_shape():
    w = PodWorker(pod(ctr("b", image="busybox"), ctr("a")), S, T0, wall_offset=1_700_000_000)
    w.sync(T0)
    w.container_started("a", 7, T0 + 1)
    w.container_started("b", 8, T0 + 1)
    status = w.status(T0 + 2)
    assert set(status) == {"phase", "conditions", "hostIP", "hostIPs", "podIP", "podIPs", "startTime",
                       "containerStatuses"}
    assert status["hostIP"] == status["podIP"] == "127.0.0.1"
    assert status["startTime"] == "2023-11-14T22:30:00Z"  # 1_700_000_000 + T0
    assert [c["type"] for c in status["conditions"]] == ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert all(c["status"] == "True" for c in status["conditions"])
    assert [c["name"] for c in status["containerStatuses"]] == ["a", "b"]  # sorted, as the kubelet does
    assert status["containerStatuses"][0] == {
        "name": "a", "state": {"running": {"startedAt": "2023-11-14T22:30:01Z"}}, "lastState": {},
        "ready": True, "started": True, "restartCount": 0, "image": "", "imageID": "",
        "containerID": "process://7"}  # image and imageID always there: Kubernetes' clients require them
    assert status["containerStatuses"][1]["image"] == "busybox"


def test_format_time():
    assert format_time(0) == "1970-01-01T00:00:00Z"
    assert format_time(1.999) == "1970-01-01T00:00:01Z"
    assert format_time(1795294660) == "2026-11-21T20:57:40Z"


# --- random event sequences (hypothesis) ----------------------------------------------------------

PHASES = {"Pending", "Running", "Succeeded", "Failed"}
FAST = {**EXEC, "periodSeconds": 2, "failureThreshold": 2}
PROBED = [ctr("a", livenessProbe=FAST, readinessProbe={**FAST, "successThreshold": 2}),
          ctr("b", startupProbe={**FAST, "initialDelaySeconds": 1}, livenessProbe={**FAST, "failureThreshold": 1})]
TEMPLATES = [pod(policy=p) for p in RESTARTED] + [pod(*PROBED, policy=p, grace=5) for p in RESTARTED] + [
    pod(*PROBED, init=[ctr("i1"), ctr("i2")], policy=p, grace=5) for p in RESTARTED]
EXITS = [dict(exit_code=0, signal=None, oom_killed=False), dict(exit_code=1, signal=None, oom_killed=False),
         dict(exit_code=None, signal=15, oom_killed=False), dict(exit_code=None, signal=9, oom_killed=True),
         dict(exit_code=None, signal=None, oom_killed=False)]


class PodWorkerMachine(RuleBasedStateMachine):
    """A fake shell that keeps the protocol (answers only what it was asked), driven at random,
    plus junk events the worker must ignore. Invariants: nothing raises, restartCount never
    decreases, at most one StartContainer outstanding per container, no StartContainer after
    stop(), kills and probes only for running containers, sync is idempotent."""

    @initialize(template=st.sampled_from(TEMPLATES), scale=st.sampled_from([1.0, 0.05]))
    def boot(self, template, scale):
        self.now = T0
        self.w = PodWorker(template, Settings(time_scale=scale), self.now)
        spec = template["spec"]
        self.names = [c["name"] for c in spec.get("initContainers", []) + spec["containers"]]
        self.outstanding: set[str] = set()  # StartContainer asked, not answered
        self.running: set[str] = set()  # processes that exist (running or being killed)
        self.inflight: set[tuple[str, str]] = set()
        self.stopped = False
        self.counts: dict[str, int] = {}
        self.pid = 100
        self.apply(self.w.sync(self.now))

    def apply(self, actions):
        for a in actions:
            if isinstance(a, StartContainer):
                assert not self.stopped, "StartContainer after stop()"
                assert a.container not in self.outstanding | self.running, "second StartContainer"
                self.outstanding.add(a.container)
            elif isinstance(a, KillContainer):
                assert a.container in self.running and a.grace >= 0
            elif isinstance(a, RunProbe):
                assert a.container in self.running, "probe of a container that is not running"
                assert (a.container, a.kind) not in self.inflight, "second probe in flight"
                assert a.timeout > 0
                self.inflight.add((a.container, a.kind))
            else:
                assert isinstance(a, RecordEvent) and a.type in ("Normal", "Warning")

    @invariant()
    def status_is_sane(self):
        if not hasattr(self, "w"):
            return
        status = self.w.status(self.now)
        assert status["phase"] in PHASES
        for c in status["containerStatuses"] + status.get("initContainerStatuses", []):
            assert c["restartCount"] >= self.counts.get(c["name"], 0), "restartCount decreased"
            self.counts[c["name"]] = c["restartCount"]
            assert len(c["state"]) == 1
            assert not c["ready"] or c["started"]
        if self.stopped and not (self.outstanding or self.running):
            assert self.w.is_terminated()
        if self.w.is_terminated():
            assert not (self.outstanding or self.running)
            assert self.stopped or status["phase"] in ("Succeeded", "Failed")

    @rule(dt=st.one_of(st.floats(0, 5), st.floats(0, 700)))
    def tick(self, dt):
        self.now += dt
        self.apply(self.w.sync(self.now))
        deadline = self.w.next_deadline()
        assert deadline is None or deadline > self.now
        again = self.w.sync(self.now)
        assert not [a for a in again if not isinstance(a, RecordEvent)], "sync not idempotent"

    @rule()
    def to_deadline(self):
        deadline = self.w.next_deadline()
        if deadline is not None:
            self.now = max(self.now, deadline)
            self.apply(self.w.sync(self.now))

    @precondition(lambda self: self.outstanding)
    @rule(data=st.data(), fail=st.integers(0, 5))
    def answer_start(self, data, fail):
        name = data.draw(st.sampled_from(sorted(self.outstanding)))
        self.outstanding.remove(name)
        if fail == 0:  # now and then the process cannot be started
            self.apply(self.w.container_start_failed(name, "CreateContainerError", "no such file", self.now))
            return
        self.running.add(name)
        self.pid += 1
        self.apply(self.w.container_started(name, self.pid, self.now))

    @precondition(lambda self: self.running)
    @rule(data=st.data(), how=st.sampled_from(EXITS))
    def exits(self, data, how):
        name = data.draw(st.sampled_from(sorted(self.running)))
        self.running.remove(name)
        self.inflight = {k for k in self.inflight if k[0] != name}  # the shell drops its probes
        self.apply(self.w.container_exited(name, now=self.now, **how))

    @precondition(lambda self: self.inflight)
    @rule(data=st.data(), ok=st.booleans())
    def probe_answers(self, data, ok):
        key = data.draw(st.sampled_from(sorted(self.inflight)))
        self.inflight.remove(key)
        self.apply(self.w.probe_result(key[0], key[1], ok, "result", self.now))

    @rule(grace=st.one_of(st.none(), st.floats(0, 60)), dice=st.integers(0, 7))
    def stop(self, grace, dice):
        if dice and not self.stopped:  # rarely, so that most runs get somewhere first
            return
        self.stopped = True
        self.apply(self.w.stop(self.now, grace))

    @rule(data=st.data(), kind=st.sampled_from(["started", "failed", "exited", "probe"]))
    def junk(self, data, kind):
        """An event the worker never asked for: ignored, no actions."""
        name = data.draw(st.sampled_from(self.names + ["ghost"]))
        if kind == "started" and name not in self.outstanding:
            assert self.w.container_started(name, 1, self.now) == []
        elif kind == "failed" and name not in self.outstanding:
            assert self.w.container_start_failed(name, "X", "y", self.now) == []
        elif kind == "exited" and name not in self.outstanding | self.running:
            assert self.w.container_exited(name, 1, None, False, self.now) == []
        elif kind == "probe":
            probe_kind = data.draw(st.sampled_from(["startup", "liveness", "readiness", "bogus"]))
            if (name, probe_kind) not in self.inflight:
                assert self.w.probe_result(name, probe_kind, False, "", self.now) == []


PodWorkerMachine.TestCase.settings = hsettings(max_examples=150, stateful_step_count=40, deadline=None)
test_random_event_sequences = PodWorkerMachine.TestCase


# --- images: the catalog's answer, ErrImagePull and ImagePullBackOff --------------------------------

class Images:
    """A resolver over a catalog the test edits (the shell's catalog file)."""

    def __init__(self, text: str | None = None):
        self.catalog = load(text, "/s/images.yaml", python="/py")

    def __call__(self, container: dict):
        return resolve(container, self.catalog)


def imaged(image="nosuch/image:1", **kw) -> dict:
    return {"name": "app", "image": image, **kw}


def waiting(w, now):
    return cstatus(w, "app", now)["state"].get("waiting", {}).get("reason")


def test_an_image_from_the_catalog_runs_its_entrypoint():
    w = PodWorker(pod(imaged("busybox:1.36")), S, T0, images=Images())
    acts = w.sync(T0)
    start = next(a for a in acts if isinstance(a, StartContainer))
    assert start.argv == ("sh",) and start.restart_count == 0
    assert events(acts) == [("Pulled", 'Container image "busybox:1.36" already present on machine', "Normal")]


def test_an_unknown_image_backs_off_as_the_kubelets_image_pulls_do():
    w = PodWorker(pod(imaged()), S, T0, images=Images())
    acts = w.sync(T0)
    assert starts(acts) == []
    assert [e[:1] + e[2:] for e in events(acts)] == [("Pulling", "Normal"), ("Failed", "Warning"),
                                                     ("Failed", "Warning")]
    assert events(acts)[1][1].startswith('Failed to pull image "nosuch/image:1": failed to resolve reference')
    assert events(acts)[2][1] == "Error: ErrImagePull"
    c = cstatus(w, "app", T0)
    assert c["state"]["waiting"]["reason"] == "ErrImagePull" and "/s/images.yaml" in c["state"]["waiting"]["message"]
    assert c["restartCount"] == 0 and c["lastState"] == {} and w.phase() == "Pending"
    # Pulls fail at 0, 10, 30, 70, 150, 310 (backoff 10 s doubling); in between, a sync
    # ERROR_RESYNC (10 s) after each failed pull finds the image backing off.
    timeline, shown = [], {}
    now = T0
    while now < T0 + 1000:
        now = w.next_deadline()
        acts = w.sync(now)
        assert starts(acts) == []
        timeline.append((round(now - T0), waiting(w, now)))
        shown[waiting(w, now)] = cstatus(w, "app", now)["state"]["waiting"]["message"]
    assert timeline[:9] == [(10, "ErrImagePull"), (20, "ImagePullBackOff"), (30, "ErrImagePull"),
                            (40, "ImagePullBackOff"), (70, "ErrImagePull"), (80, "ImagePullBackOff"),
                            (150, "ErrImagePull"), (160, "ImagePullBackOff"), (310, "ErrImagePull")]
    pulls = [t for t, reason in timeline if reason == "ErrImagePull"]
    assert {b - a for a, b in zip(pulls[5:], pulls[6:])} == {300}, "capped at 300 s"
    assert shown["ImagePullBackOff"] == 'Back-off pulling image "nosuch/image:1"'


def test_the_backoff_is_scaled_and_a_fixed_catalog_starts_the_container():
    images = Images()
    w = PodWorker(pod(imaged()), Settings(time_scale=0.1), T0, images=images)
    w.sync(T0)
    assert w.next_deadline() == pytest.approx(T0 + 1)
    images.catalog = load("images:\n- image: nosuch/image\n  cmd: [run]\n", "/s/images.yaml", python="/py")
    acts = w.sync(T0 + 1)
    assert [(a.argv, a.restart_count) for a in acts if isinstance(a, StartContainer)] == [(("run",), 0)]
    assert waiting(w, T0 + 1) == "ContainerCreating"


def test_an_image_gone_before_a_restart_keeps_the_restart_count_and_last_state():
    images = Images("images:\n- image: app\n  cmd: [run]\n")
    w = PodWorker(pod(imaged("app")), S, T0, images=images)
    assert starts(w.sync(T0)) == [("app", 0)]
    w.container_started("app", 100, T0)
    images.catalog = load(None, "/s/images.yaml", python="/py")
    acts = w.container_exited("app", 1, None, False, T0 + 5)  # the first restart is immediate
    assert starts(acts) == []
    c = cstatus(w, "app", T0 + 5)
    assert c["restartCount"] == 0 and c["lastState"]["terminated"]["exitCode"] == 1
    assert c["state"]["waiting"]["reason"] == "ErrImagePull"
    images.catalog = load("images:\n- image: app\n  cmd: [run]\n", "/s/images.yaml", python="/py")
    assert starts(w.sync(w.next_deadline())) == [("app", 1)]


@pytest.mark.parametrize("container, reason, event", [
    (imaged("Nginx"), "InvalidImageName", "InspectFailed"),
    (imaged(imagePullPolicy="Never"), "ErrImageNeverPull", "ErrImageNeverPull"),
])
def test_an_image_not_even_tried_is_retried_without_backoff(container, reason, event):
    w = PodWorker(pod(container), S, T0, images=Images())
    acts = w.sync(T0)
    assert [e[0] for e in events(acts)] == [event, "Failed"]
    assert events(acts)[-1] == ("Failed", f"Error: {reason}", "Warning")
    for k in (1, 2, 3):
        assert w.next_deadline() == T0 + 10 * k
        w.sync(T0 + 10 * k)
        assert waiting(w, T0 + 10 * k) == reason


def test_a_pod_stopped_while_its_image_backs_off_terminates_at_once():
    w = PodWorker(pod(imaged()), S, T0, images=Images())
    w.sync(T0)
    assert w.stop(T0 + 1) == [] and w.is_terminated() and w.next_deadline() is None
    assert w.phase() == "Failed"


# --- a container's environment: CreateContainerConfigError -------------------------------------------

def test_env_from_a_missing_configmap_waits_in_config_error_then_starts_without_a_restart():
    objects = {}

    def env(p, spec, ips):
        from kubelet.envvars import container_env
        return container_env(p, spec, lambda r, ns, n: objects.get(n), list(ips), ["127.0.0.1"])

    app = ctr("app", env=[{"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "color"}}},
                          {"name": "GREETING", "value": "$(COLOR) sky"}],
              args=["--color=$(COLOR)"])
    w = PodWorker(pod(app), S, T0, env=env)
    acts = w.sync(T0)
    assert starts(acts) == []
    assert events(acts) == [("Failed", 'Error: configmap "cfg" not found', "Warning")]
    c = cstatus(w, "app")
    assert c["state"]["waiting"] == {"reason": "CreateContainerConfigError", "message": 'configmap "cfg" not found'}
    assert c["restartCount"] == 0 and c["lastState"] == {}
    assert w.next_deadline() == T0 + 10  # retried ERROR_RESYNC later, not in a busy loop
    assert w.sync(T0 + 5) == []

    objects["cfg"] = {"data": {"color": "blue"}}
    acts = w.sync(T0 + 10)
    (start,) = [a for a in acts if isinstance(a, StartContainer)]
    assert start.restart_count == 0  # no container was made before: nothing to count
    assert dict(start.env) == {"COLOR": "blue", "GREETING": "blue sky"}
    assert start.argv[-1] == "--color=blue"
    w.container_started("app", 100, T0 + 10)
    c = cstatus(w, "app", T0 + 10)
    assert "running" in c["state"] and c["restartCount"] == 0 and c["lastState"] == {}


def test_invalid_env_from_keys_are_skipped_with_a_warning_event():
    from kubelet.envvars import container_env
    app = ctr("app", envFrom=[{"prefix": "1", "configMapRef": {"name": "cfg"}}])
    acts = PodWorker(pod(app), S, T0, env=lambda p, spec, ips: container_env(
        p, spec, lambda r, ns, n: {"data": {"a": "x"}}, list(ips), [])).sync(T0)
    assert starts(acts) == [("app", 0)]
    assert [e[0] for e in events(acts)] == ["InvalidEnvironmentVariableNames"]


# --- volumes: SetUpVolumes before the first start, FailedMount with the mount backoff -------------

def test_no_container_starts_before_its_volumes_and_failed_mounts_back_off():
    from kubelet.podworker import SetUpVolumes
    w = PodWorker(pod(), S, T0, volumes=True)
    acts = w.sync(T0)
    assert acts == [SetUpVolumes(1)] and w.next_deadline() is None  # waiting for the answer
    assert w.sync(T0) == []  # one set-up at a time
    acts = w.volumes_set_up(1, ['MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found'], T0)
    assert events(acts) == [("FailedMount", 'MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found',
                             "Warning")]
    assert starts(acts) == [] and cstatus(w, "app")["state"]["waiting"] == {"reason": "ContainerCreating"}
    retries = []
    now = T0
    for attempt in range(2, 6):
        now = w.next_deadline()
        retries.append(now - T0)
        assert w.sync(now) == [SetUpVolumes(attempt)]
        w.volumes_set_up(attempt, ["still failing"], now)
    assert [round(b - a, 3) for a, b in zip([0.0] + retries, retries)] == [0.5, 1.0, 2.0, 4.0]
    assert w.volumes_set_up(4, [], now) == []  # a stale answer
    now = w.next_deadline()
    assert w.sync(now) == [SetUpVolumes(6)]
    assert starts(w.volumes_set_up(6, [], now)) == [("app", 0)]


def test_volumes_are_set_up_once_the_sandbox_is_ready_and_not_again_for_a_new_sandbox():
    from kubelet.podworker import SetUpVolumes
    from kubelet.sandbox import CreateSandbox, RemoveSandbox
    w = PodWorker(pod(), S, T0, sandboxed=True, volumes=True)
    assert [type(a) for a in w.sync(T0)] == [CreateSandbox]
    assert w.sandbox_created(0, ["10.244.0.5"], T0) == [SetUpVolumes(1)]
    assert starts(w.volumes_set_up(1, [], T0)) == [("app", 0)]
    w.container_started("app", 100, T0)
    w.sandbox_died(0, T0 + 1)
    acts = w.container_exited("app", None, 9, False, T0 + 1)
    assert [type(a) for a in acts] == [RemoveSandbox]
    assert [type(a) for a in w.sandbox_removed(0, T0 + 1)] == [CreateSandbox]
    assert starts(w.sandbox_created(1, ["10.244.0.6"], T0 + 1)) == [("app", 1)]


def test_an_adopted_pod_with_containers_needs_no_new_volume_set_up():
    w = PodWorker.adopt(pod(), S, T0, {"app": {"state": "exited", "restart_count": 0, "exit_code": 1,
                                               "started_at": T0, "finished_at": T0}}, volumes=True)
    assert starts(w.sync(T0)) == [("app", 1)]
