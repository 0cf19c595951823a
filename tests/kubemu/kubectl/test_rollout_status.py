"""rollout status of StatefulSets and DaemonSets: kubectl's viewers' words."""
from __future__ import annotations

from kubemu.kubectl.rollout_status import daemonset_status, statefulset_status


def sts(status, *, replicas=3, generation=2, strategy=None):
    return {"kind": "StatefulSet", "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": replicas,
                     "updateStrategy": strategy or {"type": "RollingUpdate",
                                                    "rollingUpdate": {"partition": 0}}},
            "status": status}


def said(st):
    return st.message, st.done, st.failed


def test_statefulset_status():
    assert said(statefulset_status(sts({}))) == (
        "Waiting for statefulset spec update to be observed...", False, False)
    assert said(statefulset_status(sts({"observedGeneration": 2, "readyReplicas": 1}))) == (
        "Waiting for 2 pods to be ready...", False, False)
    assert said(statefulset_status(sts({"observedGeneration": 2, "readyReplicas": 3,
                                        "updatedReplicas": 2}))) == (
        "Waiting for partitioned roll out to finish: 2 out of 3 new pods have been updated...",
        False, False)
    assert said(statefulset_status(sts({"observedGeneration": 2, "readyReplicas": 3,
                                        "updatedReplicas": 3}))) == (
        "partitioned roll out complete: 3 new pods have been updated...", True, False)
    partitioned = {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    assert said(statefulset_status(sts({"observedGeneration": 2, "readyReplicas": 3,
                                        "updatedReplicas": 1}, strategy=partitioned)))[1]


def test_statefulset_status_without_rolling_update_parameters_compares_revisions():
    plain = {"type": "RollingUpdate"}
    assert said(statefulset_status(sts({"observedGeneration": 2, "readyReplicas": 3,
                                        "updatedReplicas": 1, "currentRevision": "web-a",
                                        "updateRevision": "web-b"}, strategy=plain))) == (
        "waiting for statefulset rolling update to complete 1 pods at revision web-b...",
        False, False)
    assert said(statefulset_status(sts({"observedGeneration": 2, "readyReplicas": 3,
                                        "currentReplicas": 3, "currentRevision": "web-b",
                                        "updateRevision": "web-b"}, strategy=plain))) == (
        "statefulset rolling update complete 3 pods at revision web-b...", True, False)


def test_on_delete_has_no_rollout_status():
    for st in (statefulset_status(sts({}, strategy={"type": "OnDelete"})),
               daemonset_status({"metadata": {"name": "x"},
                                 "spec": {"updateStrategy": {"type": "OnDelete"}}})):
        assert said(st) == ("error: rollout status is only available for RollingUpdate strategy "
                            "type", True, True)


def test_daemonset_status():
    def ds(status):
        return {"metadata": {"name": "x", "generation": 1}, "spec": {}, "status": status}
    assert said(daemonset_status(ds({}))) == (
        "Waiting for daemon set spec update to be observed...", False, False)
    assert daemonset_status(ds({"observedGeneration": 1, "desiredNumberScheduled": 3,
                                "updatedNumberScheduled": 1})).message == \
        'Waiting for daemon set "x" rollout to finish: 1 out of 3 new pods have been updated...'
    assert daemonset_status(ds({"observedGeneration": 1, "desiredNumberScheduled": 3,
                                "updatedNumberScheduled": 3, "numberAvailable": 2})).message == \
        'Waiting for daemon set "x" rollout to finish: 2 of 3 updated pods are available...'
    assert said(daemonset_status(ds({"observedGeneration": 1, "desiredNumberScheduled": 3,
                                     "updatedNumberScheduled": 3, "numberAvailable": 3}))) == (
        'daemon set "x" successfully rolled out', True, False)
