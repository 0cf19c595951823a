"""rollout history and undo's pure parts."""
from __future__ import annotations

import pytest

from kubemu.kubectl.history import UndoError, controller_revisions, history_table, revision_template, \
    revisions, rollback_annotations, rollback_target, template_text, undo_revision

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


def controller_revision(name: str, number: int, image: str, owner_uid: str = "sts-uid",
                        cause: str | None = None) -> dict:
    metadata = {"name": name, "ownerReferences": [{"uid": owner_uid, "controller": True}]}
    if cause:
        metadata["annotations"] = {"kubernetes.io/change-cause": cause}
    return {"metadata": metadata, "revision": number,
            "data": {"spec": {"template": {"$patch": "replace",
                                           "metadata": {"labels": {"app": "web"}},
                                           "spec": {"containers": [{"name": "c",
                                                                    "image": image}]}}}}}


STS = {"metadata": {"name": "web", "uid": "sts-uid"}}


def test_controller_revisions_history_and_undo_target():
    revs = [controller_revision("web-b", 2, "img:2", cause="kubemu set image"),
            controller_revision("web-a", 1, "img:1"),
            controller_revision("other-a", 5, "x", owner_uid="other")]
    by_revision = controller_revisions(STS, revs)
    assert sorted(by_revision) == [1, 2]
    assert history_table(by_revision) == \
        "REVISION  CHANGE-CAUSE\n1         <none>\n2         kubemu set image\n"
    assert undo_revision(by_revision, 0)["metadata"]["name"] == "web-a"
    assert undo_revision(by_revision, 2)["metadata"]["name"] == "web-b"
    with pytest.raises(UndoError, match="unable to find specified revision 7 in history"):
        undo_revision(by_revision, 7)
    with pytest.raises(UndoError, match="no last revision to roll back to"):
        undo_revision({1: revs[1]}, 0)


def test_template_text_of_a_revision():
    from components.controllers.history import template_of
    text = template_text(template_of(controller_revision("web-a", 1, "img:1")))
    assert text.startswith("Pod Template:\n  Labels:  app=web\n")
    assert "img:1" in text and "$patch" not in text
