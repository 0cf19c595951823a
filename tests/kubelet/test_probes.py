"""Probe scheduling and result accounting, pure: a fake clock (floats), no probing."""
import pytest

from kubelet.probes import DEFAULTS, ProbeState, container_probes, runnable, with_defaults

EXEC = {"exec": {"command": ["true"]}}


def test_defaults_are_the_apis():
    assert with_defaults(EXEC) == {**EXEC, "initialDelaySeconds": 0, "periodSeconds": 10,
                                   "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    assert DEFAULTS["periodSeconds"] == 10


def test_given_values_are_kept_and_bad_ones_clamped():
    p = with_defaults({**EXEC, "periodSeconds": 0, "failureThreshold": 5, "timeoutSeconds": "x"})
    assert (p["periodSeconds"], p["failureThreshold"], p["timeoutSeconds"]) == (1, 5, 1)


def test_liveness_and_startup_need_one_success():
    assert with_defaults({**EXEC, "successThreshold": 3}, "liveness")["successThreshold"] == 1
    assert with_defaults({**EXEC, "successThreshold": 3}, "startup")["successThreshold"] == 1
    assert with_defaults({**EXEC, "successThreshold": 3}, "readiness")["successThreshold"] == 3


def test_container_probes_by_kind():
    c = {"name": "a", "livenessProbe": EXEC, "readinessProbe": {"tcpSocket": {"port": 80}}}
    found = container_probes(c)
    assert set(found) == {"liveness", "readiness"}
    assert found["readiness"]["tcpSocket"] == {"port": 80}


def test_startup_gates_the_others():
    kinds = ["startup", "liveness", "readiness"]
    assert runnable(kinds, started=False) == ["startup"]
    assert runnable(kinds, started=True) == ["liveness", "readiness"]
    assert runnable(["liveness"], started=True) == ["liveness"]


def test_first_due_after_initial_delay_then_every_period():
    p = ProbeState.begin("liveness", {**EXEC, "initialDelaySeconds": 5, "periodSeconds": 10}, started_at=100)
    assert not p.is_due(104.9) and p.is_due(105)
    p.launch(105)
    assert p.in_flight and p.due == 115
    assert not p.is_due(200)  # one run in flight at a time
    p.record(True)
    assert p.is_due(115) and not p.is_due(114)


def test_late_launch_drops_missed_ticks():
    p = ProbeState.begin("readiness", {**EXEC, "periodSeconds": 10}, started_at=0)
    p.launch(35)  # due at 0, run late at 35: the next is one period after the run
    assert p.due == 45


def test_time_scale_applies_to_delay_and_period_not_timeout():
    p = ProbeState.begin("liveness", {**EXEC, "initialDelaySeconds": 5, "periodSeconds": 10,
                                      "timeoutSeconds": 2}, started_at=0, scale=0.1)
    assert (p.due, p.period, p.timeout) == pytest.approx((0.5, 1.0, 2.0))


def test_initial_results():
    assert ProbeState.begin("liveness", EXEC, 0).result is True
    assert ProbeState.begin("readiness", EXEC, 0).result is False
    assert ProbeState.begin("startup", EXEC, 0).result is None


def run(p: ProbeState, results):
    changes = []
    for ok in results:
        p.launch(p.due)
        changes.append(p.record(ok))
    return changes


def test_failure_threshold_needs_consecutive_failures():
    p = ProbeState.begin("liveness", {**EXEC, "failureThreshold": 3}, 0)
    assert run(p, [False, False, True, False, False]) == [False] * 5
    assert p.result is True
    assert run(p, [False]) == [True]
    assert p.result is False


def test_success_threshold_for_readiness():
    p = ProbeState.begin("readiness", {**EXEC, "successThreshold": 2, "failureThreshold": 2}, 0)
    assert run(p, [True]) == [False] and p.result is False
    assert run(p, [True]) == [True] and p.result is True
    assert run(p, [True, False]) == [False, False] and p.result is True
    assert run(p, [False]) == [True] and p.result is False


def test_startup_settles_on_first_success():
    p = ProbeState.begin("startup", {**EXEC, "failureThreshold": 30}, 0)
    assert run(p, [False, False, True]) == [False, False, True]
    assert p.result is True
