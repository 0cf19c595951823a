"""A container's environment, as the kubelet makes it (makeEnvironmentVariables), pure.

    container_env(pod, spec, lookup, pod_ips, host_ips, allocatable=None, services=None) -> Env | EnvError
    service_env(pod, services, static) -> dict[str, str] | EnvError   the Services' variables (Docker links)
    expand(text, env) -> str                      $(VAR) references, as expansion.Expand
    expand_argv(argv, env) -> list[str]           the same over a command line

`envFrom` first, in order (a prefix added to each key; keys that are not valid variable names
skipped, and said in a Warning Event), then `env` in order, each value's `$(VAR)` expanded
against the variables before it (`$$` is a literal `$`, an unknown reference stays as
written). `valueFrom` reads a ConfigMap or Secret key, a pod field or a container resource.
A missing ConfigMap, Secret or key is an EnvError (the container waits in
CreateContainerConfigError with its message) unless the reference is `optional`: then the
variable (or, for envFrom, the whole source) is left out.

The Services' variables (service_env, getServiceEnvVarMap: those of the pod's namespace when
`enableServiceLinks` is not false, and always the `kubernetes` Service of `default`) come
after the container's own, which win over them; `$(VAR)` references see both.
"""
from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from typing import Mapping

from kubemu.api.pod import env_var_name_errors
from kubemu.api.service import has_cluster_ip

from .configsource import CONFIGMAPS, SECRETS, Lookup, Unavailable, not_found, string_data
from .downward import DownwardError, field_value, resource_value

CONFIG_ERROR = "CreateContainerConfigError"     # the container's waiting reason on an EnvError
INVALID_NAMES = "InvalidEnvironmentVariableNames"  # the Warning Event's reason
_KINDS = {CONFIGMAPS: "ConfigMap", SECRETS: "Secret"}
_ENV_FROM_NOUNS = {CONFIGMAPS: "configMap", SECRETS: "secret"}
MASTER_NAMESPACE, MASTER_SERVICES = "default", frozenset({"kubernetes"})
SERVICES_UNSYNCED = "services have not yet been read at least once, cannot construct envvars"


@dataclass(frozen=True)
class Env:
    vars: dict[str, str]
    warnings: list[str] = field(default_factory=list)  # Event messages (INVALID_NAMES, Warning)


@dataclass(frozen=True)
class EnvError:
    message: str


def container_env(pod: dict, spec: dict, lookup: Lookup, pod_ips: list[str], host_ips: list[str],
                  allocatable: dict | None = None, services: dict[str, str] | None = None) -> Env | EnvError:
    """`services`: service_env's variables for the pod."""
    services = services or {}
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
            env[name] = expand(var.get("value") or "", ChainMap(env, services))
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
    return Env({**env, **{k: v for k, v in services.items() if k not in env}}, warnings)


def service_env(pod: dict, services: list[dict] | None, static: bool) -> dict[str, str] | EnvError:
    """getServiceEnvVarMap over `services` (every namespace's; None: not listed yet, which only
    a static pod starts without, as the kubelet's serviceHasSynced check)."""
    if services is None:
        return {} if static else EnvError(SERVICES_UNSYNCED)
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    namespace = meta.get("namespace") or "default"
    links = spec.get("enableServiceLinks") is not False
    chosen: dict[str, dict] = {}
    for svc in services:
        svc_meta = svc.get("metadata") or {}
        name, ns = svc_meta.get("name") or "", svc_meta.get("namespace") or "default"
        if not _has_cluster_ip(svc):
            continue
        # the master Service always, unless the pod's namespace has its own of that name
        if ns == MASTER_NAMESPACE and name in MASTER_SERVICES:
            chosen.setdefault(name, svc)
        elif ns == namespace and links:
            chosen[name] = svc
    env: dict[str, str] = {}
    for name in sorted(chosen):
        env.update(_link_vars(chosen[name]))
    return env


def _has_cluster_ip(svc: dict) -> bool:
    """IsServiceIPSet (not headless, not ExternalName), and ports to name."""
    spec = svc.get("spec") or {}
    return has_cluster_ip(spec) and bool(spec.get("ports"))


def _var_name(name: str) -> str:
    return name.upper().replace("-", "_")


def _link_vars(svc: dict) -> dict[str, str]:
    """FromServices for one Service: <NAME>_SERVICE_HOST/_PORT (+ _PORT_<port name>) and the
    Docker-links variables of each port."""
    spec = svc["spec"]
    ip, ports, prefix = spec["clusterIP"], spec["ports"], _var_name(svc["metadata"]["name"])
    env = {f"{prefix}_SERVICE_HOST": ip, f"{prefix}_SERVICE_PORT": str(ports[0].get("port"))}
    for port in ports:
        if port.get("name"):
            env[f"{prefix}_SERVICE_PORT_{_var_name(port['name'])}"] = str(port.get("port"))
    host = f"[{ip}]" if ":" in ip else ip  # net.JoinHostPort
    for i, port in enumerate(ports):
        protocol = port.get("protocol") or "TCP"
        url = f"{protocol.lower()}://{host}:{port.get('port')}"
        if i == 0:
            env[f"{prefix}_PORT"] = url  # Docker special-cases the first port
        link = f"{prefix}_PORT_{port.get('port')}_{protocol.upper()}"
        env.update({link: url, f"{link}_PROTO": protocol.lower(), f"{link}_PORT": str(port.get("port")),
                    f"{link}_ADDR": ip})
    return env


def expand(text: str, env: Mapping[str, str]) -> str:
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
