"""Deployment reconcile core: table-driven expected actions, plus a simulated cluster loop
(deployment controller + ReplicaSet controller + instantly-ready pods) checking the rolling
update invariants at every single pod change."""
from __future__ import annotations

import copy

import pytest

from components.controllers import (Adopt, CreatePod, CreateReplicaSet, DeletePod,
                                    DeleteReplicaSet, RecordEvent, UpdateDeployment,
                                    UpdateReplicaSet, UpdateStatus, merge_patch)
from components.controllers.deployment import (REVISION, RollbackError, get_condition,
                                               resolve_fenceposts, rollout_status,
                                               sync_deployment, undo, validate_strategy)
from components.controllers.podutil import (POD_TEMPLATE_HASH, compute_hash,
                                            format_time, is_pod_active, is_pod_available)
from components.controllers.replicaset import Expectations, sync_replicaset

NOW = 1_700_000_000.0


def template(image="img:v1"):
    return {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": image}]}}


def make_deployment(replicas=3, *, image="img:v1", strategy=None, generation=1, **spec):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "d-uid",
                         "generation": generation, "annotations": {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": template(image), **({"strategy": strategy} if strategy else {}),
                     **spec},
            "status": {}}


def of(kind, actions):
    return [a for a in actions if isinstance(a, kind)]


class World:
    """A fake apiserver + the two controllers; pods are ready the moment they are created."""

    def __init__(self, deployment, check=lambda world: None):
        self.d = deployment
        self.rss: dict[str, dict] = {}
        self.pods: dict[str, dict] = {}
        self.now = NOW
        self.n = 0
        self.exps = Expectations()
        self.check = check
        self.log: list = []

    def uid(self, prefix):
        self.n += 1
        return f"{prefix}-{self.n}"

    # -- the deployment controller --
    def sync_deployment(self):
        # the pods as the shell hands them: a one-shot iterator (read only by Recreate)
        result = sync_deployment(self.d, list(self.rss.values()), iter(list(self.pods.values())),
                                 self.now)
        self.log.append(result.actions)
        for a in result.actions:
            if isinstance(a, CreateReplicaSet):
                rs = copy.deepcopy(a.replicaset)
                rs["metadata"].update(uid=self.uid("rs"), generation=1,
                                      creationTimestamp=format_time(self.now + self.n))
                rs["status"] = {}
                self.rss[rs["metadata"]["name"]] = rs
            elif isinstance(a, UpdateReplicaSet):
                rs = merge_patch(self.rss[a.name], a.changes)
                if "spec" in a.changes:
                    rs["metadata"]["generation"] += 1
                self.rss[a.name] = rs
            elif isinstance(a, DeleteReplicaSet):
                del self.rss[a.name]
            elif isinstance(a, UpdateDeployment):
                self.d = merge_patch(self.d, a.changes)
            elif isinstance(a, UpdateStatus):
                self.d["status"] = copy.deepcopy(a.status)
            elif isinstance(a, Adopt):
                self.rss[a.name]["metadata"]["ownerReferences"] = [a.owner_reference]
        return result

    # -- the ReplicaSet controller, run until quiet --
    def run_replicasets(self, max_rounds=100):
        for _ in range(max_rounds):
            busy = False
            for name in list(self.rss):
                rs = self.rss[name]
                key = f"default/{name}"
                result = sync_replicaset(rs, list(self.pods.values()), self.exps.get(key),
                                         self.now)
                self.exps.set(key, result.expectation)
                for a in result.actions:
                    if isinstance(a, CreatePod):
                        busy = True
                        pod = copy.deepcopy(a.pod)
                        pod["metadata"]["name"] = pod["metadata"]["generateName"] + str(self.n)
                        pod["metadata"].update(uid=self.uid("pod"),
                                               creationTimestamp=format_time(self.now))
                        pod["spec"]["nodeName"] = "node-0"
                        pod["status"] = {"phase": "Running", "conditions": [
                            {"type": "Ready", "status": "True",
                             "lastTransitionTime": format_time(self.now)}]}
                        self.pods[pod["metadata"]["name"]] = pod
                        self.exps.creation_observed(key)
                        self.check(self)
                    elif isinstance(a, DeletePod):
                        busy = True
                        del self.pods[a.name]
                        self.exps.deletion_observed(key, a.uid)
                        self.check(self)
                    elif isinstance(a, UpdateStatus):
                        busy = True
                        self.rss[name]["status"] = a.status
            if not busy:
                return
        raise AssertionError("ReplicaSets never settled")

    def settle(self, max_steps=60):
        """Alternate the controllers until the Deployment has nothing left to do."""
        for _ in range(max_steps):
            result = self.sync_deployment()
            self.run_replicasets()
            self.now += 1
            if not result.actions and rollout_status(self.d).done:
                return
        raise AssertionError(f"no convergence: {rollout_status(self.d).message}")

    def active_pods(self):
        return [p for p in self.pods.values() if is_pod_active(p)]

    def available(self):
        return sum(1 for p in self.active_pods() if is_pod_available(p, 0, self.now))

    def rs_by_revision(self):
        return {int(rs["metadata"]["annotations"][REVISION]): rs for rs in self.rss.values()}


# --- first rollout ----------------------------------------------------------------------------


def test_first_rollout_creates_replicaset_with_hash_and_revision_1():
    d = make_deployment(3)
    result = sync_deployment(d, [], [], NOW)
    (create,) = of(CreateReplicaSet, result.actions)
    rs = create.replicaset
    pth = compute_hash(template())
    assert rs["metadata"]["name"] == f"web-{pth}"
    assert rs["metadata"]["labels"] == {"app": "web", POD_TEMPLATE_HASH: pth}
    assert rs["metadata"]["annotations"][REVISION] == "1"
    assert rs["metadata"]["ownerReferences"] == [{
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-uid",
        "controller": True, "blockOwnerDeletion": True}]
    assert rs["spec"]["replicas"] == 3
    assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", POD_TEMPLATE_HASH: pth}}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "web", POD_TEMPLATE_HASH: pth}
    assert rs["spec"]["template"]["spec"] == template()["spec"]
    assert of(UpdateDeployment, result.actions) == [
        UpdateDeployment("default", "web", {"metadata": {"annotations": {REVISION: "1"}}})]
    assert [e.reason for e in of(RecordEvent, result.actions)] == ["ScalingReplicaSet"]
    (status,) = of(UpdateStatus, result.actions)
    progressing = get_condition(status.status, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "NewReplicaSetCreated")
    assert progressing["message"] == f"Created new replica set \"web-{pth}\""


def test_pod_template_hash_is_stable_and_safe():
    a, b = compute_hash(template()), compute_hash(copy.deepcopy(template()))
    assert a == b and a != compute_hash(template("img:v2"))
    assert a != compute_hash(template(), 1)
    assert set(a) <= set("bcdfghjklmnpqrstvwxz2456789") and 1 <= len(a) <= 10
    labelled = template()
    labelled["metadata"]["labels"][POD_TEMPLATE_HASH] = a
    assert compute_hash(labelled) == a


def test_first_rollout_converges():
    world = World(make_deployment(3))
    world.settle()
    (rs,) = world.rss.values()
    assert rs["spec"]["replicas"] == 3 and len(world.active_pods()) == 3
    assert all(p["metadata"]["labels"][POD_TEMPLATE_HASH] == compute_hash(template())
               for p in world.pods.values())
    status = world.d["status"]
    assert {k: status[k] for k in ("replicas", "updatedReplicas", "readyReplicas",
                                   "availableReplicas", "unavailableReplicas",
                                   "observedGeneration")} == {
        "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
        "unavailableReplicas": 0, "observedGeneration": 1}
    assert get_condition(status, "Progressing")["reason"] == "NewReplicaSetAvailable"
    assert get_condition(status, "Available")["reason"] == "MinimumReplicasAvailable"
    assert world.d["metadata"]["annotations"][REVISION] == "1"
    assert rollout_status(world.d).message == 'deployment "web" successfully rolled out'


# --- rolling update ---------------------------------------------------------------------------


@pytest.mark.parametrize("replicas, strategy, max_pods, min_available", [
    (3, None, 4, 3),                                   # 25%: surge ceil(.75)=1, unavail floor=0
    (3, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}, 3, 2),
    (4, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": "50%"}},
     6, 2),
    (10, None, 13, 8),                                 # surge ceil(2.5)=3, unavail floor(2.5)=2
    (1, None, 2, 1),
])
def test_rolling_update_respects_surge_and_unavailable(replicas, strategy, max_pods,
                                                       min_available):
    world = World(make_deployment(replicas, strategy=strategy))
    world.settle()
    seen = {"max": 0, "min": replicas, "steps": 0}

    def check(w):
        pods, available = len(w.active_pods()), w.available()
        seen["max"], seen["min"] = max(seen["max"], pods), min(seen["min"], available)
        seen["steps"] += 1
        assert pods <= max_pods, f"{pods} pods > {max_pods}"
        assert available >= min_available, f"{available} available < {min_available}"

    world.check = check
    world.d = merge_patch(world.d, {"metadata": {"generation": 2},
                                    "spec": {"template": template("img:v2")}})
    assert rollout_status(world.d).message == "Waiting for deployment spec update to be observed..."
    world.settle()
    assert seen["steps"] >= 2 * replicas  # every pod replaced, each change checked
    assert seen["max"] == max_pods and seen["min"] == min_available
    revs = world.rs_by_revision()
    assert sorted(revs) == [1, 2]
    assert revs[2]["spec"]["replicas"] == replicas and revs[1]["spec"]["replicas"] == 0
    assert revs[2]["spec"]["template"]["spec"]["containers"][0]["image"] == "img:v2"
    assert all(p["spec"]["containers"][0]["image"] == "img:v2" for p in world.pods.values())
    assert world.d["metadata"]["annotations"][REVISION] == "2"
    assert world.d["status"]["updatedReplicas"] == replicas
    assert rollout_status(world.d).done


def test_template_change_first_sync_creates_revision_2_with_one_surge_pod():
    world = World(make_deployment(3))
    world.settle()
    world.d = merge_patch(world.d, {"metadata": {"generation": 2},
                                    "spec": {"template": template("img:v2")}})
    result = world.sync_deployment()
    (create,) = of(CreateReplicaSet, result.actions)
    assert create.replicaset["metadata"]["annotations"][REVISION] == "2"
    assert create.replicaset["spec"]["replicas"] == 1
    assert of(UpdateReplicaSet, result.actions) == []  # no scale-down before the new pod is up
    # Progressing keeps its reason until counters move, then ReplicaSetUpdated.
    world.run_replicasets()
    world.now += 1
    result = world.sync_deployment()
    (scale,) = [a for a in of(UpdateReplicaSet, result.actions) if "spec" in a.changes]
    assert scale.changes["spec"] == {"replicas": 2} and scale.name != create.replicaset["metadata"]["name"]
    assert get_condition(world.d["status"], "Progressing")["reason"] == "ReplicaSetUpdated"
    msg = rollout_status(world.d).message
    assert msg == 'Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...'


def test_unhealthy_old_replicas_are_cleaned_up_first():
    d = make_deployment(3, image="img:v2")
    d["metadata"]["annotations"][REVISION] = "2"
    owner = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-uid",
              "controller": True}]

    def rs(name, tmpl, rev, replicas, available, created):
        pth = compute_hash(tmpl)
        t = copy.deepcopy(tmpl)
        t["metadata"]["labels"][POD_TEMPLATE_HASH] = pth
        return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                             "labels": {"app": "web", POD_TEMPLATE_HASH: pth},
                             "annotations": {REVISION: str(rev)}, "ownerReferences": owner,
                             "creationTimestamp": format_time(created)},
                "spec": {"replicas": replicas, "template": t,
                         "selector": {"matchLabels": {"app": "web", POD_TEMPLATE_HASH: pth}}},
                "status": {"replicas": replicas, "readyReplicas": available,
                           "availableReplicas": available}}

    # the old RS has 3 pods of which only 1 is available; the new one 1 available of 1
    old = rs("web-old", template("img:v1"), 1, 3, 1, NOW - 100)
    new = rs("web-new", template("img:v2"), 2, 1, 1, NOW - 10)
    result = sync_deployment(d, [old, new], [], NOW)
    scales = {a.name: a.changes["spec"]["replicas"] for a in of(UpdateReplicaSet, result.actions)
              if "spec" in a.changes}
    # all 4, minAvailable 3, new unavailable 0 -> maxScaledDown 1: one unhealthy old pod goes
    assert scales == {"web-old": 2}


# --- recreate ---------------------------------------------------------------------------------


def test_recreate_scales_old_to_zero_waits_for_pods_then_scales_new():
    world = World(make_deployment(3, strategy={"type": "Recreate"}))
    world.settle()
    world.d = merge_patch(world.d, {"metadata": {"generation": 2},
                                    "spec": {"template": template("img:v2")}})
    first = world.sync_deployment()
    assert of(CreateReplicaSet, first.actions) == []
    (scale,) = [a for a in of(UpdateReplicaSet, first.actions) if "spec" in a.changes]
    assert scale.changes["spec"]["replicas"] == 0
    # The old pods are still there (the RS controller hasn't run): no new RS yet.
    waiting = world.sync_deployment()
    assert of(CreateReplicaSet, waiting.actions) == []
    # Pods terminating (deletionTimestamp set, phase still Running) still block.
    old_rs = next(iter(world.rss.values()))
    old_rs["status"]["replicas"] = 0
    for pod in world.pods.values():
        pod["metadata"]["deletionTimestamp"] = format_time(world.now)
    assert of(CreateReplicaSet, world.sync_deployment().actions) == []
    for pod in world.pods.values():
        del pod["metadata"]["deletionTimestamp"]
    old_rs["status"]["replicas"] = 3

    def check(w):  # never old and new pods at once
        images = {p["spec"]["containers"][0]["image"] for p in w.active_pods()}
        assert len(images) <= 1

    world.check = check
    world.run_replicasets()
    assert world.pods == {}
    create = world.sync_deployment()
    (new_rs,) = of(CreateReplicaSet, create.actions)
    assert new_rs.replicaset["spec"]["replicas"] == 3
    assert new_rs.replicaset["metadata"]["annotations"][REVISION] == "2"
    world.run_replicasets()
    world.settle()
    assert {p["spec"]["containers"][0]["image"] for p in world.pods.values()} == {"img:v2"}
    assert len(world.pods) == 3


# --- history ----------------------------------------------------------------------------------


def test_revision_history_limit_deletes_oldest_empty_replicasets():
    world = World(make_deployment(2, revisionHistoryLimit=2))
    world.settle()
    for version in range(2, 7):
        world.d = merge_patch(world.d, {"metadata": {"generation": version},
                                        "spec": {"template": template(f"img:v{version}")}})
        world.settle()
    revs = world.rs_by_revision()
    assert sorted(revs) == [4, 5, 6]  # the current one + 2 old ones
    assert all(revs[r]["spec"]["replicas"] == 0 for r in (4, 5))
    deleted = [a.name for actions in world.log for a in of(DeleteReplicaSet, actions)]
    assert len(deleted) == 3


def test_history_cleanup_keeps_replicasets_with_replicas():
    world = World(make_deployment(2, revisionHistoryLimit=0))
    world.settle()
    world.d = merge_patch(world.d, {"metadata": {"generation": 2},
                                    "spec": {"template": template("img:v2")}})
    world.sync_deployment()  # creates revision 2; revision 1 still has pods: not deleted
    assert len(world.rss) == 2
    world.run_replicasets()
    world.settle()
    assert sorted(world.rs_by_revision()) == [2]


def test_default_history_limit_is_10():
    world = World(make_deployment(1))
    world.settle()
    for version in range(2, 14):
        world.d = merge_patch(world.d, {"metadata": {"generation": version},
                                        "spec": {"template": template(f"img:v{version}")}})
        world.settle()
    assert sorted(world.rs_by_revision()) == list(range(3, 14))


# --- rollback ---------------------------------------------------------------------------------


def test_undo_returns_previous_template_and_rollback_reuses_the_old_replicaset():
    world = World(make_deployment(3))
    world.settle()
    with pytest.raises(RollbackError, match="no rollout history"):
        undo(world.d, list(world.rss.values()))
    world.d = merge_patch(world.d, {"metadata": {"generation": 2},
                                    "spec": {"template": template("img:v2")}})
    world.settle()
    world.d = merge_patch(world.d, {"metadata": {"generation": 3},
                                    "spec": {"template": template("img:v3")}})
    world.settle()
    rss = list(world.rss.values())
    assert undo(world.d, rss) == template("img:v2")
    assert undo(world.d, rss, to_revision=1) == template("img:v1")
    with pytest.raises(RollbackError, match="unable to find specified revision 9"):
        undo(world.d, rss, to_revision=9)
    # Applying the undo makes the revision-2 RS the new one again, as revision 4.
    rev2_name = world.rs_by_revision()[2]["metadata"]["name"]
    world.d = merge_patch(world.d, {"metadata": {"generation": 4},
                                    "spec": {"template": undo(world.d, rss)}})
    world.settle()
    assert world.rs_by_revision()[4]["metadata"]["name"] == rev2_name
    assert world.d["metadata"]["annotations"][REVISION] == "4"
    assert sorted(world.rs_by_revision()) == [1, 3, 4]
    paused = merge_patch(world.d, {"spec": {"paused": True}})
    with pytest.raises(RollbackError, match="paused"):
        undo(paused, rss)


# --- status and conditions --------------------------------------------------------------------


def test_progress_deadline_exceeded():
    world = World(make_deployment(3, progressDeadlineSeconds=60))
    world.settle()
    world.d = merge_patch(world.d, {"metadata": {"generation": 2},
                                    "spec": {"template": template("img:v2")}})
    world.sync_deployment()  # creates the new RS; its pods never come (no RS controller)
    assert get_condition(world.d["status"], "Progressing")["reason"] == "NewReplicaSetCreated"
    world.now += 30
    result = world.sync_deployment()
    assert of(UpdateStatus, result.actions) == []
    assert 0 < result.requeue_after <= 32
    world.now += 31
    world.sync_deployment()
    cond = get_condition(world.d["status"], "Progressing")
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")
    status = rollout_status(world.d)
    assert status.failed and status.message == 'error: deployment "web" exceeded its progress deadline'


def test_available_condition_minimum_unavailable():
    d = make_deployment(4)  # maxUnavailable floor(25% of 4) = 1: 3 must be available
    world = World(d)
    world.settle()
    for pod in list(world.pods.values())[:2]:
        pod["status"]["conditions"][0]["status"] = "False"
    world.run_replicasets()
    world.sync_deployment()
    cond = get_condition(world.d["status"], "Available")
    assert (cond["status"], cond["reason"]) == ("False", "MinimumReplicasUnavailable")
    assert world.d["status"]["availableReplicas"] == 2
    assert world.d["status"]["unavailableReplicas"] == 2
    assert rollout_status(world.d).message == \
        'Waiting for deployment "web" rollout to finish: 2 of 4 updated replicas are available...'


@pytest.mark.parametrize("status, generation, message, done", [
    ({"observedGeneration": 1}, 2, "Waiting for deployment spec update to be observed...", False),
    ({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 1, "availableReplicas": 3}, 2,
     'Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...',
     False),
    ({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}, 2,
     'Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...',
     False),
    ({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 1}, 2,
     'Waiting for deployment "web" rollout to finish: 1 of 3 updated replicas are available...',
     False),
    ({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}, 2,
     'deployment "web" successfully rolled out', True),
])
def test_rollout_status_messages(status, generation, message, done):
    d = make_deployment(3, generation=generation)
    d["status"] = status
    result = rollout_status(d)
    assert (result.message, result.done) == (message, done)


@pytest.mark.parametrize("replicas, surge, unavailable, expected", [
    (3, None, None, (1, 0)),
    (10, None, None, (3, 2)),
    (4, "50%", "50%", (2, 2)),
    (3, 2, 0, (2, 0)),
    (0, None, None, (0, 1)),  # both resolve to 0: unavailable becomes 1
])
def test_resolve_fenceposts(replicas, surge, unavailable, expected):
    ru = {k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavailable)) if v is not None}
    d = make_deployment(replicas, strategy={"type": "RollingUpdate", "rollingUpdate": ru})
    assert resolve_fenceposts(d) == expected


def test_both_zero_is_invalid_and_not_rolled_out():
    d = make_deployment(3, strategy={"type": "RollingUpdate",
                                     "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})
    assert validate_strategy(d)
    result = sync_deployment(d, [], [], NOW)
    assert of(CreateReplicaSet, result.actions) == []
    assert [e.reason for e in of(RecordEvent, result.actions)] == ["InvalidDeployment"]


def test_adopts_orphan_replicaset_and_ignores_foreign_ones():
    world = World(make_deployment(2))
    world.settle()
    (rs,) = world.rss.values()
    del rs["metadata"]["ownerReferences"]
    foreign = copy.deepcopy(rs)
    foreign["metadata"].update(name="other", uid="other-uid", ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x", "uid": "x", "controller": True}])
    result = sync_deployment(world.d, [rs, foreign], [], world.now)
    (adopt,) = of(Adopt, result.actions)
    assert (adopt.kind, adopt.name) == ("ReplicaSet", rs["metadata"]["name"])
    assert of(CreateReplicaSet, result.actions) == []


def test_hash_collision_bumps_collision_count():
    d = make_deployment(2)
    pth = compute_hash(template())
    squatter = {"metadata": {"name": f"web-{pth}", "namespace": "default", "uid": "sq",
                             "labels": {"app": "other"}},
                "spec": {"replicas": 1, "template": template("something-else")}}
    result = sync_deployment(d, [squatter], [], NOW)
    assert of(CreateReplicaSet, result.actions) == []
    (status,) = of(UpdateStatus, result.actions)
    assert status.status["collisionCount"] == 1
    d["status"] = status.status
    (create,) = of(CreateReplicaSet, sync_deployment(d, [squatter], [], NOW).actions)
    assert create.replicaset["metadata"]["name"] == f"web-{compute_hash(template(), 1)}"


def test_a_sync_never_changes_the_cached_objects_it_is_given():
    # the sync works on copies of the ReplicaSets (only where it writes, the rest is shared)
    # and of the Deployment's status (its conditions are set in place)
    class Checked(World):
        def sync_deployment(self):
            given = copy.deepcopy(self.rss)
            rss = list(self.rss.values())
            status = self.d.setdefault("status", {})
            given_status = copy.deepcopy(status)
            result = super().sync_deployment()
            assert [copy.deepcopy(rs) for rs in rss] == [given[meta["metadata"]["name"]]
                                                        for meta in rss]
            assert status == given_status
            return result

    world = Checked(make_deployment(3))
    world.settle()
    world.d = merge_patch(world.d, {"metadata": {"generation": 2},
                                    "spec": {"template": template("img:v2"), "minReadySeconds": 0,
                                             "replicas": 5}})
    world.settle()        # scales (spec.replicas, annotations) and rolls (revision annotation)
    world.d = merge_patch(world.d, {"metadata": {"generation": 3},
                                    "spec": {"template": template("img:v1")}})
    world.settle()        # the rollback reuses revision 1's ReplicaSet: its revision bumped
    assert sorted(world.rs_by_revision()) == [2, 3]
