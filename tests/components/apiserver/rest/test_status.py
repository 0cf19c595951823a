"""Handler errors as kube-apiserver's Status objects and codes."""
from __future__ import annotations

import pytest

from components.apiserver.strategy import invalid, modified, not_found
from components.apiserver.rest import status
from kubemu import wire
from kubemu.api import fielderrors
from kubemu.api.authz import Attributes, forbidden_message
from kubemu.api.fielderrors import ValidationError
from kubemu.api.identity import UserInfo
from kubemu.api.resources import resolve


def test_not_found_names_the_group_and_resource():
    code, body = status.from_wire(not_found(resolve("deployments"), "web"))
    assert code == 404
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'deployments.apps "web" not found', "reason": "NotFound",
                    "details": {"name": "web", "group": "apps", "kind": "deployments"}, "code": 404}
    _, core = status.from_wire(not_found(resolve("pods"), "p"))
    assert core["details"] == {"name": "p", "kind": "pods"}


def test_already_exists_and_conflict_are_409_with_their_reasons():
    code, body = status.from_wire(wire.Conflict('pods "dup" already exists',
                                                {"reason": "AlreadyExists", "kind": "pods", "name": "dup"}))
    assert (code, body["reason"], body["message"]) == (409, "AlreadyExists", 'pods "dup" already exists')
    code, body = status.from_wire(modified(resolve("pods"), "web"))
    assert (code, body["reason"]) == (409, "Conflict")
    assert body["message"].startswith('Operation cannot be fulfilled on pods "web": the object has been modified')


def test_invalid_is_422_with_one_cause_per_field_error():
    err = invalid(ValidationError([fielderrors.required("spec.containers[0].name"),
                                   fielderrors.invalid("metadata.name", "A_B", "a lowercase RFC 1123 subdomain"),
                                   fielderrors.not_supported("spec.restartPolicy", "Sometimes", ["Always"])],
                                  kind="Pod", name="bad"))
    code, body = status.from_wire(err)
    assert code == 422 and body["reason"] == "Invalid" and body["message"].startswith('Pod "bad" is invalid: [')
    assert body["details"]["kind"] == "Pod" and body["details"]["name"] == "bad"
    assert body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].name"},
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "A_B": a lowercase RFC 1123 subdomain',
         "field": "metadata.name"},
        {"reason": "FieldValueNotSupported", "message": 'Unsupported value: "Sometimes": supported values: "Always"',
         "field": "spec.restartPolicy"}]


@pytest.mark.parametrize("error,code,reason", [
    (wire.BadRequest("bad selector"), 400, "BadRequest"),
    (wire.Gone("too old resource version: 1 (5)", {"reason": "Expired"}), 410, "Expired"),
    (wire.Gone("gone"), 410, "Expired"),
    (wire.TooLarge("Request entity too large", {"reason": "RequestEntityTooLarge"}), 413, "RequestEntityTooLarge"),
    (wire.Unavailable("store"), 503, "ServiceUnavailable"),
    (wire.OutcomeUnknown("timed out"), 504, "Timeout"),
    (wire.WireError("x", code="Forbidden"), 403, "Forbidden"),
    (wire.WireError("who", code="Unauthorized"), 401, "Unauthorized"),
    (wire.WireError("odd", code="SomethingNew"), 500, "InternalError"),
    (wire.Cancelled("gone away"), 500, "InternalError"),
])
def test_codes_and_reasons(error, code, reason):
    got_code, body = status.from_wire(error)
    assert (got_code, body["code"], body["reason"], body["status"]) == (code, code, reason, "Failure")


def test_internal_error_wording():
    _, body = status.from_wire(wire.Internal("boom"))
    assert body["message"] == "Internal error occurred: boom" and body["reason"] == "InternalError"


def test_forbidden_carries_kubernetes_wording():
    attrs = Attributes(UserInfo("jane"), "list", resource="pods", namespace="default")
    code, body = status.forbidden(forbidden_message(attrs), "", "pods")
    assert code == 403 and body["reason"] == "Forbidden" and body["details"] == {"kind": "pods"}
    assert body["message"] == ('pods is forbidden: User "jane" cannot list resource "pods" in API group "" '
                               'in the namespace "default"')


def test_door_errors():
    assert status.unauthorized() == (401, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                           "status": "Failure", "message": "Unauthorized",
                                           "reason": "Unauthorized", "code": 401})
    assert status.not_found_path()[1]["message"] == "the server could not find the requested resource"
    assert status.too_large(10)[0] == 413
    assert status.method_not_allowed("PUT", "pods")[1]["reason"] == "MethodNotAllowed"


def test_a_blocked_eviction_is_429_with_its_budget_cause():
    from components.apiserver.eviction import too_many_requests
    code, body = status.from_wire(too_many_requests("The disruption budget web needs 2 healthy pods and has 2 currently", 0))
    assert code == 429 and body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 429,
        "reason": "TooManyRequests", "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "details": {"retryAfterSeconds": 0, "causes": [
            {"reason": "DisruptionBudget",
             "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]}}
    # the wire carries it as its own type
    assert isinstance(wire.error_from_code("TooManyRequests", "x"), wire.TooManyRequests)
