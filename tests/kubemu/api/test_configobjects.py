"""ServiceAccount, ConfigMap and Secret: defaults (a Secret's stringData becoming data), config
keys, sizes, the well-known Secret types and immutability, in Kubernetes' words."""
from __future__ import annotations

import base64

import pytest

from kubemu.api import configobjects
from kubemu.api.configobjects import (MAX_SIZE, config_key_errors, decode_base64, default_secret,
                                      validate_configmap, validate_secret, validate_serviceaccount)
from kubemu.api.meta import TYPES
from kubemu.api.objects import default_object, validate_object, validate_object_update

KEY_MSG = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
           "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
           "'[-._a-zA-Z0-9]+')")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def sa(**fields):
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "builder", "namespace": "team"}, **fields}


def cm(**fields):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "team"}, **fields}


def secret(**fields):
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "team"}, **fields}


def messages(errors) -> list[str]:
    return [str(e) for e in errors]


# --- ServiceAccount ---------------------------------------------------------------------------

def test_a_service_account_with_its_fields_is_valid():
    obj = sa(secrets=[{"name": "token"}], imagePullSecrets=[{"name": "registry"}],
             automountServiceAccountToken=False)
    assert validate_object(default_object(obj)) == []


def test_service_account_fields_are_type_checked():
    assert messages(validate_serviceaccount(sa(
        secrets="x", imagePullSecrets=[{"name": 1, "extra": True}],
        automountServiceAccountToken="yes", bogus=1))) == [
        "bogus: Unknown field",
        "secrets: Invalid value: \"x\": must be a list",
        "automountServiceAccountToken: Invalid value: \"yes\": must be a boolean",
        "imagePullSecrets[0].extra: Unknown field",
        "imagePullSecrets[0].name: Invalid value: 1: must be a string"]


def test_a_service_account_name_is_a_dns_subdomain():
    obj = sa()
    obj["metadata"]["name"] = "Bad_Name"
    assert any("metadata.name: Invalid value" in m for m in messages(validate_serviceaccount(obj)))


def test_the_default_namespace_is_filled():
    obj = sa()
    del obj["metadata"]["namespace"]
    assert default_object(obj)["metadata"]["namespace"] == "default"


# --- ConfigMap --------------------------------------------------------------------------------

def test_a_configmap_with_data_and_binary_data_is_valid():
    assert validate_configmap(cm(data={"app.conf": "x=1", "KEY_NAME": ""},
                                 binaryData={"logo.png": b64("\x89PNG")}, immutable=True)) == []


@pytest.mark.parametrize("key, errors", [
    ("a b", [KEY_MSG]),
    ("", [KEY_MSG]),
    (".", ["must not be '.'"]),
    ("..", ["must not be '..'"]),
    ("..hidden", ["must not start with '..'"]),
    ("k" * 254, ["must be no more than 253 characters"]),
    ("ключ", [KEY_MSG]),
    (".hidden", []),
])
def test_config_keys(key, errors):
    assert config_key_errors(key) == errors


def test_a_bad_key_is_reported_at_its_path_in_kubernetes_words():
    assert messages(validate_configmap(cm(data={"a b": "x"}))) == [
        f'data[a b]: Invalid value: "a b": {KEY_MSG}']


def test_a_key_in_both_maps_is_an_error():
    assert messages(validate_configmap(cm(data={"k": "v"}, binaryData={"k": b64("v")}))) == [
        'data[k]: Invalid value: "k": duplicate of key present in binaryData']


def test_values_must_be_strings_and_binary_data_base64():
    assert messages(validate_configmap(cm(data={"n": 5}, binaryData={"b": "!!!!"}))) == [
        "data[n]: Invalid value: 5: must be a string",
        'binaryData[b]: Invalid value: "<data redacted>": illegal base64 data at input byte 0']


def test_a_configmap_may_hold_one_mebibyte():
    assert validate_configmap(cm(data={"a": "x" * (MAX_SIZE - 4)},
                                 binaryData={"b": b64("1234")})) == []
    assert messages(validate_configmap(cm(data={"a": "x" * (MAX_SIZE - 3)},
                                          binaryData={"b": b64("1234")}))) == [
        "Too long: may not be more than 1048576 bytes"]


def test_an_immutable_configmap_keeps_its_data():
    old = cm(data={"k": "v"}, immutable=True)
    old["metadata"].update(uid="u", resourceVersion="5")
    changed = dict(old, data={"k": "w"})
    assert messages(validate_object_update(old, changed)) == [
        "data: Forbidden: field is immutable when `immutable` is set"]
    assert messages(validate_object_update(old, dict(old, immutable=False))) == [
        "immutable: Forbidden: field is immutable when `immutable` is set"]
    old["metadata"]["labels"] = {}
    relabelled = dict(old, metadata=dict(old["metadata"], labels={"a": "b"}))
    assert validate_object_update(old, relabelled) == []
    mutable = cm(data={"k": "v"})
    assert validate_object_update(mutable, dict(mutable, data={"k": "w"}, immutable=True),
                                  require_resource_version=False) == []


# --- Secret -----------------------------------------------------------------------------------

def test_string_data_becomes_base64_data_and_wins():
    out = default_secret(secret(data={"user": b64("old"), "keep": b64("k")},
                                stringData={"user": "admin", "pass": "s3cret"}))
    assert out["data"] == {"user": b64("admin"), "keep": b64("k"), "pass": b64("s3cret")}
    assert "stringData" not in out
    assert out["type"] == "Opaque"
    assert validate_object(out) == []


def test_string_data_that_is_not_strings_is_left_for_validation():
    out = default_secret(secret(stringData={"n": 5}))
    assert out["stringData"] == {"n": 5}
    assert messages(validate_secret(out)) == ["stringData[n]: Invalid value: 5: must be a string"]


def test_a_raw_secret_is_judged_by_what_it_becomes():
    assert validate_secret(secret(stringData={"a": "b"})) == []
    assert messages(validate_secret(secret(stringData={"bad key": "b"}))) == [
        f'stringData[bad key]: Invalid value: "bad key": {KEY_MSG}']


def test_secret_data_is_base64_and_at_most_a_mebibyte():
    assert messages(validate_secret(secret(data={"a": "not base64"}))) == [
        'data[a]: Invalid value: "<data redacted>": illegal base64 data at input byte 3']
    big = base64.b64encode(b"x" * (MAX_SIZE + 1)).decode()
    assert messages(validate_secret(secret(data={"a": big}))) == [
        "data: Too long: may not be more than 1048576 bytes"]


@pytest.mark.parametrize("stype, data, errors", [
    ("kubernetes.io/tls", {}, ["data[tls.crt]: Required value", "data[tls.key]: Required value"]),
    ("kubernetes.io/tls", {"tls.crt": b64("c"), "tls.key": b64("k")}, []),
    ("kubernetes.io/basic-auth", {}, ["data[username]: Required value",
                                      "data[password]: Required value"]),
    ("kubernetes.io/basic-auth", {"password": ""}, []),
    ("kubernetes.io/ssh-auth", {"ssh-privatekey": ""}, ["data[ssh-privatekey]: Required value"]),
    ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": b64('{"auths": {}}')}, []),
    ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": b64("{")},
     ['data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": Expecting property '
      "name enclosed in double quotes: line 1 column 2 (char 1)"]),
    ("kubernetes.io/service-account-token", {},
     ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]),
    ("example.com/custom", {}, []),
])
def test_well_known_secret_types_need_their_keys(stype, data, errors):
    assert messages(validate_secret(secret(type=stype, data=data))) == errors


def test_a_secrets_type_never_changes_and_immutable_freezes_its_data():
    old = default_secret(secret(data={"k": b64("v")}, immutable=True))
    old["metadata"].update(uid="u", resourceVersion="5")
    assert messages(validate_object_update(old, dict(old, type="kubernetes.io/tls",
                                                     data={"tls.crt": "", "tls.key": ""}))) == [
        'type: Invalid value: "kubernetes.io/tls": field is immutable',
        "data: Forbidden: field is immutable when `immutable` is set"]
    assert validate_object_update(old, dict(old, type=None)) == []


# --- tables -----------------------------------------------------------------------------------

def test_every_kind_has_its_validator_defaulter_and_types():
    for kind in ("ServiceAccount", "ConfigMap", "Secret"):
        assert kind in configobjects.VALIDATORS and kind in configobjects.DEFAULTERS
        assert TYPES[kind]["metadata"] == "ObjectMeta"
    assert TYPES["ConfigMap"]["binaryData"] == "map[string][]byte"
    assert TYPES["TokenRequestSpec"]["boundObjectRef"] == "BoundObjectReference"


def test_base64_as_go_decodes_it():
    assert decode_base64("aGVsbG8=\n") == b"hello"
    for bad, at in (("aGVsbG8", 4), ("a===", 1), ("ab=c", 2)):
        with pytest.raises(ValueError, match=f"illegal base64 data at input byte {at}"):
            decode_base64(bad)
