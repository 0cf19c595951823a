"""kubemu.kubectl.describe_policy: kubectl describe poddisruptionbudget."""
from __future__ import annotations

from kubemu.kubectl.describe import Related, describe

from .test_printers import NOW


def test_pdb_describe_reads_like_kubectl():
    pdb = {"kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
           "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}}
    assert describe(pdb, Related(events=[]), NOW) == """Name:           web
Namespace:      default
Min available:  2
Selector:       app=web
Status:
    Allowed disruptions:  1
    Current:              3
    Desired:              2
    Total:                3
Events:                   <none>
"""
    pdb["spec"] = {"maxUnavailable": "25%"}
    pdb["status"] = {}
    text = describe(pdb, Related(), NOW)
    assert "Max unavailable:  25%\nSelector:         <unset>\n" in text
    assert "Allowed disruptions:  0\n" in text
