"""store/_leases.py: the leader's lease expiry, fed the applied lease requests."""
from __future__ import annotations

import asyncio

import pytest

from kubemu import wire
from store._leases import LeaseExpiry
from store.backend import MemoryBackend
from store.mvcc import APPLIED, KVStore, LeaseExists, lease_grant_op


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_a_grant_applied_without_its_response_still_starts_the_clock(loop):
    """A replica answers only what it proposed, so a leader applying its predecessor's
    grant gets APPLIED, not the response: the id and TTL come from the request."""
    kv = KVStore(MemoryBackend())
    expiry = LeaseExpiry(loop, kv, propose=lambda req: None, leading=lambda: True, halted=lambda: False)
    grant = lease_grant_op(7, 30)
    res, _ = kv.apply_batch([(1, grant)], answered=())[0]
    assert res == APPLIED
    expiry.applied(grant, res)
    assert expiry.keepalive(7) == 30
    # a grant that failed starts nothing
    expiry.applied(lease_grant_op(8, 30), LeaseExists("lease already exists", id=8))
    with pytest.raises(wire.NotFound):
        expiry.keepalive(8)
    expiry.cancel()
