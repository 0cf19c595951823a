"""Defaulting and validation of ServiceAccount, ConfigMap and Secret (v1), with objects.py's
contract, and the field tables of the authentication.k8s.io objects that ServiceAccount tokens
travel in (TokenRequest, TokenReview, SelfSubjectReview):

    default_serviceaccount(obj) / default_configmap(obj) / default_secret(obj) -> a new object
    validate_serviceaccount(obj, strict=True) / validate_configmap / validate_secret
                                                                    -> [FieldError, ...]
    validate_configmap_update(old, new) / validate_secret_update(old, new) -> [FieldError, ...]

As kube-apiserver has them (pkg/apis/core/validation, core/v1 defaults and conversion):

* ConfigMap `data` (strings) and `binaryData` (base64 strings) keys are config keys
  (`[-._a-zA-Z0-9]+`, at most 253 characters, not `.`, `..` or starting with `..`), a key in
  both is an error, and the values total at most 1 MiB.
* Secret `data` values are base64; `stringData` is write-only: the defaulter merges it into
  `data` (base64-encoded, its keys winning) and drops it, as the v1 conversion does on create
  and update. `type` defaults to Opaque; the well-known types need their keys (tls.crt and
  tls.key for kubernetes.io/tls, ...). Values total at most 1 MiB.
* `immutable: true` freezes the data (and `immutable` itself); a Secret's type never changes.
"""
from __future__ import annotations

import base64
import json
from typing import Any, Callable

from .fielderrors import FieldError, forbidden, invalid, key, required, too_long
from .meta import Checker, register, table
from .pod import BOOL, INT, LIST, OBJ, STR, STRS, _fill, _max_len, _regex_error

MAX_SIZE = 1024 * 1024           # core.MaxSecretSize: a ConfigMap's or Secret's data
CONFIG_KEY = "[-._a-zA-Z0-9]+"
CONFIG_KEY_MAX = 253
_CONFIG_KEY_MSG = _regex_error("a valid config key must consist of alphanumeric characters, "
                               "'-', '_' or '.'", CONFIG_KEY, "key.name", "KEY_NAME", "key-name")
IMMUTABLE_MSG = "field is immutable when `immutable` is set"
OPAQUE = "Opaque"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"
# type -> the data keys it needs (all of them, or - basic-auth - any one of them)
_TYPE_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
_BASIC_AUTH = ("kubernetes.io/basic-auth", ("username", "password"))

_META = {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta"}

register(
    ServiceAccount=table("apiVersion kind metadata secrets imagePullSecrets "
                         "automountServiceAccountToken",
                         {"secrets": LIST, "imagePullSecrets": LIST,
                          "automountServiceAccountToken": BOOL},
                         types={**_META, "secrets": "[]ObjectReference",
                                "imagePullSecrets": "[]LocalObjectReference",
                                "automountServiceAccountToken": "boolean"}),
    LocalObjectReference=table("name", {"name": STR}, types={"name": "string"}),
    ConfigMap=table("apiVersion kind metadata data binaryData immutable",
                    {"data": OBJ, "binaryData": OBJ, "immutable": BOOL},
                    types={**_META, "data": "map[string]string",
                           "binaryData": "map[string][]byte", "immutable": "boolean"}),
    Secret=table("apiVersion kind metadata data stringData type immutable",
                 {"data": OBJ, "stringData": OBJ, "type": STR, "immutable": BOOL},
                 types={**_META, "data": "map[string][]byte", "stringData": "map[string]string",
                        "type": "string", "immutable": "boolean"}),

    TokenRequest=table("apiVersion kind metadata spec status",
                       types={**_META, "spec": "TokenRequestSpec",
                              "status": "TokenRequestStatus"}),
    TokenRequestSpec=table("audiences expirationSeconds boundObjectRef",
                           {"audiences": STRS, "expirationSeconds": INT, "boundObjectRef": OBJ},
                           types={"audiences": "[]string", "expirationSeconds": "integer",
                                  "boundObjectRef": "BoundObjectReference"}),
    BoundObjectReference=table("kind apiVersion name uid",
                               {"kind": STR, "apiVersion": STR, "name": STR, "uid": STR},
                               types={"kind": "string", "apiVersion": "string",
                                      "name": "string", "uid": "string"}),
    TokenRequestStatus=table("token expirationTimestamp", {"token": STR},
                             types={"token": "string", "expirationTimestamp": "Time"}),
    TokenReview=table("apiVersion kind metadata spec status",
                      types={**_META, "spec": "TokenReviewSpec", "status": "TokenReviewStatus"}),
    TokenReviewSpec=table("token audiences", {"token": STR, "audiences": STRS},
                          types={"token": "string", "audiences": "[]string"}),
    TokenReviewStatus=table("authenticated user audiences error",
                            {"authenticated": BOOL, "user": OBJ, "audiences": STRS, "error": STR},
                            types={"authenticated": "boolean", "user": "UserInfo",
                                   "audiences": "[]string", "error": "string"}),
    UserInfo=table("username uid groups extra",
                   {"username": STR, "uid": STR, "groups": STRS, "extra": OBJ},
                   types={"username": "string", "uid": "string", "groups": "[]string",
                          "extra": "map[string][]string"}),
    SelfSubjectReview=table("apiVersion kind metadata status",
                            types={**_META, "status": "SelfSubjectReviewStatus"}),
    SelfSubjectReviewStatus=table("userInfo", {"userInfo": OBJ}, types={"userInfo": "UserInfo"}),
)


# --- defaults ---------------------------------------------------------------------------------

def _defaulted(obj: Any, fill: Callable[[dict], None], *, namespaced: bool) -> Any:
    # objects.py imports this module to merge its tables, hence the late import of its frame.
    from .objects import _defaulted as frame
    return frame(obj, fill, namespaced=namespaced)


def default_serviceaccount(obj: Any) -> Any:
    """ServiceAccounts have no defaults (the namespace aside)."""
    return _defaulted(obj, lambda sa: None, namespaced=True)


def default_configmap(obj: Any) -> Any:
    """ConfigMaps have no defaults (the namespace aside)."""
    return _defaulted(obj, lambda cm: None, namespaced=True)


def default_secret(obj: Any) -> Any:
    """type Opaque; stringData merged into data, base64-encoded (its keys win), and dropped.
    A stringData or data that is not a map of strings is left for validation to report."""
    def fill(secret: dict) -> None:
        _fill(secret, {"type": OPAQUE})
        string_data = secret.get("stringData")
        data = secret.get("data") if secret.get("data") is not None else {}
        if not isinstance(string_data, dict) or not isinstance(data, dict) \
                or not all(isinstance(v, str) for v in string_data.values()):
            return
        if string_data:
            secret["data"] = {**data, **{k: base64.b64encode(v.encode("utf-8", "surrogatepass"))
                                         .decode() for k, v in string_data.items()}}
        del secret["stringData"]
    return _defaulted(obj, fill, namespaced=True)


# --- validation -------------------------------------------------------------------------------

def _validate(obj: Any, kind: str, strict: bool, body: Callable[[Checker, dict], None]):
    from .objects import _validate as frame  # see _defaulted
    return frame(obj, kind, strict, body)


def config_key_errors(value: str) -> list[str]:
    """validation.IsConfigMapKey."""
    errors = []
    if len(value) > CONFIG_KEY_MAX:
        errors.append(_max_len(CONFIG_KEY_MAX))
    if not value or not all(ch.isascii() and (ch.isalnum() or ch in "-._") for ch in value):
        errors.append(_CONFIG_KEY_MSG)
    if value in (".", ".."):
        errors.append(f"must not be '{value}'")
    elif value.startswith(".."):
        errors.append("must not start with '..'")
    return errors


_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def decode_base64(text: str) -> bytes:
    """Go's base64.StdEncoding, as JSON decodes a []byte (newlines ignored); ValueError worded
    as Go's: `illegal base64 data at input byte N`."""
    clean = text.replace("\r", "").replace("\n", "")
    body = clean.rstrip("=")
    for i, ch in enumerate(body):
        if ch not in _BASE64:
            raise ValueError(f"illegal base64 data at input byte {i}")
    if len(clean) % 4:  # StdEncoding wants the padding: the last quantum is cut short
        raise ValueError(f"illegal base64 data at input byte {len(clean) - len(clean) % 4}")
    if len(clean) - len(body) > 2:
        raise ValueError(f"illegal base64 data at input byte {len(body)}")
    return base64.b64decode(clean)


def _data(c: Checker, value: Any, path: str, *, binary: bool) -> dict[str, int]:
    """The keys of a data map, each with the byte size of its value; bad keys and values are
    reported at `path[key]`."""
    sizes: dict[str, int] = {}
    for k, v in (c.obj(value, path) or {}).items():
        k_path = key(path, k)
        if not isinstance(k, str):
            c.invalid(path, k, "keys must be strings")
            continue
        for msg in config_key_errors(k):
            c.invalid(k_path, k, msg)
        if not isinstance(v, str):
            c.invalid(k_path, v, "must be a base64-encoded string" if binary else "must be a string")
            continue
        if binary:
            try:
                sizes[k] = len(decode_base64(v))
            except ValueError as err:
                c.invalid(k_path, "<data redacted>", str(err))
        else:
            sizes[k] = len(v.encode("utf-8", "surrogatepass"))
    return sizes


def validate_serviceaccount(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateServiceAccount: its metadata; the references it lists are only type-checked."""
    def body(c: Checker, sa: dict) -> None:
        for field, kind in (("secrets", "ObjectReference"),
                            ("imagePullSecrets", "LocalObjectReference")):
            refs = sa.get(field) if isinstance(sa.get(field), list) else []  # the table checks
            list(c.each_obj(refs, field, kind))                               # it is a list
    return _validate(obj, "ServiceAccount", strict, body)


def validate_configmap(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, cm: dict) -> None:
        data = _data(c, cm.get("data"), "data", binary=False)
        binary = _data(c, cm.get("binaryData"), "binaryData", binary=True)
        if isinstance(cm.get("data"), dict) and isinstance(cm.get("binaryData"), dict):
            for k in cm["data"]:
                if k in cm["binaryData"]:
                    c.invalid(key("data", k), k, "duplicate of key present in binaryData")
        if sum(data.values()) + sum(binary.values()) > MAX_SIZE:
            c.add(too_long("", MAX_SIZE))
    return _validate(obj, "ConfigMap", strict, body)


def validate_secret(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateSecret; a raw object's stringData counts as the data it becomes."""
    def body(c: Checker, secret: dict) -> None:
        data = _data(c, secret.get("data"), "data", binary=True)
        data.update(_data(c, secret.get("stringData"), "stringData", binary=False))
        if sum(data.values()) > MAX_SIZE:
            c.add(too_long("data", MAX_SIZE))
        stype = secret.get("type") or OPAQUE
        if stype == SERVICE_ACCOUNT_TOKEN:
            meta = secret.get("metadata") if isinstance(secret.get("metadata"), dict) else {}
            annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
            if not annotations.get(SERVICE_ACCOUNT_NAME_KEY):
                c.add(required(key("metadata.annotations", SERVICE_ACCOUNT_NAME_KEY)))
        elif stype == _BASIC_AUTH[0]:
            if not any(k in data for k in _BASIC_AUTH[1]):
                for k in _BASIC_AUTH[1]:
                    c.add(required(key("data", k)))
        for k in _TYPE_KEYS.get(stype, ()):
            if k not in data or (k == "ssh-privatekey" and not data[k]):
                c.add(required(key("data", k)))
            elif k.startswith(".docker"):
                _docker_config(c, secret, k)
    return _validate(obj, "Secret", strict, body)


def _docker_config(c: Checker, secret: dict, k: str) -> None:
    """A docker config key holds well-formed JSON."""
    raw = (secret.get("data") or {}).get(k) if isinstance(secret.get("data"), dict) else None
    try:
        text = base64.b64decode(raw) if isinstance(raw, str) else \
            str((secret.get("stringData") or {}).get(k, "")).encode()
        if not isinstance(json.loads(text), dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        c.add(invalid(key("data", k), "<secret contents redacted>", str(err)))


def _immutable(old: Any, new: Any, fields: tuple[str, ...]) -> list[FieldError]:
    """ValidateConfigMapUpdate / ValidateSecretUpdate: once `immutable` is true, it and the
    data stay as they are."""
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    if old.get("immutable") is not True:
        return []
    errors = []
    if new.get("immutable") is not True:
        errors.append(forbidden("immutable", IMMUTABLE_MSG))
    for field in fields:
        if (old.get(field) or {}) != (new.get(field) or {}):
            errors.append(forbidden(field, IMMUTABLE_MSG))
    return errors


def validate_configmap_update(old: Any, new: Any) -> list[FieldError]:
    return _immutable(old, new, ("data", "binaryData"))


def validate_secret_update(old: Any, new: Any) -> list[FieldError]:
    errors = []
    before = (old.get("type") if isinstance(old, dict) else None) or OPAQUE
    after = (new.get("type") if isinstance(new, dict) else None) or OPAQUE
    if before != after:
        errors.append(invalid("type", after, "field is immutable"))
    return errors + _immutable(old, new, ("data",))


DEFAULTERS: dict[str, Callable[[Any], Any]] = {
    "ServiceAccount": default_serviceaccount, "ConfigMap": default_configmap,
    "Secret": default_secret,
}
VALIDATORS: dict[str, Callable[..., list[FieldError]]] = {
    "ServiceAccount": validate_serviceaccount, "ConfigMap": validate_configmap,
    "Secret": validate_secret,
}
UPDATE_VALIDATORS: dict[str, Callable[[Any, Any], list[FieldError]]] = {
    "ConfigMap": validate_configmap_update, "Secret": validate_secret_update,
}
