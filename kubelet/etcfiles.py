"""The files the kubelet writes for a pod's containers: /etc/hosts, /etc/hostname and
/etc/resolv.conf (bind-mounted over the container's once mounts land), pure but for `write`.

    hosts(pod, pod_ips, node_hosts=None, cluster_domain=...) -> str
        the kubelet's managed hosts file; a hostNetwork pod gets the node's (node_hosts)
    hostname(pod) -> str
    resolv_conf(pod, node_resolv, cluster_dns, cluster_domain=...) -> ResolvConf(text, warnings)
    write(pod_dir, name, text) -> bool        in place, only when it changed

As the kubelet makes them (managedHostsFileContent, nodeHostsFileContent, GetPodDNS) and as
containerd lays out resolv.conf. `write` rewrites a file in place (truncate and write), never
by rename: a bind mount holds the file's inode, so a rename would leave containers reading
the old one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from kubemu.netplan import CLUSTER_DOMAIN

from .holder import pod_hostname

HOSTS, HOSTNAME, RESOLV_CONF = "etc-hosts", "etc-hostname", "resolv.conf"  # in the pod dir
MAX_NAMESERVERS = 3       # validation.MaxDNSNameservers (the libc resolver reads 3)
MAX_SEARCHES = 32         # validation.MaxDNSSearchPaths
MAX_SEARCH_CHARS = 2048   # validation.MaxDNSSearchListChars
MAX_SEARCH_LENGTH = 253   # a search domain longer than a DNS-1123 subdomain is dropped
CLUSTER_NDOTS = "ndots:5"
MISSING_CLUSTER_DNS = "MissingClusterDNS"  # the Warning Events' reasons
DNS_CONFIG_FORMING = "DNSConfigForming"
_HOSTS_HEADER = "# Kubernetes-managed hosts file.\n"
_HOSTS_HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"
_LOCALHOST = ("127.0.0.1\tlocalhost\n"
              "::1\tlocalhost ip6-localhost ip6-loopback\n"
              "fe00::0\tip6-localnet\n"
              "fe00::0\tip6-mcastprefix\n"
              "fe00::1\tip6-allnodes\n"
              "fe00::2\tip6-allrouters\n")


def domain(pod: dict, cluster_domain: str = CLUSTER_DOMAIN) -> str:
    """`<subdomain>.<namespace>.svc.<cluster domain>`, or "" without a subdomain."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    if not spec.get("subdomain"):
        return ""
    return f"{spec['subdomain']}.{meta.get('namespace') or 'default'}.svc.{cluster_domain}"


def hosts(pod: dict, pod_ips: list[str], node_hosts: str | None = None,
          cluster_domain: str = CLUSTER_DOMAIN) -> str:
    spec = pod.get("spec") or {}
    if spec.get("hostNetwork") is True:
        return _HOSTS_HEADER_HOST_NETWORK + (node_hosts or "") + _aliases(spec)
    name, dom = pod_hostname(pod), domain(pod, cluster_domain)
    entries = "".join(f"{ip}\t{name}.{dom}\t{name}\n" if dom else f"{ip}\t{name}\n"
                      for ip in pod_ips)
    return _HOSTS_HEADER + _LOCALHOST + entries + _aliases(spec)


def _aliases(spec: dict) -> str:
    aliases = spec.get("hostAliases") or []
    if not aliases:
        return ""
    return "\n# Entries added by HostAliases.\n" + "".join(
        f"{a.get('ip', '')}\t{chr(9).join(a.get('hostnames') or [])}\n" for a in aliases)


def hostname(pod: dict) -> str:
    return pod_hostname(pod) + "\n"


@dataclass(frozen=True)
class ResolvConf:
    text: str
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (Event reason, message)


@dataclass(frozen=True)
class _Dns:
    nameservers: list[str]
    searches: list[str]
    options: list[str]


def parse_resolv_conf(text: str) -> _Dns:
    """The nameserver, search and options lines of a resolv.conf, as the kubelet reads its
    --resolv-conf (parseResolvConf): nameservers add up, the last search and the last options
    line win, a search domain's trailing dot is dropped (a lone "." is no domain)."""
    nameservers, searches, options = [], [], []
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] == "nameserver" and len(fields) > 1:
            nameservers.append(fields[1])
        elif fields[0] == "search":
            searches = [s.removesuffix(".") for s in fields[1:] if s != "."]
        elif fields[0] == "options":
            options = fields[1:]
    return _Dns(nameservers, searches, options)


def resolv_conf(pod: dict, node_resolv: str, cluster_dns: list[str],
                cluster_domain: str = CLUSTER_DOMAIN) -> ResolvConf:
    """GetPodDNS: ClusterFirst (ClusterFirstWithHostNet for hostNetwork pods) points at the
    cluster DNS only, with the namespace's search path before the node's (none without a
    cluster domain) and ndots:5; without a cluster DNS it falls back to Default, and says so;
    a hostNetwork pod's ClusterFirst is Default; Default is the node's; None starts empty.
    `dnsConfig` is merged into all of them, then the limits cut."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    warnings = []
    node_first = policy == "Default" or (policy == "ClusterFirst" and spec.get("hostNetwork") is True)
    # ClusterFirstWithHostNet, ClusterFirst off the host network (and any unknown policy, as
    # the kubelet's getPodDNSType falls back)
    cluster_first = policy != "None" and not node_first
    if cluster_first and not cluster_dns:
        warnings.append((MISSING_CLUSTER_DNS, f'pod: "{meta.get("name")}_{meta.get("namespace")}'
                         f'({meta.get("uid")})". kubelet does not have ClusterDNS IP configured '
                         'and cannot create Pod using "ClusterFirst" policy. Falling back to '
                         '"Default" policy.'))
        cluster_first = False
    if policy == "None":
        dns = _Dns([], [], [])
    elif cluster_first:
        node = parse_resolv_conf(node_resolv)
        namespace = meta.get("namespace") or "default"
        cluster_search = ([f"{namespace}.svc.{cluster_domain}", f"svc.{cluster_domain}", cluster_domain]
                          if cluster_domain else [])
        dns = _Dns(list(cluster_dns), _unique(cluster_search + node.searches), [CLUSTER_NDOTS])
    else:
        dns = parse_resolv_conf(node_resolv)
    dns = _merge(dns, spec.get("dnsConfig") or {})
    nameservers = dns.nameservers[:MAX_NAMESERVERS]
    if nameservers != dns.nameservers:
        warnings.append((DNS_CONFIG_FORMING, "Nameserver limits were exceeded, some nameservers "
                         "have been omitted, the applied nameserver line is: "
                         + " ".join(nameservers)))
    searches = _cut_searches(dns.searches)
    if searches != dns.searches:
        warnings.append((DNS_CONFIG_FORMING, "Search Line limits were exceeded, some search "
                         "paths have been omitted, the applied search line is: "
                         + " ".join(searches)))
    # as containerd lays the file out (parseDNSOptions)
    lines = ["search " + " ".join(searches)] if searches else []
    lines += [f"nameserver {ns}" for ns in nameservers]
    if dns.options:
        lines.append("options " + " ".join(dns.options))
    return ResolvConf("".join(line + "\n" for line in lines), warnings)


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _merge(dns: _Dns, config: dict) -> _Dns:
    """appendDNSConfig: nameservers and searches added (without repeats), options merged by
    name (the pod's value winning; an empty value is the bare name)."""
    options: dict[str, str] = {}
    for opt in dns.options:
        name, _sep, value = opt.partition(":")
        options[name] = value
    for opt in config.get("options") or []:
        options[opt.get("name") or ""] = opt.get("value") or ""
    return _Dns(_unique(dns.nameservers + list(config.get("nameservers") or [])),
                _unique(dns.searches + list(config.get("searches") or [])),
                [f"{name}:{value}" if value else name for name, value in options.items()])


def _cut_searches(searches: list[str]) -> list[str]:
    """formDNSSearchFitsLimits: at most 32 domains, none longer than 253 characters (some
    resolvers abort on one), then the last ones dropped until the line is at most 2048."""
    out = [s for s in searches[:MAX_SEARCHES] if len(s) <= MAX_SEARCH_LENGTH]
    while out and len(" ".join(out)) > MAX_SEARCH_CHARS:
        out.pop()
    return out


def write(pod_dir: str, name: str, text: str) -> bool:
    """`<pod dir>/<name>` holds `text`, mode 0644; True when it was written."""
    path = os.path.join(pod_dir, name)
    data = text.encode()
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        os.fchmod(fd, 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return True
