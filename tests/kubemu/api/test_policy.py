"""kubemu.api.policy: PodDisruptionBudget (policy/v1) as kube-apiserver validates it (messages
and field paths in Kubernetes' words)."""
from __future__ import annotations

import pytest

from kubemu.api.objects import default_object, validate_object, validate_object_update


def pdb(status=None, **spec) -> dict:
    obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}
    if status is not None:
        obj["status"] = status
    return obj


def errors(obj) -> list[str]:
    return [str(e) for e in validate_object(default_object(obj))]


def test_defaults_only_the_namespace():
    d = default_object(pdb(minAvailable=2))
    assert d["metadata"]["namespace"] == "default"
    assert d["spec"] == {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2}


@pytest.mark.parametrize("spec", [dict(minAvailable=2), dict(minAvailable="50%"),
                                  dict(maxUnavailable=0), dict(maxUnavailable="100%"),
                                  dict(selector={}), dict(selector=None, minAvailable=1),
                                  dict(unhealthyPodEvictionPolicy="AlwaysAllow", maxUnavailable=1),
                                  dict(unhealthyPodEvictionPolicy="IfHealthyBudget")])
def test_valid_budgets(spec):
    assert errors(pdb(**spec)) == []


@pytest.mark.parametrize("spec, want", [
    (dict(minAvailable=1, maxUnavailable=1),
     ['spec: Invalid value: {"selector":{"matchLabels":{"app":"web"}},"minAvailable":1,'
      '"maxUnavailable":1}: minAvailable and maxUnavailable cannot be both set']),
    (dict(minAvailable=-1), ["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(maxUnavailable="101%"), ['spec.maxUnavailable: Invalid value: "101%": must not be greater than 100%']),
    (dict(minAvailable="half"),
     ['spec.minAvailable: Invalid value: "half": a valid percent string must be a numeric string '
      "followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"]),
    (dict(minAvailable=True), ["spec.minAvailable: Invalid value: true: must be an integer or a percentage string"]),
    (dict(unhealthyPodEvictionPolicy="Never"),
     ['spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: '
      '"AlwaysAllow", "IfHealthyBudget"']),
    (dict(selector={"matchLabels": {"app": "-x-"}}),
     ['spec.selector.matchLabels: Invalid value: "-x-": a valid label must be an empty string or '
      "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
      "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
      "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]),
    (dict(selector={"matchExpressions": [{"key": "app", "operator": "In"}]}),
     ["spec.selector.matchExpressions[0].values: Required value: must be specified when "
      "`operator` is 'In' or 'NotIn'"]),
    (dict(minAvailable=1, maxSurge=1), ["spec.maxSurge: Unknown field"]),
])
def test_invalid_specs(spec, want):
    assert errors(pdb(**spec)) == want


def test_status():
    good = {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3,
            "observedGeneration": 1, "disruptedPods": {"web-1": "2024-01-01T00:00:00Z"},
            "conditions": [{"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods",
                            "message": "", "observedGeneration": 1,
                            "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    assert errors(pdb(good, minAvailable=2)) == []
    bad = {"disruptionsAllowed": -1, "currentHealthy": -2, "expectedPods": "3",
           "disruptedPods": {"web-1": "yesterday"},
           "conditions": [{"type": "DisruptionAllowed", "status": "Maybe"},
                          {"type": "DisruptionAllowed", "status": "True"}]}
    assert errors(pdb(bad, minAvailable=2)) == [
        "status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0",
        "status.currentHealthy: Invalid value: -2: must be greater than or equal to 0",
        'status.expectedPods: Invalid value: "3": must be an integer',
        'status.disruptedPods[web-1]: Invalid value: "yesterday": must be an RFC 3339 date-time, '
        'e.g. "2006-01-02T15:04:05Z"',
        'status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"',
        'status.conditions[1].type: Duplicate value: "DisruptionAllowed"']


def test_the_spec_may_change():
    old = default_object(pdb(minAvailable=2))
    old["metadata"].update(resourceVersion="1", uid="u", creationTimestamp="2024-01-01T00:00:00Z")
    new = default_object(pdb(maxUnavailable=1, selector={"matchLabels": {"app": "db"}}))
    new["metadata"] = dict(old["metadata"])
    assert validate_object_update(old, new) == []
