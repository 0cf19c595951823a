"""A container's environment, as the kubelet makes it (makeEnvironmentVariables), pure.

    container_env(pod, spec, lookup, pod_ips, host_ips, allocatable=None) -> Env | EnvError
    expand(text, env) -> str                      $(VAR) references, as expansion.Expand
    expand_argv(argv, env) -> list[str]           the same over a command line

`envFrom` first, in order (a prefix added to each key; keys that are not valid variable names
skipped, and said in a Warning Event), then `env` in order, each value's `$(VAR)` expanded
against the variables before it (`$$` is a literal `$`, an unknown reference stays as
written). `valueFrom` reads a ConfigMap or Secret key, a pod field or a container resource.
A missing ConfigMap, Secret or key is an EnvError (the container waits in
CreateContainerConfigError with its message) unless the reference is `optional`: then the
variable (or, for envFrom, the whole source) is left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kubemu.api.pod import env_var_name_errors

from .configsource import CONFIGMAPS, SECRETS, Lookup, Unavailable, not_found, string_data
from .downward import DownwardError, field_value, resource_value

CONFIG_ERROR = "CreateContainerConfigError"     # the container's waiting reason on an EnvError
INVALID_NAMES = "InvalidEnvironmentVariableNames"  # the Warning Event's reason
_KINDS = {CONFIGMAPS: "ConfigMap", SECRETS: "Secret"}
_ENV_FROM_NOUNS = {CONFIGMAPS: "configMap", SECRETS: "secret"}


@dataclass(frozen=True)
class Env:
    vars: dict[str, str]
    warnings: list[str] = field(default_factory=list)  # Event messages (INVALID_NAMES, Warning)


@dataclass(frozen=True)
class EnvError:
    message: str


def container_env(pod: dict, spec: dict, lookup: Lookup, pod_ips: list[str], host_ips: list[str],
                  allocatable: dict | None = None) -> Env | EnvError:
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    env: dict[str, str] = {}
    warnings: list[str] = []

    def get(resource: str, name: str, optional: bool) -> dict | None | EnvError:
        try:
            obj = lookup(resource, namespace, name)
        except Unavailable as err:
            return EnvError(str(err))
        if obj is None and not optional:
            return EnvError(not_found(resource, name))
        return obj

    for source in spec.get("envFrom") or []:
        resource, ref = ((CONFIGMAPS, source["configMapRef"]) if source.get("configMapRef")
                         else (SECRETS, source.get("secretRef") or {}))
        obj = get(resource, ref.get("name", ""), ref.get("optional") is True)
        if isinstance(obj, EnvError):
            return obj
        if obj is None:
            continue
        prefix = source.get("prefix") or ""
        invalid = []
        for k, v in string_data(resource, obj).items():
            if env_var_name_errors(prefix + k):
                invalid.append(prefix + k)
            else:
                env[prefix + k] = v
        if invalid:
            warnings.append(f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom "
                            f"{_ENV_FROM_NOUNS[resource]} {namespace}/{ref.get('name', '')} were "
                            "skipped since they are considered invalid environment variable names.")

    for var in spec.get("env") or []:
        name, source = var["name"], var.get("valueFrom")
        if not source:
            env[name] = expand(var.get("value") or "", env)
            continue
        try:
            if source.get("fieldRef"):
                ref = source["fieldRef"]
                env[name] = field_value(pod, ref.get("fieldPath", ""), pod_ips, host_ips,
                                        ref.get("apiVersion") or "v1")
                continue
            if source.get("resourceFieldRef"):
                ref = source["resourceFieldRef"]
                env[name] = resource_value(ref, pod, ref.get("containerName") or spec["name"],
                                           allocatable)
                continue
        except DownwardError as err:
            return EnvError(str(err))
        resource, ref = ((CONFIGMAPS, source["configMapKeyRef"]) if source.get("configMapKeyRef")
                         else (SECRETS, source.get("secretKeyRef") or {}))
        optional = ref.get("optional") is True
        obj = get(resource, ref.get("name", ""), optional)
        if isinstance(obj, EnvError):
            return obj
        if obj is None:
            continue
        values = string_data(resource, obj)
        if ref.get("key") in values:
            env[name] = values[ref["key"]]
        elif not optional:
            return EnvError(f"couldn't find key {ref.get('key')} in {_KINDS[resource]} "
                            f"{namespace}/{ref.get('name', '')}")
    return Env(env, warnings)


def expand(text: str, env: dict[str, str]) -> str:
    """expansion.Expand with MappingFuncFor(env): `$(NAME)` -> its value (unknown: kept as
    written), `$$` -> `$`, any other `$` kept; an unclosed `$(` is kept."""
    out = []
    checkpoint = cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            nxt = text[cursor + 1]
            if nxt == "$":
                out.append("$")
            elif nxt == "(":
                close = text.find(")", cursor + 2)
                if close == -1:
                    out.append("$(")
                else:
                    ref = text[cursor + 2:close]
                    out.append(env[ref] if ref in env else f"$({ref})")
                    cursor = close - 1
            else:
                out.append("$" + nxt)
            cursor += 1
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def expand_argv(argv: list[str], env: dict[str, str]) -> list[str]:
    """ExpandContainerCommandAndArgs: every argument's $(VAR) references."""
    return [expand(arg, env) for arg in argv]
