"""ObjectMeta validation shared by every kind: one mistake, one message, Kubernetes' words."""
import pytest

from kubemu.api.meta import (format_selector, is_timestamp, validate_object_meta,
                             validate_object_meta_update, validate_update)
from kubemu.api.pod import dns1123_label_errors

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    r"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def meta(**extra):
    return {"name": "web", "namespace": "default", **extra}


def owner(**extra):
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u1", **extra}


def messages(m, namespaced=True, **kw):
    return [str(e) for e in validate_object_meta(m, namespaced=namespaced, **kw)]


def test_valid_metadata():
    full = meta(labels={"app": "web", "example.com/tier": "front"},
                annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                ownerReferences=[owner(controller=True, blockOwnerDeletion=True),
                                 owner(name="other", uid="u2")],
                finalizers=["kubernetes.io/pvc-protection", "foregroundDeletion"],
                uid="abc", resourceVersion="7", generation=3,
                creationTimestamp="2024-01-02T03:04:05Z", deletionTimestamp=None,
                managedFields=[{"manager": "kubectl"}])
    assert messages(full) == []
    assert messages({"generateName": "web-"}, namespaced=True) == ["metadata.namespace: Required value"]
    assert messages({"name": "n1"}, namespaced=False) == []


@pytest.mark.parametrize("m, namespaced, expected", [
    ({"namespace": "default"}, True,
     "metadata.name: Required value: name or generateName is required"),
    (None, False, "metadata.name: Required value: name or generateName is required"),
    (meta(name="Web"), True, f'metadata.name: Invalid value: "Web": {SUBDOMAIN_MSG}'),
    (meta(generateName="Web-", name=None), True,
     f'metadata.generateName: Invalid value: "Web-": {SUBDOMAIN_MSG}'),
    ({"name": "web"}, True, "metadata.namespace: Required value"),
    ({"name": "web", "namespace": "default"}, False,
     "metadata.namespace: Forbidden: not allowed on this type"),
    (meta(namespace="a.b"), True, f'metadata.namespace: Invalid value: "a.b": {LABEL_MSG}'),
    (meta(labels={"app": "a b"}), True, 'metadata.labels: Invalid value: "a b": a valid label '
     "must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
     "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
     "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    (meta(annotations={"a": "x" * (256 * 1024)}), True,
     "metadata.annotations: Too long: may not be more than 262144 bytes"),
    (meta(annotations={"a": 1}), True, "metadata.annotations[a]: Invalid value: 1: must be a string"),
    (meta(ownerReferences=[owner(uid="")]), True,
     'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty'),
    (meta(ownerReferences=[owner(name=None)]), True,
     'metadata.ownerReferences.name: Invalid value: "": name must not be empty'),
    (meta(ownerReferences=[owner(kind="")]), True,
     'metadata.ownerReferences.kind: Invalid value: "": kind must not be empty'),
    (meta(ownerReferences=[owner(apiVersion="apps/")]), True,
     'metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty'),
    (meta(ownerReferences=[owner(controller=True), owner(name="b", controller=True)]), True,
     'Only one reference can have Controller set to true. Found "true" in references for '
     "ReplicaSet/web-1 and ReplicaSet/b"),
    (meta(ownerReferences=[owner(extra=1)]), True, "metadata.ownerReferences[0].extra: Unknown field"),
    (meta(ownerReferences={}), True, "metadata.ownerReferences: Invalid value: {}: must be a list"),
    (meta(finalizers=["a/b/c"]), True, 'metadata.finalizers: Invalid value: "a/b/c": a qualified name'),
    (meta(generation=-1), True, "metadata.generation: Invalid value: -1: must be greater than or equal to 0"),
    (meta(uid=5), True, "metadata.uid: Invalid value: 5: must be a string"),
    (meta(creationTimestamp="yesterday"), True, 'metadata.creationTimestamp: Invalid value: '
     '"yesterday": must be an RFC 3339 date-time, e.g. "2006-01-02T15:04:05Z"'),
    (meta(colour="red"), True, "metadata.colour: Unknown field"),
    ([], True, "metadata: Invalid value: []: must be an object"),
])
def test_one_mistake_one_message(m, namespaced, expected):
    got = messages(m, namespaced)
    assert len(got) == 1, got
    if expected.startswith("Only"):
        assert got[0].startswith("metadata.ownerReferences: Invalid value: [") and \
            got[0].endswith(expected)
    elif expected.startswith("metadata.finalizers"):
        assert got[0].startswith(expected)
    else:
        assert got[0] == expected


def test_namespace_names_are_labels():
    assert messages({"name": "a.b"}, False, name_rule=dns1123_label_errors) == \
        [f'metadata.name: Invalid value: "a.b": {LABEL_MSG}']
    assert messages({"name": "a.b"}, False) == []


def test_not_strict_ignores_unknown_fields():
    assert validate_object_meta(meta(colour="red"), namespaced=True, strict=False) == []


@pytest.mark.parametrize("ts, ok", [
    ("2024-01-02T03:04:05Z", True), ("2024-01-02T03:04:05.123456Z", True),
    ("2024-01-02T03:04:05+01:00", True), ("2024-13-02T03:04:05Z", False),
    ("2024-01-02 03:04:05Z", False), ("2024-01-02T03:04:05", False), ("", False),
])
def test_timestamps(ts, ok):
    assert is_timestamp(ts) is ok


@pytest.mark.parametrize("ts, ok", [
    ("2024-02-29T00:00:00Z", True), ("2023-02-29T00:00:00Z", False), ("2024-04-31T00:00:00Z", False),
    ("0000-01-01T00:00:00Z", False), ("0001-01-01T00:00:00Z", True), ("2024-00-01T00:00:00Z", False),
    ("2024-01-00T00:00:00Z", False), ("2024-01-32T00:00:00Z", False), ("2024-01-01T24:00:00Z", False),
    ("2024-01-01T23:60:00Z", False), ("2024-01-01T23:59:60Z", False), ("2024-01-01t23:59:59z", True),
    ("2024-01-01T00:00:00+24:00", False), ("2024-01-01T00:00:00-23:59", True),
    ("2024-01-01T00:00:00+00:60", False), ("٢٠٢٤-01-01T00:00:00Z", False),
])
def test_timestamps_are_calendar_dates(ts, ok):
    assert is_timestamp(ts) is ok


def test_timestamps_accept_what_strptime_accepts():
    """The calendar check is datetime's own (as strptime's was): the same set on every field's edges."""
    from datetime import datetime

    def by_strptime(text):
        core = text[:19]
        try:
            datetime.strptime(core, "%Y-%m-%dT%H:%M:%S" if "T" in core else "%Y-%m-%dt%H:%M:%S")
        except ValueError:
            return False
        return True
    for year in ("0000", "0001", "1900", "2000", "2023", "2024", "9999"):
        for month in ("00", "01", "02", "04", "12", "13"):
            for day in ("00", "01", "28", "29", "30", "31", "32"):
                for hms in ("00:00:00", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "23:59:61"):
                    for t in "Tt":
                        text = f"{year}-{month}-{day}{t}{hms}Z"
                        assert is_timestamp(text) is by_strptime(text), text


# --- updates ---------------------------------------------------------------------------------

OLD = meta(uid="u1", resourceVersion="5", creationTimestamp="2024-01-02T03:04:05Z", generation=2)


@pytest.mark.parametrize("change, expected", [
    ({"name": "other"}, 'metadata.name: Invalid value: "other": field is immutable'),
    ({"namespace": "kube-system"}, 'metadata.namespace: Invalid value: "kube-system": field is immutable'),
    ({"uid": "u2"}, 'metadata.uid: Invalid value: "u2": field is immutable'),
    ({"resourceVersion": ""}, 'metadata.resourceVersion: Invalid value: "": must be specified for an update'),
    ({"generation": 1}, "metadata.generation: Invalid value: 1: must not be decremented"),
    ({"creationTimestamp": "2025-01-01T00:00:00Z"},
     'metadata.creationTimestamp: Invalid value: "2025-01-01T00:00:00Z": field is immutable'),
])
def test_update_one_mistake_one_message(change, expected):
    new = {**OLD, **change}
    assert [str(e) for e in validate_object_meta_update(OLD, new)] == [expected]


def test_update_rules():
    assert validate_object_meta_update(OLD, dict(OLD)) == []
    # The server carries uid and creationTimestamp over when the client leaves them out.
    assert validate_object_meta_update(OLD, {"name": "web", "namespace": "default",
                                             "resourceVersion": "5"}) == []
    assert validate_object_meta_update(OLD, {**OLD, "resourceVersion": None},
                                       require_resource_version=False) == []
    deleting = {**OLD, "deletionTimestamp": "2024-01-03T00:00:00Z", "finalizers": ["a/b"]}
    got = validate_object_meta_update(deleting, {**deleting, "finalizers": ["a/b", "c/d"]})
    assert [str(e) for e in got] == ['metadata.finalizers: Forbidden: no new finalizers can be '
                                     'added if the object is being deleted, found new finalizers '
                                     '[]string{"c/d"}']
    assert [str(e) for e in validate_update({"metadata": OLD}, {"metadata": {**OLD, "name": "x"}})] \
        == ['metadata.name: Invalid value: "x": field is immutable']
    assert validate_update(None, 5)  # garbage in: errors out, no exception


def test_format_selector():
    assert format_selector({"matchLabels": {"b": "2", "a": "1"}}) == "a=1,b=2"
    assert format_selector({"matchExpressions": [
        {"key": "t", "operator": "In", "values": ["y", "x"]},
        {"key": "e", "operator": "Exists"}, {"key": "n", "operator": "DoesNotExist"},
        {"key": "z", "operator": "NotIn", "values": ["q"]}]}) == "e,!n,t in (x,y),z notin (q)"
    assert format_selector(None) == ""
