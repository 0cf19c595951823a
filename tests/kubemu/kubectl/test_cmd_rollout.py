"""rollout status|history|undo of a StatefulSet and a DaemonSet through their ControllerRevisions,
against a real store and apiserver (the test writes what the controllers would)."""
from __future__ import annotations

import copy

import pytest

from components.controllers.history import new_revision, template_data
from tests.components.apiserver import api  # noqa: F401  (a fixture)

from .test_commands_e2e import failed, ns, ok  # noqa: F401  (ns: a fixture)


def workload(kind: str) -> dict:
    obj = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web"},
           "spec": {"selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "c", "image": "img:2",
                                                          "command": ["x"]}]}}}}
    if kind == "StatefulSet":
        obj["spec"].update(replicas=2, serviceName="web")
    return obj


def with_revisions(api, ns: str, kind: str) -> dict:
    plural = {"StatefulSet": "statefulsets", "DaemonSet": "daemonsets"}[kind]
    owner = api.call("create", resource=plural, namespace=ns, object=workload(kind))
    for number, image in ((1, "img:1"), (2, "img:2")):
        old = copy.deepcopy(owner)
        old["spec"]["template"]["spec"]["containers"][0]["image"] = image
        revision = new_revision(old, template_data(old), number)
        if number == 1:
            revision["metadata"]["annotations"] = {"kubernetes.io/change-cause": "first"}
        api.call("create", resource="controllerrevisions", namespace=ns, object=revision)
    return owner


@pytest.mark.parametrize("kind,plural,name", [("StatefulSet", "statefulsets", "statefulset.apps/web"),
                                              ("DaemonSet", "daemonsets", "daemonset.apps/web")])
def test_history_and_undo_through_controller_revisions(api, ns, kind, plural, name):
    with_revisions(api, ns, kind)
    target = f"{kind.lower()}/web"
    assert ok(api, "rollout", "history", target, "-n", ns) == (
        f"{name} \nREVISION  CHANGE-CAUSE\n1         first\n2         <none>\n\n")
    shown = ok(api, "rollout", "history", target, "-n", ns, "--revision", "1")
    assert shown.startswith(f"{name} with revision #1\nPod Template:\n") and "img:1" in shown
    assert ok(api, "rollout", "undo", target, "-n", ns, "--to-revision", "2") == f"{name} skipped rollback\n"
    assert ok(api, "rollout", "undo", target, "-n", ns) == f"{name} rolled back\n"
    live = api.call("get", resource=plural, namespace=ns, name="web")
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "img:1"
    assert "$patch" not in live["spec"]["template"]
    assert failed(api, "rollout", "undo", target, "-n", ns, "--to-revision", "7") == \
        "error: unable to find specified revision 7 in history\n"


def test_status_of_a_statefulset_and_on_delete(api, ns):
    owner = with_revisions(api, ns, "StatefulSet")
    assert ok(api, "rollout", "status", "statefulset/web", "-n", ns, "--watch=false") == \
        "Waiting for statefulset spec update to be observed...\n"
    owner["status"] = {"observedGeneration": owner["metadata"]["generation"], "replicas": 2,
                       "readyReplicas": 2, "updatedReplicas": 2}
    api.call("update_status", resource="statefulsets", namespace=ns, object=owner)
    assert ok(api, "rollout", "status", "statefulset/web", "-n", ns) == \
        "partitioned roll out complete: 2 new pods have been updated...\n"
    live = api.call("get", resource="statefulsets", namespace=ns, name="web")
    live["spec"]["updateStrategy"] = {"type": "OnDelete"}
    api.call("update", resource="statefulsets", namespace=ns, object=live)
    assert failed(api, "rollout", "status", "statefulset/web", "-n", ns) == \
        "error: rollout status is only available for RollingUpdate strategy type\n"


def test_other_kinds_have_no_rollout(api, ns):
    assert failed(api, "rollout", "status", "replicaset/web", "-n", ns) == \
        "error: no status viewer has been implemented for ReplicaSet.apps\n"
