"""kubemu.api.apps: StatefulSet, DaemonSet and ControllerRevision as kube-apiserver defaults and
validates them (messages and field paths in Kubernetes' words)."""
from __future__ import annotations

import copy

import pytest

from kubemu.api.objects import (SCALABLE_KINDS, default_object, scale_of, validate_object,
                                validate_object_update)


def template(labels=None, **pod_spec) -> dict:
    spec = {"containers": [{"name": "app", "image": "nginx:1.27"}], **pod_spec}
    return {"metadata": {"labels": {"app": "web"} if labels is None else labels}, "spec": spec}


def statefulset(**spec) -> dict:
    base = {"selector": {"matchLabels": {"app": "web"}}, "serviceName": "web", "template": template()}
    base.update(spec)
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"}, "spec": base}


def daemonset(**spec) -> dict:
    base = {"selector": {"matchLabels": {"app": "web"}}, "template": template()}
    base.update(spec)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": base}


def revision(**fields) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "web-6d4b9c8f7", "namespace": "default"}, **fields}


def errors(obj) -> list[str]:
    return [str(e) for e in validate_object(default_object(obj))]


def stored(obj) -> dict:
    out = default_object(obj)
    out["metadata"].update(uid="u1", resourceVersion="1", creationTimestamp="2026-01-01T00:00:00Z")
    return out


def update_errors(old, new) -> list[str]:
    return [str(e) for e in validate_object_update(stored(old), stored(new))]


CLAIM = {"metadata": {"name": "data"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


# --- StatefulSet ----------------------------------------------------------------------------

def test_statefulset_defaults_as_apps_v1():
    d = default_object(statefulset())
    spec = d["spec"]
    assert spec["replicas"] == 1 and spec["revisionHistoryLimit"] == 10
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain",
                                                            "whenScaled": "Retain"}
    assert spec["template"]["spec"]["restartPolicy"] == "Always"  # the pod template's defaults
    assert d["metadata"]["labels"] == {"app": "web"} and d["metadata"]["namespace"] == "default"
    on_delete = default_object(statefulset(updateStrategy={"type": "OnDelete"}))
    assert on_delete["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert errors(statefulset()) == [] and errors(on_delete) == []


def test_statefulset_selector_must_match_the_template():
    assert errors(statefulset(template=template({"app": "db"}))) == [
        'spec.template.metadata.labels: Invalid value: {"app":"db"}: '
        '`selector` does not match template `labels`']
    assert errors(statefulset(selector={})) == [
        "spec.selector: Invalid value: {}: empty selector is invalid for statefulset"]
    assert errors(statefulset(selector=None)) == ["spec.selector: Required value"]


@pytest.mark.parametrize("spec, want", [
    (dict(podManagementPolicy="Random"),
     ['spec.podManagementPolicy: Invalid value: "Random": must be \'OrderedReady\' or \'Parallel\'']),
    (dict(updateStrategy={"type": "Sometimes"}),
     ['spec.updateStrategy: Invalid value: {"type":"Sometimes"}: must be \'RollingUpdate\' or '
      "'OnDelete'"]),
    (dict(updateStrategy={"type": "OnDelete", "rollingUpdate": {"partition": 1}}),
     ['spec.updateStrategy.rollingUpdate: Invalid value: {"partition":1}: only allowed for '
      "updateStrategy 'RollingUpdate'"]),
    (dict(updateStrategy={"rollingUpdate": {"partition": -1}}),
     ["spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or "
      "equal to 0"]),
    (dict(updateStrategy={"rollingUpdate": {"maxUnavailable": 0}}),
     ["spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: cannot be 0"]),
    (dict(updateStrategy={"rollingUpdate": {"maxUnavailable": "150%"}}),
     ['spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be '
      "greater than 100%"]),
    (dict(replicas=-1), ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(minReadySeconds=-5),
     ["spec.minReadySeconds: Invalid value: -5: must be greater than or equal to 0"]),
    (dict(ordinals={"start": -1}),
     ["spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(persistentVolumeClaimRetentionPolicy={"whenDeleted": "Keep"}),
     ['spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep": '
      'supported values: "Retain", "Delete"']),
    (dict(template=template(restartPolicy="Never")),
     ['spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']),
    (dict(template=template(activeDeadlineSeconds=5)),
     ["spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet "
      "is not Supported"]),
    (dict(template=template(containers=[])), ["spec.template.spec.containers: Required value"]),
    (dict(volumeClaimTemplates=[CLAIM, CLAIM]),
     ['spec.volumeClaimTemplates[1].metadata.name: Duplicate value: "data"']),
    (dict(volumeClaimTemplates=[{"spec": {}}]),
     ["spec.volumeClaimTemplates[0].metadata.name: Required value"]),
])
def test_statefulset_spec_errors(spec, want):
    assert errors(statefulset(**spec)) == want


def test_statefulset_claim_templates_are_volumes_of_the_template():
    mounted = template(containers=[{"name": "db", "image": "postgres:16",
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}])
    assert errors(statefulset(template=mounted, volumeClaimTemplates=[CLAIM])) == []
    assert errors(statefulset(template=mounted)) == [
        'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "data"']


def test_statefulset_name_is_a_dns_label():
    sts = statefulset()
    sts["metadata"]["name"] = "web.v1"
    assert errors(sts) == ['metadata.name: Invalid value: "web.v1": a lowercase RFC 1123 label must '
                           "consist of lower case alphanumeric characters or '-', and must start and "
                           "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
                           "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]


def test_statefulset_status_counts():
    sts = default_object(statefulset())
    sts["status"] = {"replicas": 1, "readyReplicas": 2, "availableReplicas": 1,
                     "currentRevision": "web-1"}
    assert [str(e) for e in validate_object(sts)] == [
        "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas"]
    sts["status"] = {"replicas": 2, "readyReplicas": 1, "availableReplicas": 2}
    assert [str(e) for e in validate_object(sts)] == [
        "status.availableReplicas: Invalid value: 2: cannot be greater than status.readyReplicas"]


FORBIDDEN = ("spec: Forbidden: updates to statefulset spec for fields other than 'replicas', "
             "'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
             "'minReadySeconds' are forbidden")


def test_statefulset_update_may_change_only_some_fields():
    old = statefulset()
    allowed = statefulset(replicas=5, template=template(labels={"app": "web", "v": "2"}),
                          updateStrategy={"type": "OnDelete"}, minReadySeconds=3,
                          ordinals={"start": 1},
                          persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete"})
    assert update_errors(old, allowed) == []
    for change in (dict(serviceName="other"), dict(podManagementPolicy="Parallel"),
                   dict(volumeClaimTemplates=[CLAIM]), dict(revisionHistoryLimit=3)):
        assert update_errors(old, statefulset(**change)) == [FORBIDDEN], change
    # the selector is one of the fields that may not change: upstream says so with this message only
    new = statefulset(selector={"matchLabels": {"app": "web", "v": "2"}},
                      template=template({"app": "web", "v": "2"}))
    assert update_errors(old, new) == [FORBIDDEN]


def test_statefulset_collision_count_cannot_go_down():
    old, new = stored(statefulset()), stored(statefulset())
    old["status"], new["status"] = {"collisionCount": 2}, {"collisionCount": 1}
    assert [str(e) for e in validate_object_update(old, new)] == [
        "status.collisionCount: Invalid value: 1: cannot be decremented"]


def test_statefulset_has_the_scale_subresource():
    assert "StatefulSet" in SCALABLE_KINDS
    sts = default_object(statefulset(replicas=3))
    sts["status"] = {"replicas": 2}
    scale = scale_of(sts)
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 2, "selector": "app=web"}


# --- DaemonSet ------------------------------------------------------------------------------

def test_daemonset_defaults_as_apps_v1():
    d = default_object(daemonset())
    assert d["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                           "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert d["spec"]["revisionHistoryLimit"] == 10
    assert d["metadata"]["labels"] == {"app": "web"}
    assert errors(daemonset()) == []
    on_delete = default_object(daemonset(updateStrategy={"type": "OnDelete"}))
    assert on_delete["spec"]["updateStrategy"] == {"type": "OnDelete"}


@pytest.mark.parametrize("spec, want", [
    (dict(updateStrategy={"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}),
     ["spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge "
      "is 0"]),
    (dict(updateStrategy={"rollingUpdate": {"maxUnavailable": 1, "maxSurge": "10%"}}),
     ['spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: "10%": may not be set when '
      "maxUnavailable is non-zero"]),
    (dict(updateStrategy={"rollingUpdate": {"maxUnavailable": "101%"}}),
     ['spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "101%": must not be '
      "greater than 100%"]),
    (dict(updateStrategy={"type": "Blue"}),
     ['spec.updateStrategy: Unsupported value: {"type":"Blue"}: supported values: '
      '"RollingUpdate", "OnDelete"']),
    (dict(selector={"matchLabels": {"app": "other"}}),
     ['spec.template.metadata.labels: Invalid value: {"app":"web"}: '
      '`selector` does not match template `labels`']),
    (dict(selector={}), ["spec.selector: Invalid value: {}: empty selector is invalid for daemonset"]),
    (dict(template=template(restartPolicy="OnFailure")),
     ['spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: '
      '"Always"']),
    (dict(template=template(activeDeadlineSeconds=5)),
     ["spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in DaemonSet "
      "is not Supported"]),
    (dict(revisionHistoryLimit=-1),
     ["spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(replicas=2), ["spec.replicas: Unknown field"]),
])
def test_daemonset_spec_errors(spec, want):
    assert errors(daemonset(**spec)) == want


def test_daemonset_surge_alone_is_valid():
    assert errors(daemonset(updateStrategy={"rollingUpdate": {"maxUnavailable": 0,
                                                              "maxSurge": 1}})) == []


def test_daemonset_selector_is_immutable_template_is_not():
    old = daemonset()
    assert update_errors(old, daemonset(template=template({"app": "web", "v": "2"}))) == []
    new = daemonset(selector={"matchLabels": {"app": "web", "v": "2"}},
                    template=template({"app": "web", "v": "2"}))
    assert update_errors(old, new) == [
        'spec.selector: Invalid value: {"matchLabels":{"app":"web","v":"2"}}: field is immutable']


def test_daemonset_status_counters():
    ds = default_object(daemonset())
    ds["status"] = {"numberReady": -1, "desiredNumberScheduled": 3}
    assert [str(e) for e in validate_object(ds)] == [
        "status.numberReady: Invalid value: -1: must be greater than or equal to 0"]


# --- ControllerRevision ---------------------------------------------------------------------

def test_controllerrevision_needs_data_and_keeps_it():
    data = {"spec": {"template": {"$patch": "replace"}}}
    assert errors(revision(data=data, revision=1)) == []
    assert errors(revision(revision=-1)) == [
        "data: Required value: data is mandatory",
        "revision: Invalid value: -1: must be greater than or equal to 0"]
    assert update_errors(revision(data=data, revision=1), revision(data=data, revision=2)) == []
    changed = copy.deepcopy(data)
    changed["spec"]["template"]["x"] = 1
    assert update_errors(revision(data=data, revision=1), revision(data=changed, revision=1)) == [
        'data: Invalid value: {"spec":{"template":{"$patch":"replace","x":1}}}: field is immutable']
