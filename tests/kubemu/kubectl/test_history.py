"""rollout history and undo's pure parts."""
from __future__ import annotations

from kubemu.kubectl.history import history_table, revision_template, revisions, rollback_annotations, \
    rollback_target

from .test_describe import deployment, replicaset


def with_cause(rs: dict, cause: str) -> dict:
    rs["metadata"]["annotations"]["kubernetes.io/change-cause"] = cause
    return rs


def test_history_lists_owned_revisions_oldest_first():
    rss = [with_cause(replicaset("web-3", 3, 1), "kubemu apply"), replicaset("web-1", 1, 0),
           replicaset("theirs", 2, 1, owner_uid="other")]
    by_revision = revisions(deployment(), rss)
    assert sorted(by_revision) == [1, 3]
    assert history_table(by_revision) == "REVISION  CHANGE-CAUSE\n1         <none>\n3         kubemu apply\n"
    assert history_table({}) == "No rollout history found."


def test_revision_template_shows_the_change_cause():
    text = revision_template(with_cause(replicaset("web-3", 3, 1), "why"))
    assert text.startswith("Pod Template:\n  Labels:       app=web\n  Annotations:  kubernetes.io/change-cause: why\n")


def test_rollback_target_and_annotations():
    rss = [replicaset("web-1", 1, 0), replicaset("web-2", 2, 0), replicaset("web-3", 3, 1)]
    assert rollback_target(deployment(), rss, 0)["metadata"]["name"] == "web-2"
    assert rollback_target(deployment(), rss, 1)["metadata"]["name"] == "web-1"
    assert rollback_target(deployment(), rss, 9) is None
    d = deployment()
    d["metadata"]["annotations"].update({"kubectl.kubernetes.io/last-applied-configuration": "{}", "mine": "x"})
    rs = with_cause(replicaset("web-1", 1, 0), "old cause")
    assert rollback_annotations(d, rs) == {"deployment.kubernetes.io/revision": "2",
                                           "kubectl.kubernetes.io/last-applied-configuration": "{}",
                                           "kubernetes.io/change-cause": "old cause"}
