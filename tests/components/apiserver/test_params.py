"""Every apiserver method answers wrong-typed params as bad input (never Internal), and the
apiserver keeps serving and logs no traceback."""
from __future__ import annotations

import pytest

from kubemu import wire
from tests.conftest import DEADLINE
from tests.kubemu.paramfuzz import BAD_INPUT, wrong_typed_calls

from . import api, pod  # noqa: F401  (api is a fixture)

NULLABLE = frozenset({"namespace", "subresource", "grace_period_seconds", "propagation_policy", "preconditions",
                      "container", "tail_lines", "limit_bytes", "resource_version", "resource_version_match",
                      "field_validation", "field_manager"})


def calls() -> dict[str, dict]:
    ns = {"namespace": "default"}
    writes = {"dry_run": True, "field_validation": "Strict", "field_manager": "fuzz"}
    return {
        "get": {"resource": "pods", "name": "x", **ns},
        "list": {"resource": "pods", "label_selector": "", "field_selector": "", "limit": 0, "continue": "",
                 "resource_version": "", "resource_version_match": "", **ns},
        "create": {"resource": "pods", "object": pod("fz"), **writes, **ns},
        "update": {"resource": "pods", "object": pod("fz"), **writes, **ns},
        "update_status": {"resource": "pods", "object": pod("fz"), **writes, **ns},
        "patch": {"resource": "pods", "name": "fz", "patch": {"metadata": {"labels": {"a": "b"}}},
                  "patch_type": "merge", "subresource": "", **writes, **ns},
        "delete": {"resource": "pods", "name": "nope", "grace_period_seconds": 0, "propagation_policy": "Background",
                   "preconditions": {}, "dry_run": True, **ns},
        "delete_collection": {"resource": "pods", "label_selector": "none=here", "field_selector": "",
                              "grace_period_seconds": 0, "propagation_policy": "Background", "dry_run": True,
                              **ns},
        "evict": {"name": "nope", "object": {"deleteOptions": {"dryRun": ["All"]}}, **writes, **ns},
        "log": {"name": "nope", "container": "c", "previous": False, "tail_lines": 1, "limit_bytes": 1, **ns},
        "bind": {"name": "nope", "node": "node-0", "resource": "pods", **writes, **ns},
        "get_scale": {"resource": "deployments", "name": "nope", **ns},
        "update_scale": {"resource": "deployments", "name": "nope", "replicas": 1, "resource_version": "1",
                         **writes, **ns},
    }


def test_wrong_typed_params_are_bad_input_and_the_apiserver_keeps_serving(api):
    wrong = {}
    for method, params in wrong_typed_calls(calls(), NULLABLE):
        try:
            api.call(method, **params)
        except wire.WireError as err:
            if err.code not in BAD_INPUT:
                wrong[(method, repr(params)[:200])] = str(err)[:300]
    assert not wrong, wrong
    # resource_version is left out: any scalar is a version to parse (Invalid if it is none);
    # bookmarks on, so a watch that wrongly opens fails the test with an item instead of hanging
    watch = {"resource": "pods", "label_selector": "", "field_selector": "", "allow_bookmarks": True,
             "namespace": "default"}
    with wire.SyncClient(api.endpoint, timeout=DEADLINE) as client:
        for method, params in wrong_typed_calls({"watch": watch}, NULLABLE):
            with pytest.raises(wire.WireError) as info:
                with client.stream(method, params) as stream:
                    next(iter(stream))
            assert info.value.code in BAD_INPUT, (params, info.value)
    assert api.call("healthz") == {"ok": True}
    assert "Traceback" not in api.log_text()
