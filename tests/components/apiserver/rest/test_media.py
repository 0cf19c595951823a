"""Bodies and Accept headers."""
from __future__ import annotations

import json

import pytest

from components.apiserver.rest import media
from kubemu.api.limits import MAX_DEPTH

KUBECTL_TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
                 "g=meta.k8s.io,application/json")


@pytest.mark.parametrize("accept,form,version", [
    ("", "json", "v1"), ("application/json", "json", "v1"), ("*/*", "json", "v1"),
    (KUBECTL_TABLE, "Table", "v1"), ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "Table", "v1beta1"),
    ("application/vnd.kubernetes.protobuf, application/json", "json", "v1"),
    ("application/yaml", "yaml", "v1"),
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "PartialObjectMetadataList", "v1"),
    ("application/json;as=Table;v=v2;g=meta.k8s.io, application/json", "json", "v1"),
])
def test_negotiate(accept, form, version):
    assert media.negotiate(accept) == media.Output(form, version)


def test_negotiate_nothing_acceptable():
    assert media.negotiate("application/vnd.kubernetes.protobuf") is None
    assert media.negotiate("application/json;as=Table;v=v1;g=other.io") is None


def test_body_types():
    assert media.body_type("application/json; charset=utf-8", media.OBJECT_TYPES) == media.JSON
    assert media.body_type(None, media.OBJECT_TYPES) == media.JSON
    with pytest.raises(media.BodyError) as e:
        media.body_type("text/plain", media.OBJECT_TYPES)
    assert e.value.code == 415 and "application/json, application/yaml" in str(e.value)
    with pytest.raises(media.BodyError) as e:
        media.body_type("application/apply-patch+yaml", tuple(media.PATCH_TYPES))
    assert e.value.code == 415 and "server-side apply is not supported by kubemu" in str(e.value)


def test_decode_json_and_yaml():
    assert media.decode(media.JSON, b'{"a": [1, 2]}') == {"a": [1, 2]}
    # YAML through JSON: a date stays a string
    assert media.decode(media.YAML, b"metadata:\n  name: x\n  when: 2024-01-01\n") == \
        {"metadata": {"name": "x", "when": "2024-01-01"}}


@pytest.mark.parametrize("kind,data,words", [
    (media.JSON, b"{not json", "json parse error"),
    (media.JSON, b"", "empty"),
    (media.JSON, b"\xff\xfe", "UTF-8"),
    (media.JSON, b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nests more than"),
    (media.YAML, b"a: [", "error converting YAML to JSON"),
    (media.YAML, b"a: 1\n---\nb: 2\n", "exactly one"),
    (media.YAML, b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                 b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                 b"f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", "values"),
])
def test_malformed_bodies_are_400(kind, data, words):
    with pytest.raises(media.BodyError) as e:
        media.decode(kind, data)
    assert e.value.code == 400 and words in str(e.value)


@pytest.mark.parametrize("value", [
    {"kind": "ConfigMap", "metadata": {"name": "x", "labels": {"a": "b"}}, "data": {"k": "v" * 300}},
    {"n": [0, -1, 2**63 - 1, 2**64 - 1, 1.5, 1e16, 0.1, True, False, None], "nested": [[{"a": []}]]},
    {"text": "é ü 日本 \u2028 \x00 \" \\ \n"},
])
def test_encode_json_is_the_same_value_as_the_standard_librarys(value):
    # byte for byte what json.dumps writes compact and in UTF-8 (it used to escape non-ASCII)
    assert media.encode_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def test_encode_json_writes_utf8_unescaped():
    assert media.encode_json({"a": "é"}) == '{"a":"é"}'.encode()


@pytest.mark.parametrize("value", [
    {1: "int key", None: "null key", True: "bool key"},   # a map from msgpack may have such keys
    {"big": 2**64, "negative": -2**63 - 1},               # beyond 64 bits
    {"surrogate": "\ud800"},                              # a JSON body's lone \ud800 escape
])
def test_encode_json_writes_what_orjson_refuses_as_the_standard_library_does(value):
    assert media.encode_json(value) == json.dumps(value, separators=(",", ":")).encode()


def test_encode_json_refuses_what_is_not_json():
    with pytest.raises(TypeError):
        media.encode_json({"a": object()})
