"""components.controller_manager.localpath: the one disk write, removing a volume's directory,
happens only directly under the node's root, symlinks resolved."""
from __future__ import annotations

import pytest

from components.controller_manager.localpath import remove_directory


def test_removes_a_volume_directory_under_the_root(tmp_path):
    root = tmp_path / "local-path"
    volume = root / "pvc-u1_db_data"
    (volume / "sub").mkdir(parents=True)
    (volume / "sub" / "f").write_text("x")
    remove_directory(str(volume), str(root))
    assert not volume.exists() and root.is_dir()
    remove_directory(str(volume), str(root))   # gone already: done


def test_refuses_anything_else(tmp_path):
    root = tmp_path / "local-path"
    root.mkdir()
    outside = tmp_path / "precious"
    outside.mkdir()
    (root / "pvc-u1_db_data").symlink_to(outside)
    with pytest.raises(ValueError):
        remove_directory(str(root / "pvc-u1_db_data"), str(root))
    with pytest.raises(ValueError):
        remove_directory(str(outside), str(root))
    with pytest.raises(ValueError):
        remove_directory(str(root / "a" / ".." / ".." / "precious"), str(root))
    assert outside.is_dir()
