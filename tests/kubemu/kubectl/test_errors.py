"""How errors read: kubectl's words for what the apiserver answers, and for no answer."""
from __future__ import annotations

from kubemu.apiclient import AlreadyExists, BadRequest, Conflict, Invalid, NotFound, OutcomeUnknown, TooLarge, \
    Unavailable
from kubemu.kubectl.session import connection_error, server_error


def test_server_errors_name_their_reason():
    assert server_error(NotFound('pods "x" not found', {"reason": "NotFound"})) == \
        'Error from server (NotFound): pods "x" not found'
    exists = AlreadyExists('pods "x" already exists', {"reason": "AlreadyExists"})
    assert server_error(exists) == 'Error from server (AlreadyExists): pods "x" already exists'
    assert server_error(exists, "creating", "pod.yaml") == \
        'Error from server (AlreadyExists): error when creating "pod.yaml": pods "x" already exists'
    assert server_error(Conflict("Operation cannot be fulfilled", {"reason": "Conflict"})).startswith(
        "Error from server (Conflict): Operation cannot be fulfilled")
    assert server_error(TooLarge("too big")) == "Error from server (RequestEntityTooLarge): too big"
    assert server_error(BadRequest("bad")) == "Error from server (BadRequest): bad"


def test_invalid_objects_list_their_field_errors():
    one = Invalid('Deployment "web" is invalid: spec.replicas: ...',
                  {"reason": "Invalid", "kind": "Deployment", "name": "web", "causes": ["spec.replicas"],
                   "messages": ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]})
    assert server_error(one) == ('The Deployment "web" is invalid: spec.replicas: Invalid value: -1: must be greater '
                                 'than or equal to 0')
    two = Invalid("...", {"kind": "Pod", "name": "p", "messages": ["a: Required value", "b: Required value",
                                                                    "a: Required value"]})
    assert server_error(two) == 'The Pod "p" is invalid: \n* a: Required value\n* b: Required value'
    assert server_error(Invalid("Binding is invalid", {"causes": ["target.name"]})) == \
        "Error from server (Invalid): Binding is invalid"


def test_no_answer():
    assert connection_error(Unavailable("could not reach"), "ipc:///x.sock") == \
        "The connection to the server ipc:///x.sock was refused - did you specify the right host or port?"
    assert connection_error(OutcomeUnknown("timed out"), "tcp://h:1") == "Unable to connect to the server: timed out"
