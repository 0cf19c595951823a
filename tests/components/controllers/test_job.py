"""Job reconcile core: a fake apiserver + kubelet (`World`) runs the actions, a fake clock."""
from __future__ import annotations

import copy

import pytest

from components.controllers import (CreatePod, DeletePod, RecordEvent, RemoveFinalizer,
                                    UpdateStatus)
from components.controllers.job import (COMPLETION_INDEX, INDEX_FAILURE_COUNT, MAX_BACKOFF,
                                        TRACKING_FINALIZER, Backoff, JobRecord, JobRecords,
                                        format_indexes, match_pod_failure_policy,
                                        orphan_finalizer_removal, parse_indexes, sync_job)
from components.controllers.podutil import format_time, parse_time

NOW = 1_700_000_000.0
UID = "job-uid"
SEL = {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}


def make_job(*, completions=1, parallelism=1, backoff_limit=6, name="pi", **spec):
    """A Job as the apiserver stores it (backoff_limit None: unset)."""
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": "default", "uid": UID, "resourceVersion": "1"},
           "spec": {"completions": completions, "parallelism": parallelism,
                    "backoffLimit": backoff_limit, "selector": SEL,
                    "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": UID,
                                                         "job-name": name}},
                                 "spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox"}]}}},
           "status": {}}
    job["spec"].update(spec)
    if backoff_limit is None:
        del job["spec"]["backoffLimit"]
    return job


class World:
    """The apiserver and kubelets as the Job controller sees them through fresh caches: actions
    are applied in order and observed at once by the records (the informer handlers)."""

    def __init__(self, job: dict, time_scale: float = 1.0):
        self.job = job
        self.pods: dict[str, dict] = {}
        self.records = JobRecords()
        self.events: list[RecordEvent] = []
        self.created = 0
        self.time_scale = time_scale
        self.max_active = 0

    @property
    def key(self):
        return "default/" + self.job["metadata"]["name"]

    def sync(self, now: float, crash_after: int | None = None):
        result = sync_job(self.job, list(self.pods.values()), self.records.get(self.key), now,
                          self.time_scale)
        self.records.set(self.key, result.record)
        actions = result.actions if crash_after is None else result.actions[:crash_after]
        backoff = result.backoff
        for action in actions:
            self.apply(action, now)
            if isinstance(action, UpdateStatus) and backoff is not None:
                # as the shell: the backoff is kept once the first status write succeeded
                self.records.backoff_counted(self.key, backoff)
                backoff = None
        if backoff is not None and crash_after is None:
            self.records.backoff_counted(self.key, backoff)
        active = sum(1 for p in self.pods.values()
                     if p["status"]["phase"] in ("Pending", "Running")
                     and not p["metadata"].get("deletionTimestamp"))
        self.max_active = max(self.max_active, active)
        return result

    def restart(self):
        """The controller-manager restarts: every record is lost."""
        self.records = JobRecords()

    def apply(self, action, now):
        if isinstance(action, CreatePod):
            self.created += 1
            pod = copy.deepcopy(action.pod)
            md = pod["metadata"]
            md["name"] = md["generateName"] + f"p{self.created}"
            md["uid"] = f"pod-{self.created}"
            md["resourceVersion"] = "1"
            md["creationTimestamp"] = format_time(now)
            pod["status"] = {"phase": "Pending"}
            self.pods[md["uid"]] = pod
            self.records.creation_observed(self.key)
        elif isinstance(action, DeletePod):
            pod = self.pods.get(action.uid)
            if pod is None:
                return
            if pod["metadata"].get("finalizers"):
                pod["metadata"]["deletionTimestamp"] = format_time(now)
            else:
                del self.pods[action.uid]
            self.records.deletion_observed(self.key, action.uid)
        elif isinstance(action, RemoveFinalizer):
            pod = self.pods.get(action.uid)
            if pod is None:
                return
            pod["metadata"]["finalizers"] = [f for f in pod["metadata"].get("finalizers") or []
                                             if f != action.finalizer]
            if pod["metadata"].get("deletionTimestamp") and not pod["metadata"]["finalizers"]:
                del self.pods[action.uid]
            self.records.finalizer_removal_observed(self.key, action.uid)
        elif isinstance(action, UpdateStatus):
            self.job = {**self.job, "status": copy.deepcopy(action.status),
                        "metadata": {**self.job["metadata"],
                                     "resourceVersion": str(int(self.job["metadata"]["resourceVersion"]) + 1)}}
            self.records.status_written(self.key, self.job["metadata"]["resourceVersion"])
        elif isinstance(action, RecordEvent):
            self.events.append(action)

    # -- the kubelet --

    def active(self):
        return [p for p in self.pods.values() if p["status"]["phase"] in ("Pending", "Running")
                and not p["metadata"].get("deletionTimestamp")]

    def finish(self, pod, code, now, restarts=0):
        pod["status"] = {"phase": "Succeeded" if code == 0 else "Failed",
                         "containerStatuses": [{"name": "c", "restartCount": restarts, "state": {
                             "terminated": {"exitCode": code, "finishedAt": format_time(now)}}}]}

    def finish_all(self, code, now):
        for pod in self.active():
            self.finish(pod, code, now)

    def terminate_deleted(self, now):
        for pod in list(self.pods.values()):
            if pod["metadata"].get("deletionTimestamp") and pod["status"]["phase"] not in ("Succeeded", "Failed"):
                self.finish(pod, 137, now)

    def condition(self, ctype):
        return next((c for c in self.job["status"].get("conditions") or [] if c["type"] == ctype), None)

    def reasons(self):
        return [(e.reason, e.message) for e in self.events]


def of(kind, actions):
    return [a for a in actions if isinstance(a, kind)]


# --- pods ---------------------------------------------------------------------------------------


def test_created_pods_carry_the_tracking_finalizer_and_controller_ref():
    world = World(make_job(completions=5, parallelism=2))
    result = world.sync(NOW)
    creates = of(CreatePod, result.actions)
    assert len(creates) == 2
    md = creates[0].pod["metadata"]
    assert md["generateName"] == "pi-"
    assert md["finalizers"] == [TRACKING_FINALIZER]
    assert md["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi",
                                      "uid": UID, "controller": True, "blockOwnerDeletion": True}]
    assert world.job["status"]["active"] == 2
    assert world.job["status"]["startTime"] == format_time(NOW)


def test_completions_with_parallelism_never_exceed_parallelism_and_complete():
    world = World(make_job(completions=5, parallelism=2))
    now = NOW
    for _ in range(20):
        world.sync(now)
        world.finish_all(0, now)
        now += 1
        if world.condition("Complete"):
            break
    status = world.job["status"]
    assert world.max_active == 2
    assert world.created == 5
    assert status["succeeded"] == 5 and status["failed"] == 0
    assert status.get("uncountedTerminatedPods") == {}
    assert world.condition("SuccessCriteriaMet")["reason"] == "CompletionsReached"
    complete = world.condition("Complete")
    assert complete["status"] == "True"
    assert status["completionTime"] == complete["lastTransitionTime"]
    assert ("Completed", "Job completed") in world.reasons()
    assert not any(p["metadata"].get("finalizers") for p in world.pods.values())
    # a finished Job is left alone
    assert world.sync(now + 100).actions == []


def test_work_queue_job_without_completions_completes_on_first_success():
    job = make_job(parallelism=3)
    del job["spec"]["completions"]
    world = World(job)
    world.sync(NOW)
    assert len(world.active()) == 3
    pods = world.active()
    world.finish(pods[0], 0, NOW + 1)
    world.sync(NOW + 1)
    assert len(world.active()) == 2     # the others are left running, none added
    for pod in pods[1:]:
        world.finish(pod, 0, NOW + 2)
    world.sync(NOW + 2)
    world.sync(NOW + 3)
    assert world.condition("Complete") is not None
    assert world.job["status"]["succeeded"] == 3


# --- backoff --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_pod_failure_backoff_doubles_from_10s_capped_and_scaled(scale):
    world = World(make_job(backoff_limit=100), time_scale=scale)
    now = NOW
    world.sync(now)
    waits = []
    for failures in range(1, 8):
        world.finish_all(1, now)
        result = world.sync(now)          # counts the failure, waits
        assert not of(CreatePod, result.actions)
        waits.append(result.requeue_after)
        # one tick early: still waiting; on time: the replacement is created
        early = world.sync(now + result.requeue_after - 0.5 * scale)
        assert not of(CreatePod, early.actions)
        now += result.requeue_after
        assert len(of(CreatePod, world.sync(now).actions)) == 1
    assert waits == pytest.approx([min(10 * 2 ** i, MAX_BACKOFF) * scale for i in range(7)])
    assert world.job["status"]["failed"] == 7


def test_the_new_backoff_is_handed_beside_the_record_not_in_it():
    """The core never commits the backoff itself: a sync whose status write fails (nothing
    applied) is recomputed from the same record, and the failed pod counts once."""
    world = World(make_job(backoff_limit=100))
    world.sync(NOW)
    world.finish_all(1, NOW)
    first = world.sync(NOW, crash_after=0)
    assert first.record.backoff == Backoff() and first.backoff == Backoff(1, NOW)
    for uid in first.record.removing:   # the shell: the skipped removals are not expected
        world.records.finalizer_removal_observed(world.key, uid)
    again = world.sync(NOW + 1)
    assert again.backoff == Backoff(1, NOW)
    assert world.records.get(world.key).backoff == Backoff(1, NOW)


def test_backoff_counts_only_failures_after_the_last_success():
    pod = lambda code, t: {"status": {"phase": "Succeeded" if code == 0 else "Failed",
                                      "containerStatuses": [{"name": "c", "state": {"terminated": {
                                          "exitCode": code, "finishedAt": format_time(t)}}}]},
                           "metadata": {}}
    record = Backoff().after([], [pod(1, NOW), pod(1, NOW + 5)], NOW)
    assert record == Backoff(2, NOW + 5)
    assert record.remaining(NOW + 5, 1.0) == 20
    assert record.after([pod(0, NOW + 10)], [pod(1, NOW + 3), pod(1, NOW + 12)], NOW) == \
        Backoff(1, NOW + 12)
    assert record.after([pod(0, NOW + 10)], [], NOW) == Backoff()


def test_backoff_limit_exceeded_fails_the_job_with_its_reason():
    world = World(make_job(backoff_limit=2))
    now = NOW
    for _ in range(30):
        world.sync(now)
        world.finish_all(1, now)
        now += MAX_BACKOFF
        if world.condition("Failed"):
            break
    assert world.created == 3
    assert world.job["status"]["failed"] == 3
    target, failed = world.condition("FailureTarget"), world.condition("Failed")
    assert (target["reason"], target["message"]) == ("BackoffLimitExceeded",
                                                     "Job has reached the specified backoff limit")
    assert (failed["reason"], failed["message"]) == (target["reason"], target["message"])
    assert ("BackoffLimitExceeded", "Job has reached the specified backoff limit") in world.reasons()
    assert world.job["status"].get("completionTime") is None


def test_on_failure_restarts_past_the_backoff_limit_fail_the_job():
    job = make_job(backoff_limit=2)
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    world = World(job)
    world.sync(NOW)
    (pod,) = world.active()
    pod["status"] = {"phase": "Running", "containerStatuses": [{"name": "c", "restartCount": 1}]}
    world.sync(NOW + 1)
    assert world.condition("FailureTarget") is None
    pod["status"]["containerStatuses"][0]["restartCount"] = 2
    result = world.sync(NOW + 2)
    assert world.condition("FailureTarget")["reason"] == "BackoffLimitExceeded"
    assert [a.uid for a in of(DeletePod, result.actions)] == [pod["metadata"]["uid"]]
    # Failed only once the pod is no longer terminating; the running pod counts as failed
    assert world.condition("Failed") is None
    world.terminate_deleted(NOW + 3)
    world.sync(NOW + 3)
    assert world.condition("Failed")["reason"] == "BackoffLimitExceeded"
    assert world.job["status"]["failed"] == 1


# --- pod failure policy ---------------------------------------------------------------------------


def failed_pod(code=1, conditions=(), container="c"):
    return {"metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "conditions": list(conditions),
                       "containerStatuses": [{"name": container, "state": {"terminated": {"exitCode": code}}}]}}


RULES = {"rules": [
    {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
    {"action": "Count", "onExitCodes": {"operator": "In", "values": [3]}},
    {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [4]}},
    {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0, 1, 3, 4]}},
]}


@pytest.mark.parametrize("pod, expected", [
    (failed_pod(42, container="main"),
     ("Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 0", True, "FailJob")),
    (failed_pod(42, container="side"),   # rule 0 names another container; rule 4 matches
     ("Container side for pod ns/p failed with exit code 42 matching FailJob rule at index 4", True, "FailJob")),
    (failed_pod(1, [{"type": "DisruptionTarget", "status": "True"}]), (None, False, "Ignore")),
    (failed_pod(1, [{"type": "DisruptionTarget", "status": "False"}]), (None, True, None)),
    (failed_pod(3), (None, True, "Count")),
    (failed_pod(4), (None, True, "FailIndex")),
    (failed_pod(1), (None, True, None)),
])
def test_pod_failure_policy_table(pod, expected):
    assert match_pod_failure_policy(RULES, pod) == expected


def test_pod_failure_policy_fail_job_sets_failure_target_then_failed():
    world = World(make_job(completions=2, parallelism=2, podFailurePolicy=RULES))
    world.sync(NOW)
    first, second = world.active()
    world.finish(first, 42, NOW + 1)
    first["status"]["containerStatuses"][0]["name"] = "main"
    result = world.sync(NOW + 1)
    target = world.condition("FailureTarget")
    assert target["reason"] == "PodFailurePolicy"
    assert target["message"] == (f"Container main for pod default/{first['metadata']['name']} "
                                 "failed with exit code 42 matching FailJob rule at index 0")
    assert [a.uid for a in of(DeletePod, result.actions)] == [second["metadata"]["uid"]]
    assert world.condition("Failed") is None        # the second pod is still terminating
    world.terminate_deleted(NOW + 2)
    world.sync(NOW + 2)
    failed = world.condition("Failed")
    assert (failed["reason"], failed["message"]) == ("PodFailurePolicy", target["message"])
    assert world.job["status"]["failed"] == 2


def test_pod_failure_policy_ignore_does_not_count_and_replaces():
    world = World(make_job(backoff_limit=0, podFailurePolicy=RULES))
    world.sync(NOW)
    (pod,) = world.active()
    world.finish(pod, 1, NOW)
    pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True"}]
    world.sync(NOW)
    assert world.job["status"]["failed"] == 0
    assert world.condition("FailureTarget") is None
    assert not pod["metadata"].get("finalizers")
    world.sync(NOW + DEFAULT_WAIT)
    assert len(world.active()) == 1


DEFAULT_WAIT = 10.0


# --- indexed ------------------------------------------------------------------------------------


def test_indexed_pods_get_their_index_and_complete_by_index():
    world = World(make_job(completions=3, parallelism=2, completionMode="Indexed"))
    result = world.sync(NOW)
    pods = [a.pod for a in of(CreatePod, result.actions)]
    assert [p["metadata"]["annotations"][COMPLETION_INDEX] for p in pods] == ["0", "1"]
    assert [p["metadata"]["labels"][COMPLETION_INDEX] for p in pods] == ["0", "1"]
    assert [p["spec"]["hostname"] for p in pods] == ["pi-0", "pi-1"]
    assert [p["metadata"]["generateName"] for p in pods] == ["pi-0-", "pi-1-"]
    assert pods[0]["spec"]["containers"][0]["env"] == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}]
    by_index = {p["metadata"]["annotations"][COMPLETION_INDEX]: p for p in world.active()}
    world.finish(by_index["1"], 0, NOW + 1)
    result = world.sync(NOW + 1)
    assert world.job["status"]["completedIndexes"] == "1"
    # index 1 is done: the next pod is index 2, never 1 again
    assert [a.pod["metadata"]["annotations"][COMPLETION_INDEX]
            for a in of(CreatePod, result.actions)] == ["2"]
    world.finish_all(0, NOW + 2)
    world.sync(NOW + 2)
    assert world.job["status"]["completedIndexes"] == "0-2"
    assert world.job["status"]["succeeded"] == 3
    assert world.condition("Complete") is not None


def test_indexed_duplicate_index_pods_are_deleted():
    world = World(make_job(completions=2, parallelism=2, completionMode="Indexed"))
    world.sync(NOW)
    dup = copy.deepcopy(world.active()[0])
    dup["metadata"].update(uid="dup", name="pi-0-dup", creationTimestamp=format_time(NOW + 5))
    world.pods["dup"] = dup
    result = world.sync(NOW + 1)
    assert len(of(DeletePod, result.actions)) == 1
    assert not of(CreatePod, result.actions)


def test_indexes_parse_and_format():
    assert parse_indexes("1,3-5,9", 6) == {1, 3, 4, 5}
    assert format_indexes({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7"
    assert format_indexes([]) == ""


# --- deadline, suspend ----------------------------------------------------------------------------


def test_active_deadline_exceeded_deletes_active_pods_and_fails():
    world = World(make_job(completions=4, parallelism=2, activeDeadlineSeconds=30))
    result = world.sync(NOW)
    assert result.requeue_after == pytest.approx(30)
    assert world.sync(NOW + 10).requeue_after == pytest.approx(20)
    result = world.sync(NOW + 30)
    assert len(of(DeletePod, result.actions)) == 2
    assert world.condition("FailureTarget")["reason"] == "DeadlineExceeded"
    world.terminate_deleted(NOW + 31)
    world.sync(NOW + 31)
    failed = world.condition("Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded",
                                                     "Job was active longer than specified deadline")
    assert ("DeadlineExceeded", "Job was active longer than specified deadline") in world.reasons()
    assert world.pods == {}


def test_suspend_deletes_active_pods_uncounted_and_resume_resets_start_time():
    world = World(make_job(completions=3, parallelism=2))
    world.sync(NOW)
    assert len(world.active()) == 2
    world.job["spec"]["suspend"] = True
    result = world.sync(NOW + 5)
    # the finalizer goes first, so a pod deleted on purpose is no failure
    kinds = [type(a) for a in result.actions if isinstance(a, (RemoveFinalizer, DeletePod))]
    assert kinds == [RemoveFinalizer, RemoveFinalizer, DeletePod, DeletePod]
    assert world.pods == {}
    assert world.job["status"]["failed"] == 0
    suspended = world.condition("Suspended")
    assert (suspended["status"], suspended["reason"]) == ("True", "JobSuspended")
    assert ("Suspended", "Job suspended") in world.reasons()
    world.sync(NOW + 6)
    assert world.created == 2
    world.job["spec"]["suspend"] = False
    world.sync(NOW + 100)
    assert world.condition("Suspended")["status"] == "False"
    assert world.condition("Suspended")["reason"] == "JobResumed"
    assert ("Resumed", "Job resumed") in world.reasons()
    assert world.job["status"]["startTime"] == format_time(NOW + 100)
    assert len(world.active()) == 2


def test_suspended_job_created_suspended_has_no_start_time():
    world = World(make_job(suspend=True))
    world.sync(NOW)
    assert world.created == 0
    assert "startTime" not in world.job["status"]
    assert world.condition("Suspended")["status"] == "True"


# --- finalizer tracking across restarts ---------------------------------------------------------


@pytest.mark.parametrize("crash_after", range(0, 8))
def test_a_restart_between_any_two_writes_neither_loses_nor_doubles_a_pod(crash_after):
    world = World(make_job(completions=4, parallelism=2, backoff_limit=10))
    now = NOW
    world.sync(now)
    first, second = world.active()
    world.finish(first, 0, now)
    world.finish(second, 1, now)
    world.sync(now, crash_after=crash_after)     # the controller dies part-way through
    world.restart()
    for _ in range(40):
        now += MAX_BACKOFF
        world.sync(now)
        world.finish_all(0, now)
        if world.condition("Complete"):
            break
    status = world.job["status"]
    assert status["succeeded"] == 4
    assert status["failed"] == 1
    assert world.created == 5     # 4 successes + 1 replacement of the failure, no extra pod
    assert world.max_active <= 2


def test_a_pod_whose_finalizer_removal_is_not_observed_yet_is_not_counted_again():
    world = World(make_job(completions=2))
    world.sync(NOW)
    (pod,) = world.active()
    world.finish(pod, 0, NOW)
    stale = copy.deepcopy(pod)          # the pod cache still shows the finalizer
    world.sync(NOW)
    assert world.job["status"]["succeeded"] == 1
    uid = pod["metadata"]["uid"]
    record = JobRecord(removing=frozenset({uid}),
                       status_rv=int(world.job["metadata"]["resourceVersion"]))
    others = [p for p in world.pods.values() if p["metadata"]["uid"] != uid]
    result = sync_job(world.job, [stale] + others, record, NOW + 1)
    assert not of(UpdateStatus, result.actions)
    assert not of(CreatePod, result.actions)


def test_a_job_cache_older_than_our_status_write_is_not_acted_on():
    world = World(make_job(completions=3, parallelism=1))
    stale_job = copy.deepcopy(world.job)
    world.sync(NOW)
    (pod,) = world.active()
    world.finish(pod, 0, NOW)
    world.sync(NOW)          # counted: finalizer gone, status succeeded=1
    record = world.records.get(world.key)
    result = sync_job(stale_job, list(world.pods.values()), record, NOW + 1)
    assert result.actions == [] and result.record == record


def test_orphaned_pods_lose_the_tracking_finalizer():
    job = make_job()
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u",
                        "finalizers": [TRACKING_FINALIZER, "other"],
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": UID,
                                             "name": "pi", "controller": True}]}}
    assert orphan_finalizer_removal(pod, job) is None                # its Job runs
    assert orphan_finalizer_removal(pod, None) == RemoveFinalizer(
        "v1", "Pod", "default", "p", "u", TRACKING_FINALIZER)          # its Job is gone
    done = {**job, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert orphan_finalizer_removal(pod, done) is not None
    pod["metadata"]["ownerReferences"][0]["kind"] = "CronJob"
    assert orphan_finalizer_removal(pod, None) is None               # not a Job's


def test_orphan_matching_pod_is_adopted_with_the_finalizer():
    world = World(make_job())
    orphan = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "stray", "namespace": "default", "uid": "stray", "resourceVersion": "3",
                           "labels": {"batch.kubernetes.io/controller-uid": UID}},
              "status": {"phase": "Running"}}
    result = sync_job(world.job, [orphan], None, NOW)
    (adopt,) = [a for a in result.actions if type(a).__name__ == "PatchObject"]
    assert adopt.changes["metadata"]["finalizers"] == [TRACKING_FINALIZER]
    assert adopt.changes["metadata"]["ownerReferences"][0]["uid"] == UID
    assert not of(CreatePod, result.actions)      # the adopted pod is the one it needs


def test_unknown_completion_mode_is_an_event():
    result = sync_job(make_job(completionMode="Odd"), [], None, NOW)
    assert [(a.reason, a.message) for a in result.actions] == [
        ("UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")]


def test_finished_time_is_parseable():
    world = World(make_job())
    world.sync(NOW)
    world.finish_all(0, NOW + 3)
    world.sync(NOW + 3)
    assert parse_time(world.job["status"]["completionTime"]) == NOW + 3


# --- backoffLimitPerIndex -------------------------------------------------------------------------


def index_of(pod):
    return pod["metadata"]["annotations"][COMPLETION_INDEX]


def test_backoff_limit_per_index_fails_the_index_not_the_job_at_once():
    world = World(make_job(completions=3, parallelism=3, completionMode="Indexed",
                           backoff_limit=None, backoffLimitPerIndex=1))
    result = world.sync(NOW)
    assert {a.pod["metadata"]["annotations"][INDEX_FAILURE_COUNT]
            for a in of(CreatePod, result.actions)} == {"0"}
    now = NOW
    for pod in world.active():
        world.finish(pod, 1 if index_of(pod) == "1" else 0, now)
    result = world.sync(now)
    assert world.job["status"]["completedIndexes"] == "0,2"
    assert world.job["status"]["failedIndexes"] == ""
    # index 1 backs off on its own: 10 s after its failure
    assert not of(CreatePod, result.actions) and result.requeue_after == pytest.approx(10)
    (retry,) = of(CreatePod, world.sync(now + 10).actions)
    assert index_of(retry.pod) == "1"
    assert retry.pod["metadata"]["annotations"][INDEX_FAILURE_COUNT] == "1"
    world.finish_all(1, now + 11)
    world.sync(now + 11)
    assert world.job["status"]["failedIndexes"] == "1"
    assert world.condition("FailureTarget")["reason"] == "FailedIndexes"
    world.sync(now + 12)
    failed = world.condition("Failed")
    assert (failed["reason"], failed["message"]) == ("FailedIndexes", "Job has failed indexes")
    assert world.job["status"]["failed"] == 2 and world.created == 4


def test_fail_index_rule_and_max_failed_indexes():
    world = World(make_job(completions=4, parallelism=4, completionMode="Indexed",
                           backoff_limit=None, backoffLimitPerIndex=5, maxFailedIndexes=0,
                           podFailurePolicy=RULES))
    world.sync(NOW)
    (pod,) = [p for p in world.active() if index_of(p) == "2"]
    world.finish(pod, 4, NOW + 1)                   # FailIndex: no retry for index 2
    result = world.sync(NOW + 1)
    assert world.job["status"]["failedIndexes"] == "2"
    target = world.condition("FailureTarget")
    assert (target["reason"], target["message"]) == (
        "MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes")
    assert len(of(DeletePod, result.actions)) == 3   # the other indexes' pods go
