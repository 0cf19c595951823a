"""The CNI runtime's decisions (containernetworking/cni SPEC.md), without touching the machine.

The kubelet is the *runtime* of the CNI specification: it reads a network configuration list
(`/etc/cni/net.d` holds it on a real node; kubemu's is `<node dir>/cni/net.d`), and for each
sandbox runs the list's plugins as executables, one per plugin, the command in CNI_COMMAND and
the plugin's configuration as JSON on stdin. What this module decides, as libcni does it:

  * a list is valid: a string `name`, a `cniVersion` kubemu can read the results of, a
    non-empty `plugins` list whose `type`s are bare executable names (a `type` is looked up in
    the bin dirs: a path in it would run anything); a single-plugin `.conf` is a list of one;
  * each plugin gets its own configuration: its object from the list with the list's `name`
    and `cniVersion`, and `prevResult` - on ADD the result of the plugin before it, on CHECK and
    DEL the final result of the ADD (kept by the caller, libcni's cache); kubemu passes no
    capabilities, so no `runtimeConfig`;
  * ADD runs the plugins in order, each one's result feeding the next, and the last result is
    the sandbox's; a failing ADD is undone with a DEL of the whole list before its error is
    raised (a plugin may have left half its work behind); DEL runs in reverse order; CHECK
    runs in order unless the list says `disableCheck` (or predates CHECK, 0.4.0);
  * an error is libcni's: a non-zero exit with `{code, msg, details}` on stdout, or a message
    about what the plugin printed instead; raised as CNIError whose text is libcni's.

Running a plugin is the caller's `execute(Invocation) -> Output` (kubelet/cnishell.py).
"""
from __future__ import annotations

import ipaddress
import json
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

NETWORK_NAME = "kubemu"
CNI_VERSION = "1.0.0"
# Versions whose results have the `ips`/`interfaces` shape parsed here (0.1.0/0.2.0 had `ip4`).
SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0")
CHECK_SINCE = "0.4.0"  # CHECK, and prevResult on DEL, exist from this version on
# The plugins' own PATH: they may run tools (iptables, ...) but inherit nothing of the kubelet's.
PLUGIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Plugins that only ever touch the container's namespace: the only ones that may run with the
# runtime in the host's network namespace (bridge, ptp, ... configure the namespace they run
# in; the bridge plugin's isGateway turns on that namespace's ip_forward).
CONTAINER_ONLY_PLUGINS = frozenset({"loopback"})
_SAFE_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_QUOTE_LIMIT = 300  # how much of a plugin's garbage output an error message quotes


class ConfigError(Exception):
    """The network configuration cannot be used; the text is one line saying why."""


class CNIError(Exception):
    """A plugin failed (or could not be run). `code` is the spec's error code when the plugin
    gave one (1 incompatible version, 6 decode, 7 invalid config, 11 try again, 100+ its own),
    else None. `str()` is libcni's wording."""

    def __init__(self, plugin_type: str, network: str, command: str, code: int | None,
                 msg: str, details: str = ""):
        self.plugin_type = plugin_type
        self.network = network
        self.command = command
        self.code = code
        self.msg = msg
        self.details = details
        text = f"plugin type={_go_quote(plugin_type)} name={_go_quote(network)} failed ({command}): {msg}"
        super().__init__(f"{text}; {details}" if details else text)


@dataclass(frozen=True)
class Conflist:
    name: str
    cni_version: str
    plugins: tuple[dict, ...]
    disable_check: bool = False


@dataclass(frozen=True)
class Result:
    ips: list[str]  # the addresses, without their prefix length
    raw: dict       # the result as the plugin printed it: the next CHECK's and DEL's prevResult


@dataclass(frozen=True)
class Invocation:
    """One run of one plugin: `type` looked up in the bin dirs, `env` its whole environment,
    `config` its stdin."""
    type: str
    command: str  # ADD, CHECK or DEL
    env: dict[str, str]
    config: dict

    @property
    def stdin(self) -> bytes:
        return json.dumps(self.config).encode()


@dataclass(frozen=True)
class Output:
    """What running an invocation gave: the exit status and outputs, or `failure` when the
    runtime could not run the plugin at all (not found, refused, timed out)."""
    returncode: int | None = None  # negative: killed by that signal (subprocess's convention)
    stdout: bytes = b""
    stderr: bytes = b""
    failure: str | None = None


@dataclass(frozen=True)
class Runtime:
    """The runtime parameters of one sandbox (the spec's CNI_* variables)."""
    container_id: str
    netns: str  # "" on a DEL of a sandbox whose namespace is gone
    ifname: str
    bin_dirs: tuple[str, ...]
    args: tuple[tuple[str, str], ...] = field(default=())  # CNI_ARGS, e.g. K8S_POD_NAME


Execute = Callable[[Invocation], Output]

_COMMAND_WORD = {"ADD": "add", "CHECK": "check", "DEL": "delete"}  # libcni's error wording


# --- configuration ---------------------------------------------------------------------------

def load_conflist(text: str | bytes) -> Conflist:
    """Parse a network configuration list, or a single plugin's configuration (a `.conf`,
    made a list of one as libcni's ConfListFromConf does). Raises ConfigError."""
    try:
        raw = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"invalid CNI config: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid CNI config: a JSON object is needed, not {_json_type(raw)}")
    if "plugins" in raw:
        plugins = raw["plugins"]
        if not isinstance(plugins, list):
            raise ConfigError(f'invalid CNI config: "plugins" must be a list, not {_json_type(plugins)}')
        if not plugins:
            raise ConfigError('invalid CNI config: no plugins in list')
    elif "type" in raw:
        plugins = [raw]
    else:
        raise ConfigError('invalid CNI config: neither a "plugins" list nor a plugin "type"')
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError('invalid CNI config: "name" must be a non-empty string')
    version = raw.get("cniVersion")
    if version not in SUPPORTED_VERSIONS:
        raise ConfigError(f'invalid CNI config {_go_quote(name)}: cniVersion {json.dumps(version)} '
                          f'is not supported (supported: {", ".join(SUPPORTED_VERSIONS)})')
    for i, plugin in enumerate(plugins):
        if not isinstance(plugin, dict):
            raise ConfigError(f'invalid CNI config {_go_quote(name)}: plugin {i} is {_json_type(plugin)}, not an object')
        kind = plugin.get("type")
        if not isinstance(kind, str) or not _SAFE_TYPE.fullmatch(kind):
            raise ConfigError(f'invalid CNI config {_go_quote(name)}: plugin {i} has type {json.dumps(kind)}: '
                              f'a plugin type is the bare name of an executable in the CNI bin dirs')
    return Conflist(name, version, tuple(plugins), _flag(raw, "disableCheck", name))


def _flag(raw: dict, key: str, name: str) -> bool:
    """libcni reads its booleans from JSON booleans or the strings "true"/"false"."""
    value = raw.get(key, False)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, bool):
        return value
    raise ConfigError(f'invalid CNI config {_go_quote(name)}: {key} must be true or false, not {json.dumps(value)}')


def kubemu_conflist(pod_cidr: str, cluster_cidr: str, data_dir: str, bridge: str,
                    service_cidr: str | None = None) -> dict:
    """The node's network: a bridge per node (its gateway the podCIDR's first address) with
    host-local IPAM on the podCIDR, and loopback. The bridge's gateway routes the rest of the
    cluster, the fabric forwarding between nodes' bridges, and the service CIDR, where
    kube-proxy's rules in the fabric rewrite ClusterIPs. Every route carries its `gw`:
    plugins 1.1.1's CHECK fails on a route without one ("Expected Route ... not found")."""
    gateway = str(next(ipaddress.IPv4Network(pod_cidr).hosts()))
    routes = [{"dst": cidr, "gw": gateway} for cidr in (cluster_cidr, service_cidr) if cidr]
    return {
        "cniVersion": CNI_VERSION,
        "name": NETWORK_NAME,
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local",
                      "ranges": [[{"subnet": pod_cidr}]],
                      "routes": routes,
                      "dataDir": data_dir}},
            {"type": "loopback"},
        ],
    }


# --- one plugin run --------------------------------------------------------------------------

def invocation(conflist: Conflist, plugin: dict, command: str, rt: Runtime, prev: dict | None) -> Invocation:
    config = {k: v for k, v in plugin.items() if k != "runtimeConfig"}
    config["name"] = conflist.name
    config["cniVersion"] = conflist.cni_version
    if prev is not None:
        config["prevResult"] = prev
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": rt.container_id,
        "CNI_NETNS": rt.netns,
        "CNI_IFNAME": rt.ifname,
        "CNI_ARGS": ";".join(f"{k}={v}" for k, v in (("IgnoreUnknown", "1"),) + rt.args) if rt.args else "",
        "CNI_PATH": ":".join(rt.bin_dirs),
        "PATH": PLUGIN_PATH,
    }
    return Invocation(plugin["type"], command, env, config)


def not_found_message(plugin_type: str, bin_dirs: list[str] | tuple[str, ...]) -> str:
    """libcni's invoke.FindInPath error (Go prints the list as [a b])."""
    return f"failed to find plugin {_go_quote(plugin_type)} in path [{' '.join(bin_dirs)}]"


def host_namespace_refusal(plugin_type: str) -> str | None:
    """Why this plugin must not run in the host's network namespace, or None if it may."""
    if plugin_type in CONTAINER_ONLY_PLUGINS:
        return None
    return (f"refusing to run CNI plugin {_go_quote(plugin_type)} in the host's network namespace: it would "
            f"configure the host itself (bridge plugins also turn on its ip_forward); plugins run inside "
            f"the cluster's fabric namespace")


def plugin_error(output: Output) -> tuple[int | None, str, str]:
    """(code, msg, details) of a failed run, as libcni's RawExec.pluginErr reads it."""
    if output.failure is not None:
        return None, output.failure, ""
    status = _exit_status(output.returncode)
    if not output.stdout.strip():
        if not output.stderr.strip():
            return None, f"netplugin failed with no error message: {status}", ""
        return None, f"netplugin failed: {_quote(output.stderr)}: {status}", ""
    try:
        err = json.loads(output.stdout)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"netplugin failed but error parsing its diagnostic message {_quote(output.stdout)}: {exc}", ""
    if not isinstance(err, dict) or not isinstance(err.get("msg", ""), str):
        return None, f"netplugin failed but its diagnostic message is not a CNI error: {_quote(output.stdout)}", ""
    code = err.get("code")
    details = err.get("details", "")
    return (code if isinstance(code, int) and not isinstance(code, bool) else None,
            err.get("msg") or f"netplugin failed: {status}",
            details if isinstance(details, str) else json.dumps(details))


def parse_result(stdout: bytes) -> Result:
    """A plugin's ADD result (0.3.x, 0.4.0 and 1.0.0 shapes: `ips` entries with an
    `address` in CIDR notation; 0.3.x/0.4.0 add a `version`). Raises ValueError."""
    try:
        raw = json.loads(stdout)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"netplugin returned an invalid result {_quote(stdout)}: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"netplugin returned an invalid result {_quote(stdout)}: not a JSON object")
    ips = raw.get("ips", [])
    if not isinstance(ips, list):
        raise ValueError(f'netplugin returned an invalid result: "ips" is {_json_type(ips)}, not a list')
    addresses = []
    for entry in ips:
        address = entry.get("address") if isinstance(entry, dict) else None
        try:
            addresses.append(str(ipaddress.ip_interface(address).ip))
        except ValueError:
            raise ValueError(f"netplugin returned an invalid result: bad address {json.dumps(address)}") from None
    return Result(addresses, raw)


def _run(conflist: Conflist, plugin: dict, command: str, rt: Runtime, prev: dict | None,
         execute: Execute) -> Output:
    output = execute(invocation(conflist, plugin, command, rt, prev))
    if output.failure is not None or output.returncode != 0:
        code, msg, details = plugin_error(output)
        raise CNIError(plugin["type"], conflist.name, _COMMAND_WORD[command], code, msg, details)
    return output


# --- the list --------------------------------------------------------------------------------

def add(conflist: Conflist, rt: Runtime, execute: Execute) -> Result:
    """ADD every plugin in order; the last result is the sandbox's. On a failure the whole list
    is DELeted (the spec's cleanup; without prevResult: there is no final result) and the
    ADD's error raised."""
    result = None
    for plugin in conflist.plugins:
        try:
            output = _run(conflist, plugin, "ADD", rt, result.raw if result else None, execute)
            try:
                result = parse_result(output.stdout)
            except ValueError as exc:
                raise CNIError(plugin["type"], conflist.name, "add", None, str(exc)) from None
        except CNIError:
            try:
                delete(conflist, rt, execute, None)
            except CNIError:
                pass  # the ADD's error is the one to report; the caller's next ADD or DEL retries this
            raise
    return result


def check(conflist: Conflist, rt: Runtime, execute: Execute, prev: dict) -> None:
    """CHECK every plugin in order against the last ADD's result; raises the first CNIError."""
    if conflist.disable_check or not _at_least(conflist.cni_version, CHECK_SINCE):
        return
    for plugin in conflist.plugins:
        _run(conflist, plugin, "CHECK", rt, prev, execute)


def renamed_sandbox(prev: dict, netns: str) -> dict:
    """prevResult with the `sandbox` of each container interface set to `netns`: the runtime
    names a sandbox's namespace by a descriptor (/proc/self/fd/<n>), whose number differs from
    call to call, and a plugin's CHECK compares that name with the one ADD was given (the
    bridge plugin's "Sandbox in prevResult doesn't match configured netns")."""
    interfaces = prev.get("interfaces")
    if not isinstance(interfaces, list):
        return prev
    return {**prev, "interfaces": [{**i, "sandbox": netns} if isinstance(i, dict) and i.get("sandbox") else i
                                   for i in interfaces]}


def delete(conflist: Conflist, rt: Runtime, execute: Execute, prev: dict | None) -> None:
    """DEL every plugin in reverse order (the last ADD's result as prevResult, if known);
    stops at and raises the first CNIError, as libcni does (DEL is idempotent: retry it)."""
    if not _at_least(conflist.cni_version, CHECK_SINCE):
        prev = None
    for plugin in reversed(conflist.plugins):
        _run(conflist, plugin, "DEL", rt, prev, execute)


# --- helpers ---------------------------------------------------------------------------------

def _at_least(version: str, minimum: str) -> bool:
    return tuple(map(int, version.split("."))) >= tuple(map(int, minimum.split(".")))


def _exit_status(returncode: int | None) -> str:
    """Go's exec.ExitError wording: "exit status 1", "signal: killed"."""
    if returncode is not None and returncode < 0:
        try:
            return f"signal: {signal.strsignal(-returncode).lower()}"
        except (ValueError, AttributeError):
            return f"signal: {-returncode}"
    return f"exit status {returncode}"


def _quote(data: bytes) -> str:
    """Go's %q of a plugin's output, cut short: an error stays one readable line."""
    text = data.decode(errors="replace").strip()
    if len(text) > _QUOTE_LIMIT:
        text = text[:_QUOTE_LIMIT] + "..."
    return json.dumps(text, ensure_ascii=False)


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")
