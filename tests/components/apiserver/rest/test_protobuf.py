"""Protobuf bodies of the kinds kubectl's typed clients send: bytes captured from kubectl v1.32."""
from __future__ import annotations

import pytest

from components.apiserver.rest import protobuf

# kubectl create namespace demo
NAMESPACE = (b'k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12\x1c\n\x14\n\x04demo\x12\x00\x1a\x00"\x00*\x002\x008\x00'
             b'B\x00\x12\x00\x1a\x02\n\x00\x1a\x00"\x00')

# kubectl create deployment web --image=nginx --port=80 --replicas=2 -- nginx -g x
DEPLOYMENT = (
    b'k8s\x00\n\x15\n\x07apps/v1\x12\nDeployment\x12\xc6\x01\n\x1f\n\x03web\x12\x00\x1a\x00"\x00*\x002'
    b'\x008\x00B\x00Z\n\n\x03app\x12\x03web\x12\x94\x01\x08\x02\x12\x0c\n\n\n\x03app\x12\x03web\x1az\n'
    b'\x1c\n\x00\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00Z\n\n\x03app\x12\x03web\x12Z\x12<\n\x05nginx'
    b'\x12\x05nginx\x1a\x05nginx\x1a\x02-g\x1a\x01x*\x002\n\n\x00\x10\x00\x18P"\x00*\x00B\x00j\x00r'
    b'\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00'
    b'\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00"\x02\n\x00(\x008\x00\x1a\x0c\x08\x00\x10\x00'
    b'\x18\x00 \x00(\x008\x00\x1a\x00"\x00')


def _len(field: int, payload: bytes) -> bytes:
    return bytes([field << 3 | 2, len(payload)]) + payload


def _obj(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _len(1, api_version.encode()) + _len(2, kind.encode())
    return protobuf.MAGIC + _len(1, type_meta) + _len(2, raw)


def test_namespace_from_kubectl_create():
    assert protobuf.decode(NAMESPACE) == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}


def test_deployment_from_kubectl_create():
    assert protobuf.decode(DEPLOYMENT) == {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                                       "command": ["nginx", "-g", "x"],
                                                       "ports": [{"containerPort": 80}]}]}}}}


def test_job_and_cronjob_as_kubectl_create_sends_them():
    pod_spec = _len(2, _len(1, b"tick") + _len(2, b"busybox")) + _len(3, b"OnFailure")
    job_spec = _len(6, _len(2, pod_spec))
    cronjob = _obj("batch/v1", "CronJob", _len(1, _len(1, b"tick")) + _len(2, _len(1, b"@hourly") + _len(
        5, _len(1, _len(1, b"tick")) + _len(2, job_spec))))
    template = {"spec": {"containers": [{"name": "tick", "image": "busybox"}], "restartPolicy": "OnFailure"}}
    assert protobuf.decode(cronjob) == {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
        "spec": {"schedule": "@hourly", "jobTemplate": {"metadata": {"name": "tick"}, "spec": {"template": template}}}}
    owner = _len(1, b"CronJob") + _len(3, b"tick") + _len(4, b"u1") + _len(5, b"batch/v1") + bytes([6 << 3, 1])
    job = _obj("batch/v1", "Job", _len(1, _len(1, b"manual") + _len(13, owner)) + _len(2, job_spec))
    assert protobuf.decode(job) == {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "manual", "ownerReferences": [
            {"kind": "CronJob", "name": "tick", "uid": "u1", "apiVersion": "batch/v1", "controller": True}]},
        "spec": {"template": template}}


def test_self_subject_access_review():
    attrs = _len(1, b"default") + _len(2, b"create") + _len(5, b"pods")
    raw = _len(1, b"") + _len(2, _len(1, attrs))
    assert protobuf.decode(_obj("authorization.k8s.io/v1", "SelfSubjectAccessReview", raw)) == {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}}}


def test_maps_repeated_fields_and_bytes():
    meta = _len(1, b"cfg") + _len(11, _len(1, b"app") + _len(2, b"web"))
    raw = _len(1, meta) + _len(2, _len(1, b"k") + _len(2, b"\x00\x01")) + _len(3, b"Opaque")
    assert protobuf.decode(_obj("v1", "Secret", raw)) == {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cfg", "labels": {"app": "web"}},
        "data": {"k": "AAE="}, "type": "Opaque"}
    rule = _len(1, b"get") + _len(1, b"list") + _len(3, b"pods")
    role = protobuf.decode(_obj("rbac.authorization.k8s.io/v1", "Role", _len(2, rule)))
    assert role["rules"] == [{"verbs": ["get", "list"], "resources": ["pods"]}]


def _varint_field(field: int, value: int) -> bytes:
    out = bytearray([field << 3])
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


@pytest.mark.parametrize("body", [
    protobuf.MAGIC + _varint_field(1, 5),                                  # typeMeta (a message) as a varint
    _obj("v1", "ConfigMap", _len(1, _varint_field(11, 3))),                # labels (a map) as a varint
    _obj("v1", "ConfigMap", _len(1, _varint_field(1, 3))),                 # name (a string) as a varint
    _obj("apps/v1", "Deployment", _len(2, _len(1, b"\x02"))),              # replicas (a number) length-delimited
    protobuf.MAGIC + _len(1, _len(1, b"v1") + _len(2, b"ConfigMap")) + _varint_field(2, 1),  # raw as a varint
    _obj("v1", "ConfigMap", _len(1, _len(8, _varint_field(1, 1 << 62)))),  # creationTimestamp past year 9999
    _obj("v1", "ConfigMap", _len(1, _len(8, _varint_field(1, (1 << 64) - (1 << 62))))),  # and before year 1
])
def test_malformed_fields_are_protobuf_errors(body):
    with pytest.raises(protobuf.ProtobufError) as e:
        protobuf.decode(body)
    assert not e.value.unsupported and str(e.value).startswith("malformed protobuf: ")


@pytest.mark.parametrize("body,unsupported", [
    (_obj("apps/v1", "StatefulSet", b""), True),
    (b"not protobuf", False),
    (protobuf.MAGIC + b"\x0a\x7f", False),                    # a length past the end
    (protobuf.MAGIC + b"\x0f", False),                         # wire type 7
    (protobuf.MAGIC + b"\x08" + b"\xff" * 20, False),          # a varint that never ends
])
def test_refusals(body, unsupported):
    with pytest.raises(protobuf.ProtobufError) as e:
        protobuf.decode(body)
    assert e.value.unsupported is unsupported
    if unsupported:
        assert "send this StatefulSet as application/json or application/yaml" in str(e.value)
