"""components.apiserver.eviction: the Eviction API's disruption-budget rule, pure."""
from __future__ import annotations

import pytest

from components.apiserver import eviction
from kubemu import wire

NOW = "2026-01-02T03:04:05Z"


def pod(phase="Running", ready=True, labels=None, deleting=False, ns="default"):
    meta = {"name": "web-1", "namespace": ns, "resourceVersion": "7", "labels": labels or {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = NOW
    return {"metadata": meta, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(name="web", selector=None, ns="default", generation=1, policy=None, **status):
    spec = {"selector": {"matchLabels": {"app": "web"}} if selector is None else selector}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    return {"metadata": {"name": name, "namespace": ns, "generation": generation, "resourceVersion": "3"},
            "spec": spec, "status": {"observedGeneration": 1, **status}}


@pytest.mark.parametrize("p, ignored", [
    (pod(), False), (pod(ready=False), False), (pod("Pending"), True), (pod("Succeeded"), True),
    (pod("Failed"), True), (pod(deleting=True), True)])
def test_pods_that_need_no_budget(p, ignored):
    assert eviction.can_ignore_budget(p) is ignored


def test_guarded_deletes_name_the_pods_resource_version():
    opts = {"grace_period_seconds": None, "preconditions": None, "dry_run": False}
    assert eviction.guarded(opts, pod("Pending"))["preconditions"] == {"resourceVersion": "7"}
    assert eviction.guarded(opts, pod("Succeeded")) is opts  # terminal: nothing to race
    assert eviction.guarded(opts, pod("Succeeded"), always=True)["preconditions"] == {"resourceVersion": "7"}
    mine = {**opts, "preconditions": {"resourceVersion": "5"}}
    assert eviction.caller_precondition(mine) and eviction.guarded(mine, pod()) is mine


def test_the_pods_budget():
    assert eviction.budget_of(pod(), [pdb("other", ns="prod"), pdb("db", {"matchLabels": {"app": "db"}}),
                                      pdb("all", {}), pdb("bad", {"matchExpressions": [{"key": "a", "operator": "Near"}]})]) is None
    mine = pdb()
    assert eviction.budget_of(pod(), [mine, pdb("db", {"matchLabels": {"app": "db"}})]) is mine
    with pytest.raises(wire.WireError) as two:
        eviction.budget_of(pod(), [mine, pdb("expr", {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web"]}]})])
    assert two.value.code == "InternalError" and two.value.message == eviction.MORE_THAN_ONE


def test_unready_pods_go_without_spending_when_the_budget_allows():
    assert not eviction.unhealthy_may_go(pod(), pdb(currentHealthy=3, desiredHealthy=2))
    assert eviction.unhealthy_may_go(pod(ready=False), pdb(currentHealthy=2, desiredHealthy=2))
    assert not eviction.unhealthy_may_go(pod(ready=False), pdb(currentHealthy=1, desiredHealthy=2))
    assert not eviction.unhealthy_may_go(pod(ready=False), pdb(currentHealthy=0, desiredHealthy=0))
    assert eviction.unhealthy_may_go(pod(ready=False), pdb(policy="AlwaysAllow", currentHealthy=0, desiredHealthy=2))


def test_spending_a_disruption():
    budget = pdb(disruptionsAllowed=2, currentHealthy=3, desiredHealthy=1, disruptedPods={"web-0": NOW})
    spent = eviction.spend("web-1", budget, NOW, dry_run=False)
    assert spent["status"]["disruptionsAllowed"] == 1 and "conditions" not in spent["status"]
    assert spent["status"]["disruptedPods"] == {"web-0": NOW, "web-1": NOW}
    assert spent["metadata"]["resourceVersion"] == "3"  # written with the budget's version as precondition
    assert budget["status"]["disruptionsAllowed"] == 2  # the input is left alone
    last = eviction.spend("web-2", spent, NOW, dry_run=False)
    assert last["status"]["conditions"] == [{"type": "DisruptionAllowed", "status": "False", "observedGeneration": 1,
                                             "reason": "InsufficientPods", "message": "", "lastTransitionTime": NOW}]
    assert eviction.spend("web-1", budget, NOW, dry_run=True) is None


@pytest.mark.parametrize("budget, error, text", [
    (pdb(disruptionsAllowed=0, currentHealthy=2, desiredHealthy=2), wire.TooManyRequests,
     "The disruption budget web needs 2 healthy pods and has 2 currently"),
    (pdb(generation=2, disruptionsAllowed=1), wire.TooManyRequests,
     "The disruption budget web is still being processed by the server."),
    (pdb(disruptionsAllowed=-1), wire.Forbidden,
     'poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative'),
])
def test_blocked(budget, error, text):
    with pytest.raises(error) as blocked:
        eviction.spend("web-1", budget, NOW, dry_run=True)  # a dry run is refused the same way
    got = blocked.value.details["causes"][0]["message"] if error is wire.TooManyRequests else blocked.value.message
    assert got == text
