"""kubemu.api.batch: Job and CronJob as kube-apiserver defaults and validates them (messages and
field paths in Kubernetes' words), and the Job strategy's selector generation."""
from __future__ import annotations

import copy

import pytest

from kubemu.api.batch import prepare_job_for_create
from kubemu.api.objects import default_object, validate_object, validate_object_update

UID = "0d1c2b3a-0000-4000-8000-000000000001"


def template(restart="Never", **pod_spec) -> dict:
    spec = {"containers": [{"name": "main", "image": "busybox:1.36"}], **pod_spec}
    if restart is not None:
        spec["restartPolicy"] = restart
    return {"spec": spec}


def job(name="pi", restart="Never", **spec) -> dict:
    base = {"template": template(restart)}
    base.update(spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": base}


def created(obj) -> dict:
    """The Job as the apiserver's create path makes it: uid, generated selector, defaults."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["uid"] = UID
    return default_object(prepare_job_for_create(obj))


def job_errors(obj) -> list[str]:
    return [str(e) for e in validate_object(created(obj))]


def cronjob(name="hello", **spec) -> dict:
    base = {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template("OnFailure")}}}
    base.update(spec)
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name}, "spec": base}


def errors(obj) -> list[str]:
    return [str(e) for e in validate_object(default_object(obj))]


def stored(obj) -> dict:
    out = copy.deepcopy(obj)
    out["metadata"].update(namespace="default", resourceVersion="1",
                           creationTimestamp="2026-01-01T00:00:00Z")
    return out


# --- Job: selector generation ---------------------------------------------------------------

def test_create_generates_the_selector_and_labels():
    out = prepare_job_for_create({**job(), "status": {"active": 3}})
    assert "status" not in out
    out = prepare_job_for_create({**job(), "metadata": {"name": "pi", "uid": UID}})
    labels = {"batch.kubernetes.io/controller-uid": UID, "batch.kubernetes.io/job-name": "pi",
              "controller-uid": UID, "job-name": "pi"}
    assert out["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}
    assert out["spec"]["template"]["metadata"]["labels"] == labels
    # the Job's own labels are its template's (defaulting after the generation, as a read back
    # from the store shows them)
    assert default_object(out)["metadata"]["labels"] == labels
    assert job_errors(job()) == []


def test_the_input_is_left_untouched():
    original = {**job(), "metadata": {"name": "pi", "uid": UID}}
    before = copy.deepcopy(original)
    prepare_job_for_create(original)
    assert original == before


def test_manual_selector_is_the_users():
    manual = job(manualSelector=True, selector={"matchLabels": {"app": "pi"}},
                 template={"metadata": {"labels": {"app": "pi"}}, **template()})
    out = created(manual)
    assert out["spec"]["selector"] == {"matchLabels": {"app": "pi"}}
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "pi"}
    assert job_errors(manual) == []
    assert job_errors(job(manualSelector=True)) == ["spec.selector: Required value"]
    mismatch = job(manualSelector=True, selector={"matchLabels": {"app": "other"}},
                   template={"metadata": {"labels": {"app": "pi"}}, **template()})
    assert job_errors(mismatch) == ['spec.template.metadata.labels: Invalid value: {"app":"pi"}: '
                                    "`selector` does not match template `labels`"]


def test_the_generated_labels_must_stay():
    j = created(job())
    labels = j["spec"]["template"]["metadata"]["labels"]
    del labels["job-name"]
    labels["controller-uid"] = "other"
    assert [str(e) for e in validate_object(j)] == [
        'spec.template.metadata.labels[controller-uid]: Invalid value: {"batch.kubernetes.io/controller-uid":'
        f'"{UID}","batch.kubernetes.io/job-name":"pi","controller-uid":"other"}}: must be \'{UID}\'',
        "spec.template.metadata.labels[job-name]: Required value: pi"]


def test_a_selector_that_is_not_the_generated_one():
    j = created(job())
    j["spec"]["selector"] = {"matchLabels": {"app": "x"}}
    msgs = [str(e) for e in validate_object(j)]
    assert 'spec.selector: Invalid value: {"matchLabels":{"app":"x"}}: `selector` not auto-generated' in msgs


def test_a_users_selector_without_manual_selector_is_merged_then_rejected():
    # generateSelector adds the controller-uid to the user's selector rather than replacing it;
    # validation then says it is not the generated one
    out = created(job(selector={"matchLabels": {"app": "x"}}))
    assert out["spec"]["selector"] == {"matchLabels": {
        "app": "x", "batch.kubernetes.io/controller-uid": UID}}
    msgs = job_errors(job(selector={"matchLabels": {"app": "x"}}))
    assert ('spec.selector: Invalid value: {"matchLabels":{"app":"x",'
            f'"batch.kubernetes.io/controller-uid":"{UID}"}}}}: `selector` not auto-generated') in msgs
    # the generated selector spelled out by the user is accepted
    assert job_errors(job(selector={"matchLabels": {"batch.kubernetes.io/controller-uid": UID}})) == []


def test_a_users_generated_label_is_kept_and_checked():
    labelled = job(template={"metadata": {"labels": {"job-name": "other"}}, **template()})
    out = created(labelled)
    assert out["spec"]["template"]["metadata"]["labels"]["job-name"] == "other"
    assert [m for m in job_errors(labelled) if "job-name]" in m] == [
        'spec.template.metadata.labels[job-name]: Invalid value: {"batch.kubernetes.io/controller-uid":'
        f'"{UID}","batch.kubernetes.io/job-name":"pi","controller-uid":"{UID}","job-name":"other"}}: '
        "must be 'pi'"]


def test_a_container_name_that_is_not_a_string_beside_a_pod_failure_policy():
    bad = job(podFailurePolicy={"rules": [{"action": "FailJob", "onExitCodes": {
        "containerName": "main", "operator": "In", "values": [1]}}]})
    for name in (["a"], {"a": 1}):
        bad["spec"]["template"]["spec"]["containers"][0]["name"] = name
        msgs = job_errors(bad)
        assert any(m.startswith("spec.template.spec.containers[0].name") for m in msgs), msgs


# --- Job: defaults and validation -----------------------------------------------------------

def test_job_defaults_as_batch_v1():
    spec = created(job())["spec"]
    assert {k: spec[k] for k in ("parallelism", "completions", "backoffLimit", "completionMode",
                                 "suspend", "podReplacementPolicy")} == {
        "parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
        "suspend": False, "podReplacementPolicy": "TerminatingOrFailed"}
    assert "manualSelector" not in spec
    work_queue = created(job(parallelism=3))["spec"]
    assert work_queue["parallelism"] == 3 and "completions" not in work_queue
    per_index = created(job(completionMode="Indexed", completions=3, backoffLimitPerIndex=1))
    assert per_index["spec"]["backoffLimit"] == 2 ** 31 - 1
    with_policy = created(job(podFailurePolicy={"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}))
    assert with_policy["spec"]["podReplacementPolicy"] == "Failed"


@pytest.mark.parametrize("spec, want", [
    (dict(completions=-1), ["spec.completions: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(parallelism=-2), ["spec.parallelism: Invalid value: -2: must be greater than or equal to 0"]),
    (dict(backoffLimit=-1), ["spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(activeDeadlineSeconds=-1),
     ["spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(ttlSecondsAfterFinished=-1),
     ["spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(restart=None), ['spec.template.spec.restartPolicy: Required value: valid values: '
                          '"OnFailure", "Never"']),
    (dict(restart="Always"), ['spec.template.spec.restartPolicy: Required value: valid values: '
                              '"OnFailure", "Never"']),
    (dict(completionMode="Indexed", completions=None, parallelism=2),
     ["spec.completions: Required value: when completion mode is Indexed"]),
    (dict(completionMode="Sometimes"),
     ['spec.completionMode: Unsupported value: "Sometimes": supported values: "NonIndexed", '
      '"Indexed"']),
    (dict(backoffLimitPerIndex=1),
     ["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"]),
    (dict(podReplacementPolicy="Always"),
     ['spec.podReplacementPolicy: Unsupported value: "Always": supported values: "Failed", '
      '"TerminatingOrFailed"']),
    (dict(restart="OnFailure", podFailurePolicy={"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}),
     ['spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported '
      "when podFailurePolicy is specified"]),
])
def test_job_spec_errors(spec, want):
    restart = spec.pop("restart", "Never")
    assert job_errors(job(restart=restart, **spec)) == want


def test_indexed_job_hostnames_must_be_labels():
    long_name = "a" * 62
    assert job_errors(job(name=long_name, completionMode="Indexed", completions=10)) == [
        f'metadata.name: Invalid value: "{long_name}": will not able to create pod with invalid '
        f"DNS label: {long_name}-9"]


@pytest.mark.parametrize("rule, want", [
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 2]}}, []),
    ({"action": "Count", "onExitCodes": {"containerName": "main", "operator": "NotIn",
                                         "values": [0]}}, []),
    ({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}, []),
    ({"onExitCodes": {"operator": "In", "values": [1]}},
     ['spec.podFailurePolicy.rules[0].action: Required value: valid values: '
      '["Count" "FailIndex" "FailJob" "Ignore"]']),
    ({"action": "Retry", "onExitCodes": {"operator": "In", "values": [1]}},
     ['spec.podFailurePolicy.rules[0].action: Unsupported value: "Retry": supported values: '
      '"Count", "FailIndex", "FailJob", "Ignore"']),
    ({"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}},
     ['spec.podFailurePolicy.rules[0].action: Invalid value: "FailIndex": requires the '
      "backoffLimitPerIndex to be set"]),
    ({"action": "FailJob", "onExitCodes": {"operator": "Is", "values": [1]}},
     ['spec.podFailurePolicy.rules[0].onExitCodes.operator: Unsupported value: "Is": supported '
      'values: "In", "NotIn"']),
    ({"action": "FailJob", "onExitCodes": {"values": [1]}},
     ['spec.podFailurePolicy.rules[0].onExitCodes.operator: Required value: valid values: '
      '["In" "NotIn"]']),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 3, 2, 3]}},
     ["spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for "
      "the In operator",
      "spec.podFailurePolicy.rules[0].onExitCodes.values[3]: Duplicate value: 3",
      "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [0,3,2,3]: must be "
      "ordered"]),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": []}},
     ["spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []: at least one value "
      "is required"]),
    ({"action": "FailJob", "onExitCodes": {"containerName": "side", "operator": "In",
                                           "values": [1]}},
     ['spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: "side": must be '
      "one of the container or initContainer names in the pod template"]),
    ({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}]},
     ['spec.podFailurePolicy.rules[0].onPodConditions[0].status: Unsupported value: "Maybe": '
      'supported values: "False", "True", "Unknown"']),
    ({"action": "Ignore"},
     ["spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and "
      "OnPodConditions is required"]),
    ({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]},
      "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
     ["spec.podFailurePolicy.rules[0]: Invalid value: specifying both OnExitCodes and "
      "OnPodConditions is not supported"]),
])
def test_pod_failure_policy_rules(rule, want):
    assert job_errors(job(podFailurePolicy={"rules": [rule]})) == want


def test_too_many_pod_failure_policy_rules():
    rule = {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}
    assert job_errors(job(podFailurePolicy={"rules": [rule] * 21})) == [
        "spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items"]


def test_job_update_keeps_selector_and_template():
    old = stored(created(job()))
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    assert [str(e) for e in validate_object_update(old, new)] == [
        "spec.template: Invalid value: " + _json(new["spec"]["template"]) + ": field is immutable"]
    new = copy.deepcopy(old)
    new["spec"]["parallelism"], new["spec"]["suspend"] = 4, True  # mutable
    new["spec"]["activeDeadlineSeconds"] = 60
    assert validate_object_update(old, new) == []
    new = copy.deepcopy(old)
    new["spec"]["completions"] = 3
    assert [str(e) for e in validate_object_update(old, new)] == [
        "spec.completions: Invalid value: 3: field is immutable"]


def test_suspended_job_that_never_started_may_change_scheduling_directives():
    old = stored(created(job(suspend=True)))
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "ssd"}
    new["spec"]["template"]["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    assert validate_object_update(old, new) == []
    started = copy.deepcopy(old)
    started["status"] = {"startTime": "2026-01-01T00:00:01Z"}
    assert [e.path for e in validate_object_update(started, new)] == ["spec.template"]
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    assert [e.path for e in validate_object_update(old, new)] == ["spec.template"]


def test_indexed_completions_change_with_parallelism():
    old = stored(created(job(completionMode="Indexed", completions=3, parallelism=3)))
    new = copy.deepcopy(old)
    new["spec"]["completions"] = new["spec"]["parallelism"] = 5
    assert validate_object_update(old, new) == []
    new["spec"]["parallelism"] = 4
    assert [str(e) for e in validate_object_update(old, new)] == [
        "spec.completions: Invalid value: 5: can only be modified in tandem with spec.parallelism"]


def _json(value) -> str:
    from kubemu.api.fielderrors import go_value
    return go_value(value)


# --- CronJob --------------------------------------------------------------------------------

def test_cronjob_defaults_as_batch_v1():
    spec = default_object(cronjob())["spec"]
    assert {k: spec[k] for k in ("concurrencyPolicy", "suspend", "successfulJobsHistoryLimit",
                                 "failedJobsHistoryLimit")} == {
        "concurrencyPolicy": "Allow", "suspend": False, "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1}
    # the job template's pod spec is defaulted; its Job spec is when the Job is made
    job_spec = spec["jobTemplate"]["spec"]
    assert job_spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert "parallelism" not in job_spec
    assert errors(cronjob()) == [] and errors(cronjob(schedule="@hourly")) == []
    assert errors(cronjob(timeZone="Europe/Paris")) == []


@pytest.mark.parametrize("spec, want", [
    (dict(schedule="61 * * * *"),
     ['spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61']),
    (dict(schedule="* * *"),
     ['spec.schedule: Invalid value: "* * *": expected exactly 5 fields, found 3: [* * *]']),
    (dict(schedule=""), ["spec.schedule: Required value"]),
    (dict(schedule="TZ=UTC */5 * * * *"),
     ['spec.schedule: Invalid value: "TZ=UTC */5 * * * *": cannot use TZ or CRON_TZ in schedule, '
      "use timeZone field instead"]),
    (dict(timeZone="Mars/Olympus"),
     ['spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus']),
    (dict(timeZone=""),
     ['spec.timeZone: Invalid value: "": timeZone must be nil or non-empty string']),
    (dict(timeZone="Local"),
     ['spec.timeZone: Invalid value: "Local": timeZone must be an explicit time zone as defined '
      "in https://www.iana.org/time-zones"]),
    (dict(startingDeadlineSeconds=-10),
     ["spec.startingDeadlineSeconds: Invalid value: -10: must be greater than or equal to 0"]),
    (dict(concurrencyPolicy="Never"),
     ['spec.concurrencyPolicy: Unsupported value: "Never": supported values: "Allow", "Forbid", '
      '"Replace"']),
    (dict(successfulJobsHistoryLimit=-1),
     ["spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(jobTemplate={"spec": {"template": template("Always")}}),
     ['spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: '
      '"OnFailure", "Never"']),
    (dict(jobTemplate={"spec": {"completions": -1, "template": template()}}),
     ["spec.jobTemplate.spec.completions: Invalid value: -1: must be greater than or equal to 0"]),
    (dict(jobTemplate={"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template()}}),
     ['spec.jobTemplate.spec.selector: Invalid value: {"matchLabels":{"a":"b"}}: `selector` will '
      "be auto-generated"]),
    (dict(jobTemplate={"spec": {"manualSelector": True, "template": template()}}),
     ['spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: "nil", '
      '"false"']),
])
def test_cronjob_spec_errors(spec, want):
    assert errors(cronjob(**spec)) == want


def test_cronjob_name_limit():
    assert errors(cronjob(name="c" * 52)) == []
    assert errors(cronjob(name="c" * 53)) == [
        f'metadata.name: Invalid value: "{"c" * 53}": must be no more than 52 characters']
