"""kubemu/packer.py: msgpack.packb through one Packer per thread."""
from __future__ import annotations

import msgpack
import pytest

from kubemu.packer import packb


def test_packs_as_msgpack_packb_and_a_failed_pack_leaves_nothing_behind():
    rec = [b"k", b"v" * 1000, 2, 1, 0, {"a": "b"}]
    assert packb(rec) == msgpack.packb(rec, use_bin_type=True)
    with pytest.raises(TypeError):
        packb([b"half", object()])  # fails after packing part of it
    assert packb([1, "x", b"y"]) == msgpack.packb([1, "x", b"y"], use_bin_type=True)

