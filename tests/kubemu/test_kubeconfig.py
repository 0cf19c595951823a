"""kubeconfigs: kubeadm's shape, kind's merge into the user's file and removal from it, the
file shell (atomic, 0600, kubectl's lock)."""
from __future__ import annotations

import base64
import os
import stat

import pytest
import yaml

from kubemu import kubeconfig

CA, CERT, KEY = b"ca-pem", b"cert-pem", b"key-pem"


def admin() -> dict:
    return kubeconfig.build("https://127.0.0.1:6443", CA, "kubernetes-admin", CERT, KEY)


def other() -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "prod",
            "clusters": [{"name": "prod", "cluster": {"server": "https://prod:443"}},
                         {"name": "kubemu", "cluster": {"server": "https://stale:1"}}],
            "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "me", "namespace": "web"}}],
            "users": [{"name": "me", "user": {"token": "t"}}],
            "preferences": {"colors": True}}


def test_build_is_kubeadm_s_admin_conf():
    config = admin()
    assert config["current-context"] == "kubernetes-admin@kubernetes"
    assert config["contexts"] == [{"name": "kubernetes-admin@kubernetes",
                                   "context": {"cluster": "kubernetes", "user": "kubernetes-admin"}}]
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == CA
    user = config["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == CERT
    assert base64.b64decode(user["client-key-data"]) == KEY


def test_merge_keeps_the_others_replaces_its_own_and_makes_it_current():
    entry = kubeconfig.renamed(admin(), "kubemu")
    merged = kubeconfig.merge(other(), entry)
    assert merged["current-context"] == "kubemu"
    assert [c["name"] for c in merged["clusters"]] == ["prod", "kubemu"]
    assert kubeconfig.find(merged, "clusters", "kubemu") == entry["clusters"][0]  # the stale one replaced
    assert kubeconfig.find(merged, "contexts", "prod") == other()["contexts"][0]
    assert kubeconfig.find(merged, "users", "me") == other()["users"][0]
    assert kubeconfig.find(merged, "contexts", "kubemu")["context"] == {"cluster": "kubemu", "user": "kubemu"}
    assert merged["preferences"] == {"colors": True}
    assert kubeconfig.merge(None, entry)["clusters"] == entry["clusters"]  # into nothing


def test_unmerge_takes_out_what_was_merged_and_clears_current_context():
    entry = kubeconfig.renamed(admin(), "kubemu")
    merged = kubeconfig.merge(other(), entry)
    out, removed = kubeconfig.unmerge(merged, "kubemu", entry["clusters"][0])
    assert removed
    assert out["current-context"] == ""  # as kind delete cluster leaves it
    assert [c["name"] for c in out["clusters"]] == ["prod"]
    assert out["contexts"] == other()["contexts"] and out["users"] == other()["users"]


def test_unmerge_leaves_a_context_another_cluster_took_since():
    mine = kubeconfig.renamed(admin(), "kubemu")
    theirs = kubeconfig.renamed(kubeconfig.build("https://127.0.0.1:7000", b"other-ca", "kubernetes-admin",
                                                 CERT, KEY), "kubemu")
    config = kubeconfig.merge(kubeconfig.merge(other(), mine), theirs)
    out, removed = kubeconfig.unmerge(config, "kubemu", mine["clusters"][0])
    assert not removed and out == config


def test_unmerge_keeps_current_context_when_it_is_another():
    entry = kubeconfig.renamed(admin(), "kubemu")
    merged = kubeconfig.merge(other(), entry)
    merged["current-context"] = "prod"
    assert kubeconfig.unmerge(merged, "kubemu", entry["clusters"][0])[0]["current-context"] == "prod"


def test_user_path_is_kubeconfig_s_first_path_else_home(monkeypatch, tmp_path):
    assert kubeconfig.user_path({"KUBECONFIG": f"{tmp_path}/a{os.pathsep}{tmp_path}/b"}) == tmp_path / "a"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfig.user_path({}) == tmp_path / ".kube" / "config"
    assert kubeconfig.user_path({"KUBECONFIG": ""}) == tmp_path / ".kube" / "config"


def test_write_is_0600_and_makes_the_directory(tmp_path):
    path = tmp_path / ".kube" / "config"
    kubeconfig.write(path, admin())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert kubeconfig.load(path) == admin()
    assert os.listdir(path.parent) == ["config"]  # no temporary file left


def test_load_missing_empty_and_bad(tmp_path):
    assert kubeconfig.load(tmp_path / "none")["clusters"] == []
    (tmp_path / "empty").write_text("")
    assert kubeconfig.load(tmp_path / "empty")["contexts"] == []
    (tmp_path / "bad").write_text("clusters: [unclosed\n")
    with pytest.raises(kubeconfig.KubeconfigError, match="is not valid YAML"):
        kubeconfig.load(tmp_path / "bad")
    (tmp_path / "list").write_text(yaml.safe_dump(["a"]))
    with pytest.raises(kubeconfig.KubeconfigError, match="is not a kubeconfig"):
        kubeconfig.load(tmp_path / "list")
    (tmp_path / "wrong").write_text(yaml.safe_dump({"clusters": "x"}))
    with pytest.raises(kubeconfig.KubeconfigError, match="is not a kubeconfig"):
        kubeconfig.load(tmp_path / "wrong")
    # items that are not mappings: one clear error, not an AttributeError in merge/unmerge
    for bad in ("clusters: [oops]\n", "users: [null]\n", "contexts: [[a]]\n"):
        (tmp_path / "items").write_text(bad)
        with pytest.raises(kubeconfig.KubeconfigError, match="each a mapping"):
            kubeconfig.load(tmp_path / "items")


def test_write_goes_through_a_symlinked_kubeconfig(tmp_path):
    """Dotfile managers link ~/.kube/config: the link stays, its target gets the new content."""
    (tmp_path / "dotfiles").mkdir()
    target = tmp_path / "dotfiles" / "kubeconfig"
    target.write_text(yaml.safe_dump(other()))
    link = tmp_path / ".kube" / "config"
    link.parent.mkdir()
    link.symlink_to(target)
    with kubeconfig.locked(link):
        assert (link.parent / "config.lock").exists()  # kubectl's lock: next to the name it was given
        kubeconfig.write(link, kubeconfig.merge(kubeconfig.load(link), admin()))
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert kubeconfig.load(target)["current-context"] == "kubernetes-admin@kubernetes"
    assert sorted(os.listdir(link.parent)) == ["config"] and os.listdir(target.parent) == ["kubeconfig"]


def test_lock_where_the_directory_is_a_file_is_one_error(tmp_path):
    (tmp_path / ".kube").write_text("not a directory")
    with pytest.raises(kubeconfig.KubeconfigError, match="cannot lock kubeconfig"):
        with kubeconfig.locked(tmp_path / ".kube" / "config", timeout=0.1):
            pass


def test_lock_is_kubectl_s_and_removed_after(tmp_path):
    path = tmp_path / "config"
    with kubeconfig.locked(path):
        assert (tmp_path / "config.lock").exists()
        with pytest.raises(kubeconfig.KubeconfigError, match="is locked"):
            with kubeconfig.locked(path, timeout=0.1):
                pass
    assert not (tmp_path / "config.lock").exists()
