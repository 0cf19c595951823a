"""DaemonSet reconcile core: fake caches in, expected actions out, and a small world that plays
the apiserver, the scheduler and the kubelets so rolling updates can run to the end."""
from __future__ import annotations

import copy

import pytest

from components.controllers import (Adopt, CreateObject, CreatePod, DeleteObject, DeletePod,
                                    PatchObject, RecordEvent, Release, UpdateObject,
                                    UpdateStatus)
from components.controllers import history
from components.controllers.daemonset import (BACKOFF_INITIAL, HASH_LABEL, GENERATION_LABEL,
                                              Backoff, node_should_run,
                                              sync_daemonset, target_node, update_backoff)
from components.controllers.history import new_revision
from components.controllers.podutil import format_time
from components.controllers.replicaset import Expectation, Expectations
from components.scheduling.filters import FILTERS

NOW = 1_700_000_000.0
SEL = {"matchLabels": {"app": "agent"}}


def make_ds(*, strategy=None, generation=1, template_spec=None, status=None, min_ready=0,
            history_limit=None, image="img:1"):
    spec = {"selector": SEL, "minReadySeconds": min_ready,
            "template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": template_spec or {"containers": [{"name": "c", "image": image}]}}}
    if strategy is not None:
        spec["updateStrategy"] = strategy
    if history_limit is not None:
        spec["revisionHistoryLimit"] = history_limit
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default", "uid": "ds-uid",
                         "generation": generation},
            "spec": spec, "status": status or {}}


def make_node(name, *, labels=None, taints=None, unschedulable=False):
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {}}
    if taints:
        node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return node


def revision_of(ds, number=1):
    rev = new_revision(ds, history.template_data(ds), number)
    rev["metadata"]["labels"][HASH_LABEL] = rev["metadata"]["labels"]["controller.kubernetes.io/hash"]
    rev["metadata"]["uid"] = f"rev-{number}"
    return rev


def make_pod(name, node, *, hash_="", phase="Running", ready=True, created=NOW - 1000,
             deleting=False, bound=True, owner="ds-uid", ready_at=NOW - 500):
    labels = {"app": "agent"}
    if hash_:
        labels[HASH_LABEL] = hash_
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                        "labels": labels, "creationTimestamp": format_time(created)},
           "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
               "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                       "values": [node]}]}]}}}},
           "status": {"phase": phase, "conditions": [
               {"type": "Ready", "status": "True" if ready else "False",
                "lastTransitionTime": format_time(ready_at)}]}}
    if bound:
        pod["spec"]["nodeName"] = node
    if owner:
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                               "name": "agent", "uid": owner, "controller": True}]
    if deleting:
        pod["metadata"]["deletionTimestamp"] = format_time(NOW)
    return pod


def of(kind, actions):
    return [a for a in actions if isinstance(a, kind)]


def created_nodes(actions):
    return sorted(target_node(a.pod) for a in of(CreatePod, actions))


def sync(ds, nodes, pods, revisions=None, expectation=None, backoff=None, now=NOW):
    if revisions is None:
        revisions = [revision_of(ds)]
    return sync_daemonset(ds, nodes, pods, revisions, expectation, backoff or {}, now)


# --- placement --------------------------------------------------------------------------------


def test_one_pod_per_node_with_labels_affinity_and_tolerations():
    ds = make_ds()
    nodes = [make_node("n1"), make_node("n2")]
    result = sync(ds, nodes, [], expectation=Expectation(batch=1, timestamp=NOW))
    pods = [a.pod for a in of(CreatePod, result.actions)]
    assert created_nodes(result.actions) == ["n1", "n2"]
    rev_hash = revision_of(ds)["metadata"]["labels"][HASH_LABEL]
    pod = pods[0]
    assert pod["metadata"]["generateName"] == "agent-"
    assert pod["metadata"]["labels"] == {"app": "agent", HASH_LABEL: rev_hash,
                                         GENERATION_LABEL: "1"}
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "ds-uid"
    assert "nodeName" not in pod["spec"]          # the default scheduler binds it
    keys = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
    assert keys == {("node.kubernetes.io/not-ready", "NoExecute"),
                    ("node.kubernetes.io/unreachable", "NoExecute"),
                    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
                    ("node.kubernetes.io/unschedulable", "NoSchedule")}
    assert result.expectation.adds == 2


def test_the_scheduler_places_the_pod_only_on_its_node():
    ds = make_ds()
    nodes = [make_node("n1", unschedulable=True), make_node("n2")]
    result = sync(ds, nodes, [], expectation=Expectation(batch=1, timestamp=NOW))
    for create in of(CreatePod, result.actions):
        want = target_node(create.pod)
        fits = [n["metadata"]["name"] for n in nodes
                if not any(f.reasons(create.pod, n, []) for f in FILTERS)]
        assert fits == [want]   # a cordoned node takes its daemon pod too


def test_slow_start_one_batch_per_sync():
    ds = make_ds()
    nodes = [make_node(f"n{i}") for i in range(7)]
    first = sync(ds, nodes, [])
    assert len(of(CreatePod, first.actions)) == 1 and first.expectation.batch == 1
    # nothing more until the batch is observed
    waiting = sync(ds, nodes, [], expectation=first.expectation)
    assert not of(CreatePod, waiting.actions)
    observed = first.expectation.creation_observed()
    second = sync(ds, nodes, [make_pod("p0", "n0")], expectation=observed)
    assert len(of(CreatePod, second.actions)) == 2
    failed = Expectation(batch=2, timestamp=NOW, failure="quota")
    assert len(of(CreatePod, sync(ds, nodes, [], expectation=failed).actions)) == 1


def test_node_selector_and_required_affinity():
    ds = make_ds(template_spec={
        "containers": [{"name": "c", "image": "i"}], "nodeSelector": {"disk": "ssd"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}})
    nodes = [make_node("n1", labels={"disk": "ssd", "zone": "a"}),
             make_node("n2", labels={"disk": "ssd", "zone": "b"}),
             make_node("n3", labels={"zone": "a"})]
    result = sync(ds, nodes, [], expectation=Expectation(batch=4, timestamp=NOW))
    assert created_nodes(result.actions) == ["n1"]
    affinity = of(CreatePod, result.actions)[0].pod["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"] == {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}


@pytest.mark.parametrize("taint,tolerations,run,keep", [
    ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, [], False, True),
    ({"key": "dedicated", "value": "gpu", "effect": "NoExecute"}, [], False, False),
    ({"key": "dedicated", "value": "gpu", "effect": "PreferNoSchedule"}, [], True, True),
    ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
     [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}], True, True),
    ({"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
     [{"operator": "Exists"}], True, True),
    # the automatic tolerations
    ({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}, [], True, True),
    ({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}, [], True, True),
    ({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}, [], True, True),
    ({"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}, [], True, True),
    # a node that is not ready yet takes no new daemon pod; a running one stays
    ({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}, [], False, True),
    ({"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}, [], False, True),
])
def test_taints_and_tolerations(taint, tolerations, run, keep):
    ds = make_ds(template_spec={"containers": [{"name": "c", "image": "i"}],
                                "tolerations": tolerations})
    assert node_should_run(make_node("n", taints=[taint]), ds) == (run, keep)


def test_host_network_pods_tolerate_network_unavailable():
    ds = make_ds(template_spec={"containers": [{"name": "c", "image": "i"}], "hostNetwork": True})
    taint = {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}
    assert node_should_run(make_node("n", taints=[taint]), ds) == (True, True)


def test_template_node_name_pins_one_node():
    ds = make_ds(template_spec={"containers": [{"name": "c", "image": "i"}], "nodeName": "n2"})
    assert node_should_run(make_node("n1"), ds) == (False, False)
    assert node_should_run(make_node("n2"), ds) == (True, True)


def test_pods_on_nodes_that_no_longer_fit_or_exist_are_deleted():
    ds = make_ds()
    rev_hash = revision_of(ds)["metadata"]["labels"][HASH_LABEL]
    nodes = [make_node("n1"), make_node("n2", taints=[{"key": "x", "effect": "NoExecute"}]),
             make_node("n3", taints=[{"key": "x", "effect": "NoSchedule"}])]
    pods = [make_pod("a", "n1", hash_=rev_hash), make_pod("b", "n2", hash_=rev_hash),
            make_pod("c", "n3", hash_=rev_hash), make_pod("d", "gone", hash_=rev_hash),
            make_pod("e", "gone2", hash_=rev_hash, bound=False)]
    result = sync(ds, nodes, pods)
    assert sorted(a.name for a in of(DeletePod, result.actions)) == ["b", "d", "e"]
    assert not of(CreatePod, result.actions)
    status = of(UpdateStatus, result.actions)[0].status
    assert status["desiredNumberScheduled"] == 1
    assert status["currentNumberScheduled"] == 1
    assert status["numberMisscheduled"] == 2     # n2 (evicting) and n3 (kept: NoSchedule)
    assert status["observedGeneration"] == 1


def test_duplicates_on_a_node_keep_the_oldest():
    ds = make_ds()
    h = revision_of(ds)["metadata"]["labels"][HASH_LABEL]
    pods = [make_pod("new", "n1", hash_=h, created=NOW - 10),
            make_pod("old", "n1", hash_=h, created=NOW - 100),
            make_pod("pending", "n1", hash_=h, created=NOW - 1000, bound=False)]
    result = sync(ds, [make_node("n1")], pods)
    assert sorted(a.name for a in of(DeletePod, result.actions)) == ["new", "pending"]
    assert result.expectation.deletes == {"uid-new", "uid-pending"}


def test_a_pod_being_deleted_is_not_replaced_until_gone():
    ds = make_ds()
    h = revision_of(ds)["metadata"]["labels"][HASH_LABEL]
    result = sync(ds, [make_node("n1")], [make_pod("a", "n1", hash_=h, deleting=True)])
    assert not of(CreatePod, result.actions) and not of(DeletePod, result.actions)
    # a Failed pod being deleted is done with: the node gets its pod
    failed = make_pod("a", "n1", hash_=h, deleting=True, phase="Failed")
    result = sync(ds, [make_node("n1")], [failed])
    assert created_nodes(result.actions) == ["n1"]


def test_failed_pods_are_deleted_with_backoff():
    ds = make_ds()
    h = revision_of(ds)["metadata"]["labels"][HASH_LABEL]
    pods = [make_pod("a", "n1", hash_=h, phase="Failed")]
    first = sync(ds, [make_node("n1")], pods)
    assert [a.name for a in of(DeletePod, first.actions)] == ["a"]
    events = of(RecordEvent, first.actions)
    assert events[0].reason == "FailedDaemonPod" and events[0].type == "Warning"
    assert events[0].message == "Found failed daemon pod default/a on node n1, will try to kill it"
    assert not of(CreatePod, first.actions)   # the new pod comes once the failed one is gone
    records: dict = {}
    update_backoff(records, first.backoff, NOW)
    (key, entry), = records.items()
    assert entry == Backoff(BACKOFF_INITIAL, NOW)
    # it failed again at once: within the backoff, no delete, look again when it ends
    again = sync(ds, [make_node("n1")], [make_pod("b", "n1", hash_=h, phase="Failed")],
                 backoff=records, now=NOW + 0.5)
    assert not of(DeletePod, again.actions)
    assert again.requeue_after == pytest.approx(0.5)
    later = sync(ds, [make_node("n1")], [make_pod("b", "n1", hash_=h, phase="Failed")],
                 backoff=records, now=NOW + 1.5)
    assert [a.name for a in of(DeletePod, later.actions)] == ["b"]
    assert later.backoff[key].delay == 2 * BACKOFF_INITIAL


def test_orphans_are_adopted_and_strays_released():
    ds = make_ds()
    h = revision_of(ds)["metadata"]["labels"][HASH_LABEL]
    orphan = make_pod("o", "n1", hash_=h, owner=None)
    stray = make_pod("s", "n2", hash_=h)
    stray["metadata"]["labels"] = {"app": "other"}
    result = sync(ds, [make_node("n1"), make_node("n2")], [orphan, stray])
    assert [a.name for a in of(Adopt, result.actions)] == ["o"]
    assert [a.name for a in of(Release, result.actions)] == ["s"]
    assert created_nodes(result.actions) == ["n2"]


def test_a_stray_is_released_even_while_it_is_being_deleted():
    ds = make_ds()
    h = revision_of(ds)["metadata"]["labels"][HASH_LABEL]
    stray = make_pod("s", "n1", hash_=h, deleting=True)
    stray["metadata"]["labels"]["app"] = "other"
    result = sync(ds, [make_node("n1")], [stray])
    assert [a.name for a in of(Release, result.actions)] == ["s"]


def test_writes_in_flight_only_refresh_status():
    ds = make_ds(generation=2, status={"observedGeneration": 1})
    pending = Expectation(adds=1, timestamp=NOW, batch=1)
    result = sync(ds, [make_node("n1")], [], expectation=pending)
    assert not of(CreatePod, result.actions)
    status = of(UpdateStatus, result.actions)[0].status
    assert status["observedGeneration"] == 1 and status["desiredNumberScheduled"] == 1
    assert result.expectation == pending


def test_selecting_all_is_refused():
    ds = make_ds()
    ds["spec"]["selector"] = {}
    result = sync(ds, [make_node("n1")], [])
    assert [a.reason for a in result.actions] == ["SelectingAll"]


# --- history ----------------------------------------------------------------------------------


def test_first_sync_creates_the_revision_and_labels_pods_with_its_hash():
    ds = make_ds()
    result = sync(ds, [make_node("n1")], [], revisions=[])
    create = of(CreateObject, result.actions)[0].object
    assert create["kind"] == "ControllerRevision" and create["revision"] == 1
    assert create["data"] == history.template_data(ds)
    assert create["data"]["spec"]["template"]["$patch"] == "replace"
    assert create["metadata"]["name"] == f"agent-{create['metadata']['labels'][HASH_LABEL]}"
    assert create["metadata"]["ownerReferences"][0]["uid"] == "ds-uid"
    pod = of(CreatePod, result.actions)[0].pod
    assert pod["metadata"]["labels"][HASH_LABEL] == create["metadata"]["labels"][HASH_LABEL]
    # the revision is written before any pod that names it
    assert result.actions.index(of(CreateObject, result.actions)[0]) < \
        result.actions.index(of(CreatePod, result.actions)[0])


def test_going_back_to_an_old_template_renumbers_its_revision():
    v1, v2 = make_ds(image="img:1"), make_ds(image="img:2")
    r1, r2 = revision_of(v1, 1), revision_of(v2, 2)
    result = sync(v1, [make_node("n1")], [], revisions=[r1, r2])
    update = of(UpdateObject, result.actions)[0].object
    assert update["metadata"]["name"] == r1["metadata"]["name"] and update["revision"] == 3
    assert not of(CreateObject, result.actions)


def test_duplicate_current_revisions_are_merged_into_the_newest():
    ds = make_ds()
    keep, dup = revision_of(ds, 2), revision_of(ds, 1)
    dup["metadata"].update(name="agent-dup", uid="rev-dup")
    dup["metadata"]["labels"][HASH_LABEL] = "dup"
    kept = keep["metadata"]["labels"][HASH_LABEL]
    pods = [make_pod("a", "n1", hash_="dup"), make_pod("b", "n2", hash_=kept),
            make_pod("c", "n3", hash_="older")]
    result = sync(ds, [make_node("n1"), make_node("n2"), make_node("n3")], pods,
                  revisions=[keep, dup])
    patches = of(PatchObject, result.actions)
    assert [(p.name, p.changes) for p in patches] == [
        ("a", {"metadata": {"labels": {HASH_LABEL: kept}}})]
    assert [a.name for a in of(DeleteObject, result.actions)] == ["agent-dup"]


def test_a_name_collision_bumps_collision_count():
    ds = make_ds()
    squatter = revision_of(make_ds(image="other"))
    squatter["metadata"]["name"] = revision_of(ds)["metadata"]["name"]
    squatter["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    result = sync(ds, [make_node("n1")], [], revisions=[squatter])
    assert [type(a) for a in result.actions] == [UpdateStatus]
    assert result.actions[0].status["collisionCount"] == 1


def test_old_revisions_beyond_the_limit_are_deleted_unless_in_use():
    ds = make_ds(image="img:9", history_limit=1)
    olds = [revision_of(make_ds(image=f"img:{i}"), i) for i in range(1, 4)]
    in_use = olds[0]["metadata"]["labels"][HASH_LABEL]
    cur = revision_of(ds, 4)
    h = cur["metadata"]["labels"][HASH_LABEL]
    pods = [make_pod("a", "n1", hash_=in_use), make_pod("b", "n2", hash_=h)]
    result = sync(ds, [make_node("n1"), make_node("n2")], pods, revisions=olds + [cur],
                  expectation=None)
    deleted = [a.name for a in of(DeleteObject, result.actions)]
    # two too many: the oldest is still in use, so the next two go
    assert deleted == [olds[1]["metadata"]["name"], olds[2]["metadata"]["name"]]


# --- rolling updates: a small world -----------------------------------------------------------


class World:
    """Plays the apiserver (names, uids, revisions), the scheduler (binds to the target node)
    and the kubelets (a pod is Running and Ready after `ready_after` steps; a delete is
    immediate) around the core, one step at a time."""

    def __init__(self, ds, nodes, ready_after=1):
        self.ds, self.nodes = ds, nodes
        self.pods: dict[str, dict] = {}
        self.revisions: dict[str, dict] = {}
        self.expectations = Expectations()
        self.backoff: dict = {}
        self.now = NOW
        self.n = 0
        self.ready_after = ready_after
        self.max_per_node = 0

    def step(self):
        self.now += 1
        for pod in self.pods.values():
            pod["_age"] = pod.get("_age", 0) + 1
            if pod["_age"] >= self.ready_after and pod["status"]["phase"] == "Pending":
                pod["status"] = {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": format_time(self.now)}]}
        key = "default/agent"
        result = sync_daemonset(self.ds, self.nodes, list(self.pods.values()),
                                list(self.revisions.values()), self.expectations.get(key),
                                self.backoff, self.now)
        self.expectations.set(key, result.expectation)
        update_backoff(self.backoff, result.backoff, self.now)
        for action in result.actions:
            if isinstance(action, CreateObject):
                obj = copy.deepcopy(action.object)
                obj["metadata"]["uid"] = f"rev-{obj['metadata']['name']}"
                self.revisions.setdefault(obj["metadata"]["name"], obj)
            elif isinstance(action, UpdateObject):
                self.revisions[action.object["metadata"]["name"]] = copy.deepcopy(action.object)
            elif isinstance(action, DeleteObject):
                self.revisions.pop(action.name, None)
            elif isinstance(action, CreatePod):
                self.n += 1
                pod = copy.deepcopy(action.pod)
                name = f"agent-{self.n}"
                pod["metadata"].update(name=name, uid=f"uid-{name}",
                                       creationTimestamp=format_time(self.now + self.n / 1000))
                pod["spec"]["nodeName"] = target_node(pod)
                pod["status"] = {"phase": "Pending"}
                self.pods[name] = pod
                self.expectations.creation_observed(key)
            elif isinstance(action, DeletePod):
                if self.pods.pop(action.name, None) is not None:
                    self.expectations.deletion_observed(key, action.uid)
            elif isinstance(action, UpdateStatus):
                self.ds["status"] = action.status
        per_node: dict = {}
        for pod in self.pods.values():
            per_node[pod["spec"]["nodeName"]] = per_node.get(pod["spec"]["nodeName"], 0) + 1
        self.max_per_node = max([self.max_per_node, *per_node.values()])
        return result

    def run(self, steps=60):
        for _ in range(steps):
            self.step()

    def hashes(self):
        return sorted(p["metadata"]["labels"][HASH_LABEL] for p in self.pods.values())

    def unavailable(self):
        ready_nodes = {p["spec"]["nodeName"] for p in self.pods.values()
                       if p["status"].get("phase") == "Running"}
        return len(self.nodes) - len(ready_nodes)

    def update_template(self, image):
        self.ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
        self.ds["metadata"]["generation"] += 1


def current_hash(ds):
    return revision_of(ds)["metadata"]["labels"][HASH_LABEL]


def test_world_brings_up_one_pod_per_node_and_reports_status():
    world = World(make_ds(), [make_node(f"n{i}") for i in range(4)])
    world.run(10)
    assert sorted(p["spec"]["nodeName"] for p in world.pods.values()) == ["n0", "n1", "n2", "n3"]
    assert world.max_per_node == 1
    status = world.ds["status"]
    assert status == {"desiredNumberScheduled": 4, "currentNumberScheduled": 4,
                      "numberMisscheduled": 0, "numberReady": 4, "updatedNumberScheduled": 4,
                      "numberAvailable": 4, "numberUnavailable": 0, "observedGeneration": 1}
    # a new node gets its pod; a removed one loses it
    world.nodes = world.nodes[1:] + [make_node("n9")]
    world.run(5)
    assert sorted(p["spec"]["nodeName"] for p in world.pods.values()) == ["n1", "n2", "n3", "n9"]


@pytest.mark.parametrize("max_unavailable,expected", [(1, 1), (2, 2), ("50%", 3), ("10%", 1)])
def test_rolling_update_respects_max_unavailable(max_unavailable, expected):
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}}
    world = World(make_ds(strategy=strategy), [make_node(f"n{i}") for i in range(6)],
                  ready_after=2)
    world.run(12)
    world.update_template("img:2")
    worst = 0
    for _ in range(80):
        world.step()
        worst = max(worst, world.unavailable())
    assert world.hashes() == [current_hash(world.ds)] * 6
    assert worst == expected
    assert world.max_per_node == 1
    assert world.ds["status"]["updatedNumberScheduled"] == 6
    assert world.ds["status"]["observedGeneration"] == 2
    assert len(world.revisions) == 2


def test_rolling_update_with_max_surge_starts_the_new_pod_first():
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    world = World(make_ds(strategy=strategy), [make_node(f"n{i}") for i in range(3)],
                  ready_after=2)
    world.run(10)
    world.update_template("img:2")
    surged = 0
    for _ in range(60):
        world.step()
        assert world.unavailable() == 0     # an old pod goes only once its successor is ready
        per_node = {}
        for p in world.pods.values():
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
        surged = max(surged, sum(1 for c in per_node.values() if c == 2))
    assert surged == 1                      # never more than maxSurge nodes doubled up
    assert world.hashes() == [current_hash(world.ds)] * 3


def test_on_delete_replaces_only_deleted_pods():
    world = World(make_ds(strategy={"type": "OnDelete"}), [make_node("n0"), make_node("n1")])
    world.run(6)
    old = current_hash(world.ds)
    world.update_template("img:2")
    world.run(10)
    assert world.hashes() == [old, old]
    victim = next(iter(world.pods))
    del world.pods[victim]
    world.run(5)
    assert world.hashes() == sorted([old, current_hash(world.ds)])
    assert world.ds["status"]["updatedNumberScheduled"] == 1


def test_rollback_reuses_the_old_revision():
    world = World(make_ds(), [make_node("n0")])
    world.run(5)
    first = current_hash(world.ds)
    world.update_template("img:2")
    world.run(10)
    world.update_template("img:1")
    world.run(10)
    assert world.hashes() == [first]
    revisions = sorted((r["revision"], r["metadata"]["labels"][HASH_LABEL])
                       for r in world.revisions.values())
    assert revisions[-1] == (3, first) and len(revisions) == 2
