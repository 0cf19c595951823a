"""The replica's snapshot: a msgpack envelope {"kv": KVStore.snapshot(), "members": {name: endpoint}}
(see Snapshots in `store.server`)."""
from __future__ import annotations

import msgpack


def wrap_snapshot(kv_data: bytes, members: dict[str, str]) -> bytes:
    return msgpack.packb({"kv": kv_data, "members": dict(members)}, use_bin_type=True)


def unwrap_snapshot(data: bytes) -> tuple[bytes, dict[str, str]]:
    """The envelope's parts; ValueError if it is not one of ours."""
    try:
        obj = msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise ValueError(f"snapshot envelope is not msgpack: {exc}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("kv"), bytes) or not isinstance(obj.get("members"), dict):
        raise ValueError("snapshot envelope: expected {kv: bytes, members: map}")
    members = obj["members"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in members.items()):
        raise ValueError("snapshot envelope: members must map names to endpoints")
    try:
        kv = msgpack.unpackb(obj["kv"], raw=False)
    except Exception as exc:
        raise ValueError(f"snapshot state is not msgpack: {exc}") from None
    if not isinstance(kv, dict) or kv.get("format") != 1 or not isinstance(kv.get("pairs"), list):
        raise ValueError("snapshot state: not a KVStore snapshot")
    return obj["kv"], members
