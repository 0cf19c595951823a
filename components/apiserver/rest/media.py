"""Media types: what a request body is in, and what a client accepts back. Pure.

Bodies: `application/json` and `application/yaml` (objects), the three patch types for PATCH;
protobuf is not served. Answers: JSON (the default), YAML, a meta.k8s.io Table, or
PartialObjectMetadata(List), chosen from Accept in the client's order of preference.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass

import orjson
import yaml

from kubemu.api.limits import MAX_DEPTH, ShapeError, check_shape, json_too_deep_at
from kubemu.kubectl.manifests import _Loader

from . import protobuf

JSON, YAML = "application/json", "application/yaml"
OBJECT_TYPES = (JSON, YAML)
CREATE_TYPES = (*OBJECT_TYPES, protobuf.MEDIA_TYPE)  # kubectl's typed clients create in protobuf
PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
               "application/strategic-merge-patch+json": "strategic"}
APPLY_PATCH = "application/apply-patch+yaml"
SERVER_SIDE_APPLY = ("server-side apply is not supported by kubemu: apply without --server-side "
                     "(client-side apply: kubectl apply -f)")


class BodyError(ValueError):
    """A body that cannot be read: `code` is 400 (malformed), 415 (media type)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def parse_media(value: str) -> tuple[str, dict[str, str]]:
    """`application/json;as=Table;v=v1` -> ("application/json", {"as": "Table", "v": "v1"})."""
    head, *rest = value.split(";")
    params = {}
    for part in rest:
        key, _, val = part.partition("=")
        if key.strip():
            params[key.strip().lower()] = val.strip().strip('"')
    return head.strip().lower(), params


@dataclass(frozen=True)
class Output:
    form: str = "json"          # json | yaml | Table | PartialObjectMetadata | PartialObjectMetadataList
    version: str = "v1"         # of meta.k8s.io, for the last three


@functools.lru_cache(maxsize=256)  # clients send the same few Accept headers, on every request
def negotiate(accept: str) -> Output | None:
    """The first of the client's media types this server can answer in; None if none (406)."""
    if not accept.strip():
        return Output()
    for item in accept.split(","):
        media, params = parse_media(item)
        wanted = params.get("as")
        if wanted:
            if media in (JSON, YAML, "*/*", "application/*") and params.get("g") == "meta.k8s.io" \
                    and params.get("v") in ("v1", "v1beta1") \
                    and wanted in ("Table", "PartialObjectMetadata", "PartialObjectMetadataList"):
                return Output(wanted, params["v"])
            continue
        if media in (JSON, "*/*", "application/*"):
            return Output()
        if media in (YAML, "text/yaml"):
            return Output("yaml")
    return None


def encode_json(value: object) -> bytes:
    """`value` as compact JSON, in UTF-8. orjson writes it (in C: a list answer's encoding was
    most of what the HTTPS door added to it); what orjson refuses (keys that are not strings,
    integers beyond 64 bits, lone surrogates) the standard library writes, as it always did."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def body_type(content_type: str | None, allowed: tuple[str, ...]) -> str:
    """The media type of a body, if this request may carry it (BodyError 415 otherwise)."""
    media = parse_media(content_type or "")[0] or JSON  # client-go always says; curl may not
    if media == APPLY_PATCH and APPLY_PATCH not in allowed:
        raise BodyError(415, SERVER_SIDE_APPLY)
    if media not in allowed:
        raise BodyError(415, f"the body of the request was in an unknown format - accepted media types "
                             f"include: {', '.join(allowed)}")
    return media


def decode(media: str, data: bytes) -> object:
    """The value a JSON, YAML (or protobuf) body holds, with the object limits checked (BodyError 400)."""
    if media == protobuf.MEDIA_TYPE:
        try:
            return protobuf.decode(data)
        except protobuf.ProtobufError as err:
            raise BodyError(415 if err.unsupported else 400, str(err)) from None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise BodyError(400, "the body is not valid UTF-8") from None
    if not text.strip():
        raise BodyError(400, "the body of the request was empty")
    if media == YAML:
        try:
            docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
        except (yaml.YAMLError, RecursionError) as err:
            raise BodyError(400, f"error converting YAML to JSON: {_yaml_message(err)}") from None
        if len(docs) != 1:
            raise BodyError(400, "the body must hold exactly one YAML document")
        value = docs[0]
    else:
        at = json_too_deep_at(text)
        if at is not None:
            raise BodyError(400, f"the JSON body nests more than {MAX_DEPTH} levels deep (at offset {at})")
        try:
            value = json.loads(text)
        except ValueError as err:
            raise BodyError(400, f"couldn't get version/kind; json parse error: {err}") from None
    try:
        check_shape(value)
    except ShapeError as err:
        raise BodyError(400, f"the body is {err}") from None
    if media == YAML:  # through JSON, as kube-apiserver reads YAML: no dates, no sets, string keys
        try:
            value = json.loads(json.dumps(value))
        except (TypeError, ValueError) as err:
            raise BodyError(400, f"error converting YAML to JSON: {err}") from None
    return value


def _yaml_message(err: BaseException) -> str:
    if isinstance(err, RecursionError):
        return f"nested more than {MAX_DEPTH} levels deep"
    return " ".join(str(err).split())
