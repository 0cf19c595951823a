"""StatefulSet reconcile core: a fake cluster applies the actions, a fake clock drives time."""
from __future__ import annotations

import copy

import pytest

from components.controllers import (Adopt, CreateObject, CreatePod, DeleteObject, DeletePod,
                                    PatchObject, RecordEvent, Release, UpdateStatus, merge_patch)
from components.controllers.history import HASH_LABEL
from components.controllers.podutil import format_time
from components.controllers.statefulset import (POD_INDEX_LABEL, POD_NAME_LABEL,
                                                REVISION_LABEL, max_unavailable,
                                                sync_statefulset)

NOW = 1_700_000_000.0


def make_sts(replicas=3, *, policy=None, strategy=None, image="img:1", min_ready=0,
             claims=None, retention=None, history_limit=None, service="web-svc"):
    spec = {"replicas": replicas, "serviceName": service,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": image}]}}}
    if policy:
        spec["podManagementPolicy"] = policy
    if strategy:
        spec["updateStrategy"] = strategy
    if min_ready:
        spec["minReadySeconds"] = min_ready
    if claims:
        spec["volumeClaimTemplates"] = claims
    if retention:
        spec["persistentVolumeClaimRetentionPolicy"] = retention
    if history_limit is not None:
        spec["revisionHistoryLimit"] = history_limit
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "sts-uid",
                         "generation": 1},
            "spec": spec, "status": {}}


DATA_CLAIM = {"metadata": {"name": "data"},
              "spec": {"accessModes": ["ReadWriteOnce"],
                       "resources": {"requests": {"storage": "1Gi"}}}}


class Cluster:
    """What the apiserver, the kubelet and the garbage collector would make of the actions."""

    def __init__(self, sts: dict, now: float = NOW):
        self.sts = sts
        self.now = now
        self.pods: dict[str, dict] = {}
        self.revisions: dict[str, dict] = {}
        self.claims: dict[str, dict] = {}
        self.events: list[RecordEvent] = []
        self.counter = 0
        self.last = None

    def uid(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}-uid-{self.counter}"

    def sync(self, apply: bool = True):
        self.last = sync_statefulset(self.sts, list(self.pods.values()),
                                     list(self.revisions.values()),
                                     list(self.claims.values()), self.now)
        if apply:
            self.apply(self.last.actions)
        return self.last.actions

    def apply(self, actions) -> None:
        for a in actions:
            if isinstance(a, CreatePod):
                name = a.pod["metadata"]["name"]
                assert name not in self.pods, f"{name} created twice"
                pod = copy.deepcopy(a.pod)
                pod["metadata"].update(uid=self.uid("pod"),
                                       creationTimestamp=format_time(self.now))
                pod["status"] = {"phase": "Pending"}
                self.pods[name] = pod
            elif isinstance(a, DeletePod):
                pod = self.pods.get(a.name)
                if pod and pod["metadata"]["uid"] == a.uid:
                    pod["metadata"]["deletionTimestamp"] = format_time(self.now)
            elif isinstance(a, CreateObject):
                obj = copy.deepcopy(a.object)
                obj["metadata"]["uid"] = self.uid(obj["kind"])
                obj["metadata"]["creationTimestamp"] = format_time(self.now)
                store = self.revisions if obj["kind"] == "ControllerRevision" else self.claims
                store.setdefault(obj["metadata"]["name"], obj)
            elif isinstance(a, PatchObject):
                store = {"ControllerRevision": self.revisions, "Pod": self.pods,
                         "PersistentVolumeClaim": self.claims}[a.kind]
                store[a.name] = merge_patch(store[a.name], a.changes)
            elif isinstance(a, DeleteObject):
                self.revisions.pop(a.name)
            elif isinstance(a, UpdateStatus):
                self.sts = {**self.sts, "status": a.status}
            elif isinstance(a, RecordEvent):
                self.events.append(a)
            elif isinstance(a, (Adopt, Release)):
                store = self.pods if a.kind == "Pod" else self.revisions
                m = store[a.name]["metadata"]
                refs = [r for r in m.get("ownerReferences") or []
                        if r["uid"] != (a.owner_reference["uid"] if isinstance(a, Adopt)
                                        else a.owner_uid)]
                if isinstance(a, Adopt):
                    refs.append(a.owner_reference)
                m["ownerReferences"] = refs

    # the kubelet
    def run(self, name: str, ready: bool = True) -> None:
        pod = self.pods[name]
        pod["status"] = {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True" if ready else "False",
             "lastTransitionTime": format_time(self.now)}]}

    def run_all(self) -> None:
        for name, pod in self.pods.items():
            if pod["status"]["phase"] == "Pending":
                self.run(name)

    def fail(self, name: str, phase: str = "Failed") -> None:
        self.pods[name]["status"] = {"phase": phase}

    def gone(self, name: str) -> None:
        """A terminating pod's deletion completes (and the GC takes its dependents)."""
        pod = self.pods.pop(name)
        for cname, claim in list(self.claims.items()):
            if any(r["uid"] == pod["metadata"]["uid"]
                   for r in claim["metadata"].get("ownerReferences") or []):
                del self.claims[cname]

    def finish_terminations(self) -> None:
        for name in [n for n, p in self.pods.items() if p["metadata"].get("deletionTimestamp")]:
            self.gone(name)

    def scale(self, replicas: int) -> None:
        self.sts = copy.deepcopy(self.sts)
        self.sts["spec"]["replicas"] = replicas

    def set_image(self, image: str) -> None:
        self.sts = copy.deepcopy(self.sts)
        self.sts["spec"]["template"]["spec"]["containers"][0]["image"] = image
        self.sts["metadata"]["generation"] += 1

    def converge(self, rounds: int = 40) -> None:
        """Sync, run what was created, finish what was deleted, until nothing changes."""
        for _ in range(rounds):
            actions = self.sync()
            self.run_all()
            self.finish_terminations()
            if not [a for a in actions if not isinstance(a, (UpdateStatus, RecordEvent))]:
                if not self.sync() or all(isinstance(a, (UpdateStatus, RecordEvent))
                                          for a in self.last.actions):
                    return
        raise AssertionError("did not converge")

    def image_of(self, name: str) -> str:
        return self.pods[name]["spec"]["containers"][0]["image"]


def created(actions) -> list[str]:
    return [a.pod["metadata"]["name"] for a in actions if isinstance(a, CreatePod)]


def deleted(actions) -> list[str]:
    return [a.name for a in actions if isinstance(a, DeletePod)]


def of(kind, actions):
    return [a for a in actions if isinstance(a, kind)]


# --- OrderedReady -------------------------------------------------------------------------


def test_ordered_ready_creates_one_at_a_time_each_after_its_predecessors_are_running_and_ready():
    c = Cluster(make_sts(3))
    assert created(c.sync()) == ["web-0"]
    assert created(c.sync()) == []                 # web-0 Pending
    c.run("web-0", ready=False)
    assert created(c.sync()) == []                 # Running, not Ready
    c.run("web-0")
    assert created(c.sync()) == ["web-1"]
    c.run("web-1")
    assert created(c.sync()) == ["web-2"]
    c.run("web-2")
    assert created(c.sync()) == []
    assert c.sts["status"]["replicas"] == 3 and c.sts["status"]["readyReplicas"] == 3


def test_a_pod_going_unready_stops_progress_even_behind_it():
    c = Cluster(make_sts(1))
    c.converge()
    c.scale(3)
    c.run("web-0", ready=False)
    assert created(c.sync()) == []
    c.run("web-0")
    assert created(c.sync()) == ["web-1"]


def test_pod_shape():
    c = Cluster(make_sts(1))
    (create,) = of(CreatePod, c.sync())
    pod = create.pod
    rev = c.sts["status"]["updateRevision"]
    assert rev.startswith("web-") and rev in c.revisions
    assert pod["metadata"]["name"] == "web-0" and "generateName" not in pod["metadata"]
    assert pod["metadata"]["labels"] == {"app": "web", POD_NAME_LABEL: "web-0",
                                         POD_INDEX_LABEL: "0", REVISION_LABEL: rev}
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "sts-uid"
    assert pod["metadata"]["ownerReferences"][0]["controller"] is True
    assert pod["spec"]["hostname"] == "web-0" and pod["spec"]["subdomain"] == "web-svc"


def test_min_ready_seconds_holds_the_next_pod_until_available_and_requeues_for_it():
    c = Cluster(make_sts(2, min_ready=10))
    c.sync()
    c.run("web-0")
    assert created(c.sync()) == []
    assert c.last.requeue_after == pytest.approx(10)
    c.now += 4
    c.sync()
    assert c.last.requeue_after == pytest.approx(6)
    c.now += 6
    assert created(c.sync()) == ["web-1"]


def test_scale_down_deletes_the_highest_ordinal_and_waits_for_it_to_be_gone():
    c = Cluster(make_sts(3))
    c.converge()
    c.scale(1)
    assert deleted(c.sync()) == ["web-2"]
    assert deleted(c.sync()) == []                 # web-2 terminating: wait
    c.gone("web-2")
    assert deleted(c.sync()) == ["web-1"]
    c.gone("web-1")
    assert deleted(c.sync()) == [] and set(c.pods) == {"web-0"}


def test_scale_down_waits_while_a_remaining_pod_is_unhealthy():
    c = Cluster(make_sts(3))
    c.converge()
    c.scale(1)
    c.run("web-0", ready=False)
    assert deleted(c.sync()) == []
    c.run("web-0")
    assert deleted(c.sync()) == ["web-2"]


def test_an_unhealthy_condemned_pod_that_is_the_first_unhealthy_one_is_deleted():
    c = Cluster(make_sts(3))
    c.converge()
    c.scale(2)
    c.run("web-2", ready=False)
    assert deleted(c.sync()) == ["web-2"]


def test_a_failed_pod_is_deleted_then_recreated_with_the_same_name_before_anything_else():
    c = Cluster(make_sts(2))
    c.converge()
    c.scale(3)
    c.fail("web-1")
    actions = c.sync()
    assert deleted(actions) == ["web-1"] and created(actions) == []
    (event,) = [e for e in of(RecordEvent, actions) if e.reason == "RecreatingFailedPod"]
    assert event.type == "Warning"
    assert event.message == "StatefulSet default/web is recreating failed Pod web-1"
    assert created(c.sync()) == [] and deleted(c.last.actions) == []  # still terminating
    c.gone("web-1")
    assert created(c.sync()) == ["web-1"]
    c.run("web-1")
    assert created(c.sync()) == ["web-2"]


def test_a_succeeded_pod_is_recreated_too():
    c = Cluster(make_sts(1))
    c.converge()
    c.fail("web-0", "Succeeded")
    actions = c.sync()
    assert deleted(actions) == ["web-0"]
    assert [e.reason for e in of(RecordEvent, actions)] == ["RecreatingTerminatedPod"]


def test_a_pod_deleted_by_the_user_comes_back_with_the_same_name_once_gone():
    c = Cluster(make_sts(3))
    c.converge()
    old_uid = c.pods["web-1"]["metadata"]["uid"]
    c.pods["web-1"]["metadata"]["deletionTimestamp"] = format_time(c.now)
    assert created(c.sync()) == []                 # never a second web-1 beside the old
    c.gone("web-1")
    assert created(c.sync()) == ["web-1"]
    assert c.pods["web-1"]["metadata"]["uid"] != old_uid


def test_level_based_the_same_cache_gives_the_same_named_create():
    """After a restart (or with a cache behind its own write) the core asks again for the
    same name - which the apiserver refuses as AlreadyExists - never for another pod."""
    c = Cluster(make_sts(3))
    first = c.sync(apply=False)
    again = c.sync(apply=False)
    assert created(first) == created(again) == ["web-0"]


# --- Parallel -----------------------------------------------------------------------------


def test_parallel_creates_and_deletes_all_at_once():
    c = Cluster(make_sts(3, policy="Parallel"))
    assert created(c.sync()) == ["web-0", "web-1", "web-2"]
    c.run_all()
    c.scale(0)
    assert sorted(deleted(c.sync())) == ["web-0", "web-1", "web-2"]


def test_parallel_does_not_wait_for_an_unready_pod():
    c = Cluster(make_sts(2, policy="Parallel"))
    c.sync()
    c.scale(3)
    assert created(c.sync()) == ["web-2"]


# --- rolling updates ------------------------------------------------------------------------


def test_rolling_update_goes_from_the_highest_ordinal_down_one_at_a_time():
    c = Cluster(make_sts(3))
    c.converge()
    first = c.sts["status"]["currentRevision"]
    c.set_image("img:2")
    actions = c.sync()
    assert deleted(actions) == ["web-2"]
    update = c.sts["status"]["updateRevision"]
    assert update != first and c.sts["status"]["currentRevision"] == first
    order = deleted(actions)
    for _ in range(20):
        c.finish_terminations()
        order += deleted(c.sync())
        c.run_all()
        order += deleted(c.sync())
        if c.sts["status"]["currentRevision"] == update:
            break
    assert order == ["web-2", "web-1", "web-0"]
    assert all(c.image_of(n) == "img:2" for n in c.pods)
    assert all(p["metadata"]["labels"][REVISION_LABEL] == update for p in c.pods.values())
    st = c.sts["status"]
    assert st["currentReplicas"] == st["updatedReplicas"] == 3
    assert st["observedGeneration"] == 2


def test_rolling_update_waits_for_the_replaced_pod_to_be_ready():
    c = Cluster(make_sts(3))
    c.converge()
    c.set_image("img:2")
    c.sync()
    c.gone("web-2")
    assert created(c.sync()) == ["web-2"]
    assert deleted(c.sync()) == []                 # web-2 pending
    c.run("web-2")
    assert deleted(c.sync()) == ["web-1"]


def test_partition_keeps_lower_ordinals_at_the_current_revision_even_when_recreated():
    c = Cluster(make_sts(3, strategy={"type": "RollingUpdate",
                                      "rollingUpdate": {"partition": 2}}))
    c.converge()
    c.set_image("img:2")
    c.converge()
    assert [c.image_of(n) for n in ("web-0", "web-1", "web-2")] == ["img:1", "img:1", "img:2"]
    c.pods["web-0"]["metadata"]["deletionTimestamp"] = format_time(c.now)
    c.converge()
    assert c.image_of("web-0") == "img:1"
    st = c.sts["status"]
    assert st["currentRevision"] != st["updateRevision"]
    assert st["currentReplicas"] == 2 and st["updatedReplicas"] == 1


def test_max_unavailable_deletes_that_many_at_once():
    c = Cluster(make_sts(4, policy="Parallel", strategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}))
    c.converge()
    c.set_image("img:2")
    assert deleted(c.sync()) == ["web-3", "web-2"]
    assert deleted(c.sync()) == []                 # two unavailable already
    c.gone("web-3")
    c.sync()                                       # web-3 recreated, pending: still two
    assert deleted(c.last.actions) == []
    c.run("web-3")
    assert deleted(c.sync()) == ["web-1"]


def test_max_unavailable_counts_unavailable_pods_against_the_budget():
    c = Cluster(make_sts(4, policy="Parallel", strategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}))
    c.converge()
    c.run("web-0", ready=False)
    c.set_image("img:2")
    assert deleted(c.sync()) == ["web-3"]


@pytest.mark.parametrize("value,replicas,expected", [
    (None, 5, 1), (3, 5, 3), ("50%", 5, 2), ("10%", 5, 1), (0, 5, 1)])
def test_max_unavailable_values(value, replicas, expected):
    strategy = {"type": "RollingUpdate", "rollingUpdate": {} if value is None
                else {"maxUnavailable": value}}
    assert max_unavailable(make_sts(replicas, strategy=strategy)) == expected


def test_on_delete_replaces_only_pods_the_user_deletes():
    c = Cluster(make_sts(3, strategy={"type": "OnDelete"}))
    c.converge()
    c.set_image("img:2")
    c.converge()
    assert [c.image_of(n) for n in ("web-0", "web-1", "web-2")] == ["img:1"] * 3
    c.pods["web-1"]["metadata"]["deletionTimestamp"] = format_time(c.now)
    c.converge()
    assert [c.image_of(n) for n in ("web-0", "web-1", "web-2")] == ["img:1", "img:2", "img:1"]
    assert c.sts["status"]["updatedReplicas"] == 1


# --- history --------------------------------------------------------------------------------


def test_revisions_are_created_reused_and_renumbered_on_rollback():
    c = Cluster(make_sts(1))
    c.converge()
    (r1,) = c.revisions.values()
    assert r1["revision"] == 1 and r1["metadata"]["labels"][HASH_LABEL]
    assert r1["data"]["spec"]["template"]["$patch"] == "replace"
    c.set_image("img:2")
    c.converge()
    assert sorted(r["revision"] for r in c.revisions.values()) == [1, 2]
    c.set_image("img:1")                           # back to the first template
    actions = c.sync()
    assert not [a for a in of(CreateObject, actions) if a.object["kind"] == "ControllerRevision"]
    (patch,) = [a for a in of(PatchObject, actions) if a.kind == "ControllerRevision"]
    assert patch.name == r1["metadata"]["name"] and patch.changes == {"revision": 3}
    assert c.sts["status"]["updateRevision"] == r1["metadata"]["name"]
    c.converge()
    assert c.image_of("web-0") == "img:1"


def test_history_is_truncated_to_the_limit_keeping_live_revisions():
    c = Cluster(make_sts(1, history_limit=1))
    for image in ("img:1", "img:2", "img:3", "img:4"):
        c.set_image(image)
        c.converge()
    live = {c.sts["status"]["currentRevision"]}
    assert len(c.revisions) == 2 and live <= set(c.revisions)
    assert sorted(r["revision"] for r in c.revisions.values()) == [3, 4]


def test_a_name_collision_bumps_the_collision_count():
    c = Cluster(make_sts(1))
    c.sync(apply=False)
    (create,) = [a for a in of(CreateObject, c.last.actions)
                 if a.object["kind"] == "ControllerRevision"]
    squatter = copy.deepcopy(create.object)
    squatter["data"] = {"spec": {"template": {"other": True}}}
    squatter["metadata"]["uid"] = "squatter"
    squatter["metadata"]["ownerReferences"] = [{"uid": "someone-else", "controller": True}]
    c.revisions[squatter["metadata"]["name"]] = squatter
    c.sync()
    assert c.sts["status"]["collisionCount"] == 1
    assert c.sts["status"]["updateRevision"] != squatter["metadata"]["name"]
    assert c.sts["status"]["updateRevision"] in c.revisions


def test_an_orphan_revision_matching_the_selector_is_adopted():
    c = Cluster(make_sts(1))
    c.sync(apply=False)
    (create,) = [a for a in of(CreateObject, c.last.actions)
                 if a.object["kind"] == "ControllerRevision"]
    orphan = copy.deepcopy(create.object)
    orphan["metadata"]["ownerReferences"] = []
    orphan["metadata"]["uid"] = "orphan"
    c.revisions[orphan["metadata"]["name"]] = orphan
    actions = c.sync()
    assert [a.name for a in of(Adopt, actions)] == [orphan["metadata"]["name"]]
    assert not [a for a in of(CreateObject, actions) if a.object["kind"] == "ControllerRevision"]


# --- claims and retention ------------------------------------------------------------------


def test_claims_are_created_before_the_pod_and_mounted_by_it():
    c = Cluster(make_sts(1, claims=[DATA_CLAIM]))
    c.sts["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}},
                                                    {"name": "tmp", "emptyDir": {}}]
    actions = c.sync()
    kinds = [("claim" if isinstance(a, CreateObject) and a.object["kind"] ==
              "PersistentVolumeClaim" else "pod") for a in actions
             if isinstance(a, CreatePod) or (isinstance(a, CreateObject) and
                                              a.object["kind"] == "PersistentVolumeClaim")]
    assert kinds == ["claim", "pod"]
    claim = c.claims["data-web-0"]
    assert claim["metadata"]["labels"] == {"app": "web"}
    assert not claim["metadata"].get("ownerReferences")       # Retain/Retain
    assert c.pods["web-0"]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
        {"name": "tmp", "emptyDir": {}}]


def test_an_existing_claim_is_reused():
    c = Cluster(make_sts(1, claims=[DATA_CLAIM]))
    c.claims["data-web-0"] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                              "metadata": {"name": "data-web-0", "namespace": "default",
                                           "uid": "old-claim"}}
    actions = c.sync()
    assert not [a for a in of(CreateObject, actions) if a.object["kind"] != "ControllerRevision"]
    assert created(actions) == ["web-0"]


def test_a_claim_being_deleted_blocks_the_pod_with_an_event():
    c = Cluster(make_sts(1, claims=[DATA_CLAIM]))
    c.claims["data-web-0"] = {"metadata": {"name": "data-web-0", "namespace": "default",
                                           "uid": "x", "deletionTimestamp": "2020-01-01T00:00:00Z"}}
    actions = c.sync()
    assert created(actions) == []
    (event,) = of(RecordEvent, actions)
    assert event.reason == "FailedCreate"
    assert event.message == ("create Pod web-0 in StatefulSet web failed error: "
                             "pvc data-web-0 is being deleted")


def test_a_claim_still_owned_by_a_previous_pod_blocks_the_new_one():
    c = Cluster(make_sts(1, claims=[DATA_CLAIM]))
    c.claims["data-web-0"] = {"metadata": {
        "name": "data-web-0", "namespace": "default", "uid": "x",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web-0",
                             "uid": "old-pod"}]}}
    assert created(c.sync()) == []


def test_when_deleted_delete_gives_claims_the_set_as_owner():
    c = Cluster(make_sts(1, claims=[DATA_CLAIM], retention={"whenDeleted": "Delete"}))
    c.converge()
    refs = c.claims["data-web-0"]["metadata"]["ownerReferences"]
    assert refs == [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                     "uid": "sts-uid"}]


def test_when_scaled_delete_hands_a_condemned_pods_claim_to_the_pod_before_deleting_it():
    c = Cluster(make_sts(2, claims=[DATA_CLAIM], retention={"whenScaled": "Delete"}))
    c.converge()
    assert not c.claims["data-web-1"]["metadata"].get("ownerReferences")
    c.scale(1)
    actions = c.sync()
    patch_at = next(i for i, a in enumerate(actions) if isinstance(a, PatchObject)
                    and a.name == "data-web-1")
    delete_at = next(i for i, a in enumerate(actions) if isinstance(a, DeletePod))
    assert patch_at < delete_at
    assert c.claims["data-web-1"]["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "web-1",
         "uid": c.pods["web-1"]["metadata"]["uid"]}]
    c.gone("web-1")
    assert "data-web-1" not in c.claims and "data-web-0" in c.claims


def test_retain_policy_removes_owner_references_the_policy_no_longer_wants():
    c = Cluster(make_sts(1, claims=[DATA_CLAIM], retention={"whenDeleted": "Delete"}))
    c.converge()
    c.sts = copy.deepcopy(c.sts)
    del c.sts["spec"]["persistentVolumeClaimRetentionPolicy"]
    c.converge()
    assert not c.claims["data-web-0"]["metadata"].get("ownerReferences")


# --- ownership, identity, deletion ---------------------------------------------------------


def test_orphans_are_adopted_non_matching_released_non_members_ignored():
    c = Cluster(make_sts(2))
    c.converge()
    c.pods["web-0"]["metadata"]["ownerReferences"] = []
    c.pods["web-1"]["metadata"]["labels"]["app"] = "other"
    c.pods["other-0"] = {"metadata": {"name": "other-0", "namespace": "default", "uid": "o",
                                      "labels": {"app": "web"}}, "status": {"phase": "Running"}}
    actions = c.sync(apply=False)
    assert [a.name for a in of(Adopt, actions)] == ["web-0"]
    assert [a.name for a in of(Release, actions)] == ["web-1"]


def test_an_owned_pod_that_is_not_a_member_by_name_is_released():
    c = Cluster(make_sts(1))
    c.converge()
    c.pods["other-0"] = copy.deepcopy(c.pods["web-0"])
    c.pods["other-0"]["metadata"].update(name="other-0", uid="o")
    actions = c.sync(apply=False)
    assert [(a.name, a.owner_uid) for a in of(Release, actions)] == [("other-0", "sts-uid")]
    assert not of(Adopt, actions)


def test_a_lost_identity_label_is_restored():
    c = Cluster(make_sts(1))
    c.converge()
    del c.pods["web-0"]["metadata"]["labels"][POD_INDEX_LABEL]
    actions = c.sync()
    (patch,) = [a for a in of(PatchObject, actions) if a.kind == "Pod"]
    assert patch.changes == {"metadata": {"labels": {POD_NAME_LABEL: "web-0",
                                                     POD_INDEX_LABEL: "0"}}}
    assert c.pods["web-0"]["metadata"]["labels"][POD_INDEX_LABEL] == "0"


def test_a_deleting_set_only_writes_its_status():
    c = Cluster(make_sts(3))
    c.converge()
    c.sts = copy.deepcopy(c.sts)
    c.sts["metadata"]["deletionTimestamp"] = format_time(c.now)
    c.scale(0)
    actions = c.sync()
    assert not created(actions) and not deleted(actions)


def test_start_ordinal():
    sts = make_sts(2)
    sts["spec"]["ordinals"] = {"start": 5}
    c = Cluster(sts)
    c.converge()
    assert sorted(c.pods) == ["web-5", "web-6"]


def test_status_counts():
    c = Cluster(make_sts(3, min_ready=30))
    c.sync()
    c.run("web-0")
    c.now += 31
    c.sync()
    c.run("web-1")
    c.sync()
    st = c.sts["status"]
    assert (st["replicas"], st["readyReplicas"], st["availableReplicas"]) == (2, 2, 1)
    assert st["currentRevision"] == st["updateRevision"]
    assert st["collisionCount"] == 0 and st["observedGeneration"] == 1
