"""The verdict: each check bites on what it guards, and the report's exit status follows them."""
from __future__ import annotations

from kubemu.chaos import verdict
from kubemu.chaos.history import PUT, Change, History
from kubemu.chaos.verdict import ComponentWrite, Convergence
from kubemu.chaos.watchcheck import WatchSession


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 1
        return self.t


def recorded(drop_ack: bool = False):
    """Two writes and a read of one key; with drop_ack the second write was acknowledged at a
    revision the store never made it at (a lost write)."""
    h = History(Clock())
    h.invoke("p", "write", "k", "a")
    h.ok("p", revision=2)
    h.invoke("p", "write", "k", "b")
    h.ok("p", revision=2 if drop_ack else 3)
    h.invoke("p", "read", "k")
    h.ok("p", "a" if drop_ack else "b", revision=2 if drop_ack else 3)
    store = [Change(2, "k", PUT, "a")] + ([] if drop_ack else [Change(3, "k", PUT, "b")])
    return h.operations(), store


def assemble(ops, store, **kw):
    args = dict(ops=ops, final={"k": store[-1].value}, store=store, since=2,
                watches={"w": [WatchSession(2, list(store))]}, watched=lambda k: True, until=store[-1].revision,
                preconditions=[(0, "configmap/x", verdict.CONFLICT)],
                convergence=[Convergence(0, 1.5, 60)],
                component_writes=[ComponentWrite(1, "kube-scheduler", "node-0_1", True),
                                  ComponentWrite(2, "kube-scheduler", "node-0_1", False)],
                leaked=[], stopped=[], timeline=[{"t": 1.0, "what": "fault 0"}], skipped={})
    args.update(kw)
    return verdict.assemble(**args)


def failing(report) -> set[str]:
    return {c.name for c in report.checks if not c.ok}


def test_a_healthy_run_passes_and_says_so():
    report = assemble(*recorded())
    assert report.ok, report.text()
    text = report.text()
    assert "fault 0" in text and text.endswith("PASS")
    assert report.to_dict()["ok"] is True


def test_a_dropped_acknowledged_write_fails_the_run():
    report = assemble(*recorded(drop_ack=True))
    assert not report.ok
    assert {"linearizable", "acknowledged writes"} <= failing(report)
    assert report.text().endswith("FAIL: chaos found violations")


def test_a_watch_that_missed_an_event_fails():
    ops, store = recorded()
    report = assemble(ops, store, watches={"w": [WatchSession(2, store[:1])]})
    assert failing(report) == {"watches exact"}


def test_a_stale_write_accepted_fails_and_no_refusal_at_all_proves_nothing():
    ops, store = recorded()
    assert failing(assemble(ops, store, preconditions=[(1, "configmap/x", verdict.ACCEPTED)])) == {
        "409 on stale resourceVersion"}
    assert failing(assemble(ops, store, preconditions=[(1, "configmap/x", verdict.UNKNOWN)])) == {
        "409 on stale resourceVersion"}


def test_a_workload_that_did_not_converge_fails_and_times_are_reported():
    ops, store = recorded()
    report = assemble(ops, store, convergence=[Convergence(0, 2.25, 60), Convergence(1, None, 60)])
    assert failing(report) == {"workload converges"}
    check = next(c for c in report.checks if c.name == "workload converges")
    assert "#0 2.2s" in check.summary and "fault 1: deployment not converged within 60s" in check.details


def test_each_workload_is_judged_and_reported_with_its_time():
    ops, store = recorded()
    times = [Convergence(0, 2.0, 60, "deployment/web"), Convergence(0, 3.5, 60, "statefulset/db"),
             Convergence(0, None, 60, "job/j-1")]
    report = assemble(ops, store, convergence=times, faults=[{"index": 0, "kind": "delay", "start": 1, "end": 2}])
    check = next(c for c in report.checks if c.name == "workload converges")
    assert not check.ok and check.details == ["fault 0: job/j-1 not converged within 60s"]
    assert "deployment/web: #0 2.0s; statefulset/db: #0 3.5s" in check.summary
    got = report.to_dict()
    assert got["convergence"][1] == {"fault": 0, "workload": "statefulset/db", "bound": 60, "seconds": 3.5}
    assert got["convergence"][2]["seconds"] is None
    assert got["faults"] == [{"index": 0, "kind": "delay", "start": 1, "end": 2}]
    assert failing(assemble(ops, store, convergence=[])) == {"workload converges"}  # nothing measured


def test_two_leaders_acting_in_one_term_fail():
    ops, store = recorded()
    writes = [ComponentWrite(1, "kube-controller-manager", "node-0_1", True),
              ComponentWrite(5, "kube-controller-manager", "node-0_2", True),   # a takeover
              ComponentWrite(6, "kube-controller-manager", "node-0_2", False),
              ComponentWrite(7, "kube-controller-manager", "node-0_1", False)]  # the old one acts
    report = assemble(ops, store, component_writes=writes)
    assert failing(report) == {"one leader per term"}
    assert "node-0_1 wrote at 7.000 in node-0_2's term" in report.text()
    assert assemble(ops, store, component_writes=writes[:3]).ok


def test_leaked_or_stopped_processes_and_run_errors_fail():
    ops, store = recorded()
    assert failing(assemble(ops, store, leaked=["node-0: 1 process(es) nothing accounts for: 9 (kubemu-pause infinity)"])) == {"no leaked process"}
    assert failing(assemble(ops, store, stopped=["node-0: pid 7"])) == {"no leaked process"}
    assert failing(assemble(ops, store, errors=["store fault partition did not reach store-1"])) == {"run"}


def test_skipped_faults_and_workloads_are_each_one_line():
    ops, store = recorded()
    report = assemble(ops, store, skipped={"node": "one node", "membership (fault 3)": "no store follower",
                                           "workload job": "the cluster does not serve Jobs"})
    lines = report.text(timeline=False).splitlines()
    assert "skipped fault node: one node" in lines
    assert "skipped fault membership (fault 3): no store follower" in lines
    assert "skipped workload job: the cluster does not serve Jobs" in lines
