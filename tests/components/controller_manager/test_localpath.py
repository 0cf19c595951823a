"""components.controller_manager.localpath: the one disk write, removing a volume's directory,
happens only at `<template prefix, resolved><node><rest>/<name>`: no symlink from the node's
directory down."""
from __future__ import annotations

import pytest

from components.controller_manager.localpath import remove_directory


def test_removes_a_volume_directory_under_the_root(tmp_path):
    template = f"{tmp_path}/nodes/{{node}}/local-path"
    volume = tmp_path / "nodes" / "node-1" / "local-path" / "pvc-u1_db_data"
    (volume / "sub").mkdir(parents=True)
    (volume / "sub" / "f").write_text("x")
    remove_directory(str(volume), template, "node-1")
    assert not volume.exists() and volume.parent.is_dir()
    remove_directory(str(volume), template, "node-1")   # gone already: done


def test_the_state_directory_may_be_reached_through_a_symlink(tmp_path):
    (tmp_path / "real" / "nodes" / "node-1" / "local-path" / "pvc-u1_db_data").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    template = f"{tmp_path}/link/nodes/{{node}}/local-path"
    remove_directory(f"{tmp_path}/link/nodes/node-1/local-path/pvc-u1_db_data", template, "node-1")
    assert not (tmp_path / "real" / "nodes" / "node-1" / "local-path" / "pvc-u1_db_data").exists()


def test_braces_in_the_state_directory(tmp_path):
    state = tmp_path / "s{x}"
    volume = state / "nodes" / "node-1" / "local-path" / "pvc-u1_db_data"
    volume.mkdir(parents=True)
    remove_directory(str(volume), f"{state}/nodes/{{node}}/local-path", "node-1")
    assert not volume.exists()


def test_refuses_anything_else(tmp_path):
    template = f"{tmp_path}/nodes/{{node}}/local-path"
    root = tmp_path / "nodes" / "node-1" / "local-path"
    root.mkdir(parents=True)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep").write_text("x")
    (root / "pvc-u1_db_data").symlink_to(outside)
    with pytest.raises(ValueError):
        remove_directory(str(root / "pvc-u1_db_data"), template, "node-1")
    with pytest.raises(ValueError):
        remove_directory(str(outside), template, "node-1")
    with pytest.raises(ValueError):
        remove_directory(str(root / "a" / ".." / ".." / "precious"), template, "node-1")
    with pytest.raises(ValueError):   # another node's directory
        remove_directory(str(tmp_path / "nodes" / "node-2" / "local-path" / "pvc-u1_db_data"), template, "node-1")
    assert (outside / "keep").exists()


def test_refuses_a_symlink_planted_in_the_node_root(tmp_path):
    # the node's local-path directory itself made a link elsewhere: what lies under it is not ours
    template = f"{tmp_path}/nodes/{{node}}/local-path"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "pvc-u1_db_data").mkdir(parents=True)
    (elsewhere / "pvc-u1_db_data" / "keep").write_text("x")
    (tmp_path / "nodes" / "node-1").mkdir(parents=True)
    (tmp_path / "nodes" / "node-1" / "local-path").symlink_to(elsewhere)
    with pytest.raises(ValueError):
        remove_directory(f"{tmp_path}/nodes/node-1/local-path/pvc-u1_db_data", template, "node-1")
    # the node's directory a link: the same
    (tmp_path / "nodes" / "node-2").symlink_to(tmp_path / "nodes" / "node-1")
    with pytest.raises(ValueError):
        remove_directory(f"{tmp_path}/nodes/node-2/local-path/pvc-u1_db_data", template, "node-2")
    assert (elsewhere / "pvc-u1_db_data" / "keep").exists()
