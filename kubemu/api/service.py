"""Defaulting and validation of Service and Endpoints (v1) and EndpointSlice
(discovery.k8s.io/v1), with objects.py's contract:

    default_service(obj) / default_endpoints(obj) / default_endpointslice(obj) -> a new object
    validate_service(obj, strict=True) / validate_endpoints / validate_endpointslice
                                                                    -> [FieldError, ...]
    validate_service_update(old, new) / validate_endpointslice_update(old, new)

As kube-apiserver has them (pkg/apis/core/v1 defaults, pkg/apis/core/validation ValidateService,
ValidateEndpoints, pkg/apis/discovery/validation), for a single-stack IPv4 cluster:

* A Service's type is ClusterIP (default), NodePort, LoadBalancer or ExternalName; its ports
  need a protocol (TCP by default), a port 1-65535, a targetPort (the port by default; a number
  or an IANA_SVC_NAME), a DNS-label name (required when there are several, unique), and no
  port+protocol twice. nodePort is for NodePort and LoadBalancer Services (the apiserver's
  allocator checks its range); `clusterIP: None` (headless) is for ClusterIP Services.
  sessionAffinity None or ClientIP (timeoutSeconds 1..86400, default 10800);
  externalTrafficPolicy (externally-accessible Services only: NodePort, LoadBalancer, or
  ClusterIP with externalIPs; Cluster by default) and internalTrafficPolicy Cluster or Local;
  healthCheckNodePort only for a LoadBalancer Service with externalTrafficPolicy Local (the
  apiserver's allocator gives one when it is left out).
  clusterIP and clusterIPs are kept in step by defaulting; on update the clusterIP is immutable
  (ExternalName has none to keep).
* Endpoint addresses may be loopback addresses: pods in kubemu's host network mode have
  podIP 127.0.0.1 (Kubernetes forbids loopback endpoints, which cannot exist there).
"""
from __future__ import annotations

import ipaddress
from typing import Any, Callable

from .fielderrors import (FieldError, child, duplicate, forbidden, index, invalid, not_supported,
                          required)
from .meta import TYPES, Checker, register, table
from .pod import (BOOL, INT, LIST, OBJ, STR, STRS, _absent, _fill, _is_int, _labels, _name_rule,
                  _port_number, dns1035_label_errors, dns1123_label_errors, dns1123_subdomain_errors, field_types,
                  port_name_errors)

SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
NODE_PORT_TYPES = ("NodePort", "LoadBalancer")
PROTOCOLS = ("SCTP", "TCP", "UDP")
AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")
IP_FAMILIES = ("IPv4", "IPv6")
IP_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
NONE = "None"  # a headless Service's clusterIP
DEFAULT_AFFINITY_TIMEOUT = 10800
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # discoveryv1.LabelServiceName: a slice's Service
LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
MAX_AFFINITY_TIMEOUT = 86400
MAX_SLICE_ENDPOINTS = 1000
MAX_SLICE_PORTS = 100
MAX_ENDPOINT_ADDRESSES = 100
_IP_MSG = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
_META = {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta"}

register(
    Service=table("apiVersion kind metadata spec status",
                  types={**_META, "spec": "ServiceSpec", "status": "ServiceStatus"}),
    ServiceSpec=table("""ports selector clusterIP clusterIPs type externalIPs sessionAffinity
                      loadBalancerIP loadBalancerSourceRanges externalName externalTrafficPolicy
                      healthCheckNodePort publishNotReadyAddresses sessionAffinityConfig ipFamilies
                      ipFamilyPolicy allocateLoadBalancerNodePorts loadBalancerClass
                      internalTrafficPolicy trafficDistribution""",
                      {"ports": LIST, "clusterIP": STR, "clusterIPs": STRS, "externalIPs": STRS,
                       "loadBalancerIP": STR, "loadBalancerSourceRanges": STRS,
                       "externalName": STR, "healthCheckNodePort": INT,
                       "publishNotReadyAddresses": BOOL, "ipFamilies": STRS,
                       "allocateLoadBalancerNodePorts": BOOL, "loadBalancerClass": STR,
                       "trafficDistribution": STR},
                      {"type": SERVICE_TYPES, "sessionAffinity": AFFINITIES,
                       "ipFamilyPolicy": IP_FAMILY_POLICIES},
                      """ports:[]ServicePort selector:map[string]string clusterIP:string
                      clusterIPs:[]string type:string externalIPs:[]string sessionAffinity:string
                      loadBalancerIP:string loadBalancerSourceRanges:[]string externalName:string
                      externalTrafficPolicy:string healthCheckNodePort:integer
                      publishNotReadyAddresses:boolean sessionAffinityConfig:SessionAffinityConfig
                      ipFamilies:[]string ipFamilyPolicy:string
                      allocateLoadBalancerNodePorts:boolean loadBalancerClass:string
                      internalTrafficPolicy:string trafficDistribution:string"""),
    ServicePort=table("name protocol appProtocol port targetPort nodePort",
                      {"name": STR, "appProtocol": STR},
                      types="""name:string protocol:string appProtocol:string port:integer
                      targetPort:IntOrString nodePort:integer"""),
    SessionAffinityConfig=table("clientIP", types="clientIP:ClientIPConfig"),
    ClientIPConfig=table("timeoutSeconds", types="timeoutSeconds:integer"),
    ServiceStatus=table("loadBalancer conditions", {"loadBalancer": OBJ, "conditions": LIST},
                        types="loadBalancer:LoadBalancerStatus conditions:[]Condition"),

    Endpoints=table("apiVersion kind metadata subsets", {"subsets": LIST},
                    types={**_META, "subsets": "[]EndpointSubset"}),
    EndpointSubset=table("addresses notReadyAddresses ports",
                         {"addresses": LIST, "notReadyAddresses": LIST, "ports": LIST},
                         types="""addresses:[]EndpointAddress notReadyAddresses:[]EndpointAddress
                         ports:[]EndpointPort"""),
    EndpointAddress=table("ip hostname nodeName targetRef",
                          {"ip": STR, "hostname": STR, "nodeName": STR, "targetRef": OBJ},
                          types="""ip:string hostname:string nodeName:string
                          targetRef:ObjectReference"""),
    EndpointPort=table("name port protocol appProtocol", {"name": STR, "appProtocol": STR},
                       types="name:string port:integer protocol:string appProtocol:string"),

    EndpointSlice=table("apiVersion kind metadata addressType endpoints ports",
                        {"endpoints": LIST, "ports": LIST},
                        types={**_META, "addressType": "string", "endpoints": "[]Endpoint",
                               "ports": "[]EndpointPort"}),
    Endpoint=table("addresses conditions hostname targetRef nodeName zone hints deprecatedTopology",
                   {"addresses": STRS, "hostname": STR, "targetRef": OBJ, "nodeName": STR,
                    "zone": STR, "hints": OBJ, "deprecatedTopology": OBJ},
                   types="""addresses:[]string conditions:EndpointConditions hostname:string
                   targetRef:ObjectReference nodeName:string zone:string hints:EndpointHints
                   deprecatedTopology:map[string]string"""),
    EndpointConditions=table("ready serving terminating",
                             {"ready": BOOL, "serving": BOOL, "terminating": BOOL},
                             types="ready:boolean serving:boolean terminating:boolean"),
)

# Types described for OpenAPI and `kubectl explain` but not validated field by field.
TYPES.update({kind: field_types(text) for kind, text in {
    "LoadBalancerStatus": "ingress:[]LoadBalancerIngress",
    "LoadBalancerIngress": "ip:string hostname:string ipMode:string ports:[]PortStatus",
    "PortStatus": "port:integer protocol:string error:string",
    "Condition": """type:string status:string observedGeneration:integer
        lastTransitionTime:Time reason:string message:string""",
    "EndpointHints": "forZones:[]ForZone forNodes:[]ForNode",
    "ForZone": "name:string",
    "ForNode": "name:string",
}.items()})


# --- defaults -----------------------------------------------------------------------------------

def _defaulted(obj: Any, fill: Callable[[dict], None]) -> Any:
    from .objects import _defaulted as frame  # objects.py imports this module for its tables
    return frame(obj, fill, namespaced=True)


def externally_accessible(spec: dict) -> bool:
    """service.ExternallyAccessible: reachable from outside the cluster's pods, so
    externalTrafficPolicy applies: NodePort, LoadBalancer, or ClusterIP with externalIPs."""
    stype = spec.get("type") or "ClusterIP"
    external_ips = spec.get("externalIPs")
    return stype in NODE_PORT_TYPES or (stype == "ClusterIP" and isinstance(external_ips, list)
                                        and bool(external_ips))


def needs_health_check(spec: dict) -> bool:
    """service.NeedsHealthCheck: a LoadBalancer Service with externalTrafficPolicy Local has a
    healthCheckNodePort (its load balancer asks each node whether it has a local endpoint)."""
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def default_service(obj: Any) -> Any:
    """SetDefaults_Service and the strategy's clusterIP/clusterIPs syncing: type ClusterIP,
    sessionAffinity None (ClientIP: timeoutSeconds 10800), each port's protocol TCP and targetPort
    its port, externalTrafficPolicy Cluster when externally accessible (and
    allocateLoadBalancerNodePorts true for LoadBalancer), internalTrafficPolicy Cluster, and but
    for ExternalName ipFamilies [IPv4], ipFamilyPolicy SingleStack, clusterIPs [clusterIP]."""
    def fill(svc: dict) -> None:
        spec = svc.get("spec")
        if spec is None:
            spec = svc["spec"] = {}
        if not isinstance(spec, dict):
            return
        _fill(spec, {"type": "ClusterIP", "sessionAffinity": "None"})
        if spec["sessionAffinity"] == "ClientIP":
            config = spec.get("sessionAffinityConfig")
            if config is None:
                config = spec["sessionAffinityConfig"] = {}
            if isinstance(config, dict):
                client = config.get("clientIP")
                if client is None:
                    client = config["clientIP"] = {}
                if isinstance(client, dict):
                    _fill(client, {"timeoutSeconds": DEFAULT_AFFINITY_TIMEOUT})
        for port in spec["ports"] if isinstance(spec.get("ports"), list) else []:
            if isinstance(port, dict):
                _fill(port, {"protocol": "TCP"})
                if port.get("targetPort") in (None, 0, ""):
                    port["targetPort"] = port.get("port")
        stype = spec["type"]
        if externally_accessible(spec):
            _fill(spec, {"externalTrafficPolicy": "Cluster"})
        if stype == "LoadBalancer":
            _fill(spec, {"allocateLoadBalancerNodePorts": True})
        if stype == "ExternalName":
            return
        _fill(spec, {"internalTrafficPolicy": "Cluster", "ipFamilyPolicy": "SingleStack"})
        if spec.get("ipFamilies") is None:
            spec["ipFamilies"] = ["IPv4"]
        ip, ips = spec.get("clusterIP"), spec.get("clusterIPs")
        if not _absent(ip) and not ips:
            spec["clusterIPs"] = [ip]
        elif _absent(ip) and isinstance(ips, list) and ips and isinstance(ips[0], str):
            spec["clusterIP"] = ips[0]
    return _defaulted(obj, fill)


def default_endpoints(obj: Any) -> Any:
    """Each port's protocol TCP."""
    def fill(ep: dict) -> None:
        for subset in ep["subsets"] if isinstance(ep.get("subsets"), list) else []:
            if isinstance(subset, dict) and isinstance(subset.get("ports"), list):
                for port in subset["ports"]:
                    if isinstance(port, dict):
                        _fill(port, {"protocol": "TCP"})
    return _defaulted(obj, fill)


def default_endpointslice(obj: Any) -> Any:
    """Each port's protocol TCP and name "" (discovery/v1's defaults)."""
    def fill(eps: dict) -> None:
        for port in eps["ports"] if isinstance(eps.get("ports"), list) else []:
            if isinstance(port, dict):
                _fill(port, {"protocol": "TCP"})
                if port.get("name") is None:
                    port["name"] = ""
    return _defaulted(obj, fill)


# --- Service ------------------------------------------------------------------------------------

def _validate(obj: Any, kind: str, strict: bool, body: Callable[[Checker, dict], None], **kw):
    from .objects import _validate as frame  # see _defaulted
    return frame(obj, kind, strict, body, **kw)


def is_headless(spec: dict) -> bool:
    return spec.get("clusterIP") == NONE


def has_cluster_ip(spec: dict) -> bool:
    """IsServiceIPSet: the Service has a virtual IP (not headless, not ExternalName)."""
    return spec.get("clusterIP") not in (None, "", NONE)


def endpoint_ready(endpoint: dict) -> bool:
    """An EndpointSlice endpoint's `ready`: unset means ready (discovery/v1: consumers read an
    unknown state as ready)."""
    return (endpoint.get("conditions") or {}).get("ready") is not False


def _ip_errors(value: str) -> list[str]:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return [_IP_MSG]
    return []


def validate_service(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, svc: dict) -> None:
        spec = c.obj(svc.get("spec"), "spec", "ServiceSpec")
        if spec is None:
            if svc.get("spec") is None:
                c.add(required("spec.ports"))
            return
        stype = spec.get("type") or "ClusterIP"
        if stype not in SERVICE_TYPES:
            return  # reported by the enum check
        _cluster_ips(c, spec, stype)
        _ports(c, spec, stype)
        _labels(c, spec.get("selector"), "spec.selector")
        external_ips = spec.get("externalIPs") if isinstance(spec.get("externalIPs"), list) else []
        for i, ip in enumerate(external_ips):
            if isinstance(ip, str):
                for msg in _ip_errors(ip):
                    c.invalid(index("spec.externalIPs", i), ip, msg)
        _affinity(c, spec)
        _traffic_policies(c, spec, stype)
        if stype == "ExternalName":
            name = spec.get("externalName")
            if _absent(name):
                c.add(required("spec.externalName"))
            elif isinstance(name, str):
                _name_rule(c, name.removesuffix("."), "spec.externalName", dns1123_subdomain_errors)
        c.obj(svc.get("status"), "status", "ServiceStatus")
    return _validate(obj, "Service", strict, body, name_rule=dns1035_label_errors)


def _cluster_ips(c: Checker, spec: dict, stype: str) -> None:
    """ValidateServiceClusterIPsRelatedFields, single-stack IPv4."""
    ip, ips = spec.get("clusterIP"), spec.get("clusterIPs")
    ips = [v for v in ips if isinstance(v, str)] if isinstance(ips, list) else []
    if stype == "ExternalName":
        if not _absent(ip) or ips:
            c.add(forbidden("spec.clusterIP", "may not be set for ExternalName services"))
        return
    if isinstance(ip, str) and ip:
        if not ips:
            c.add(required("spec.clusterIPs"))
        elif ips[0] != ip:
            c.invalid("spec.clusterIPs", ips, "first value must match `clusterIP`")
    elif ips:
        c.invalid("spec.clusterIPs", ips, "must be empty when `clusterIP` is not specified")
    if len(ips) > 1:
        c.invalid("spec.clusterIPs", ips, "may specify no more than one IP for each IP family")
    for i, value in enumerate(ips):
        if i == 0 and value == NONE:
            if stype in NODE_PORT_TYPES:
                c.invalid(index("spec.clusterIPs", 0), value,
                          f"may not be set to 'None' for {stype} services")
            continue
        for msg in _ip_errors(value):
            c.invalid(index("spec.clusterIPs", i), value, msg)
        if not _ip_errors(value) and ipaddress.ip_address(value).version == 6:
            c.invalid(index("spec.clusterIPs", i), value,
                      "expected an IPv4 value as indicated by `ipFamilies[0]`")
    families = spec.get("ipFamilies") if isinstance(spec.get("ipFamilies"), list) else []
    seen: set[str] = set()
    for i, family in enumerate(families):
        if not isinstance(family, str):
            continue
        if family not in IP_FAMILIES:
            c.add(not_supported(index("spec.ipFamilies", i), family, IP_FAMILIES))
        elif family != "IPv4":
            c.invalid(index("spec.ipFamilies", i), family, "not configured on this cluster")
        if family in seen:
            c.add(duplicate(index("spec.ipFamilies", i), family))
        seen.add(family)
    if spec.get("ipFamilyPolicy") == "RequireDualStack":
        c.invalid("spec.ipFamilyPolicy", "RequireDualStack",
                  "this cluster is not configured for dual-stack services")


def _ports(c: Checker, spec: dict, stype: str) -> None:
    ports = c.array(spec.get("ports"), "spec.ports")
    if not ports and stype != "ExternalName" and not is_headless(spec):
        c.add(required("spec.ports"))
    ports = ports or []
    names: set[str] = set()
    keys: set[tuple] = set()
    node_ports: set[tuple] = set()
    for p_path, port in c.each_obj(ports, "spec.ports", "ServicePort"):
        name = port.get("name")
        if _absent(name):
            if len(ports) > 1:
                c.add(required(child(p_path, "name")))
        elif isinstance(name, str):
            _name_rule(c, name, child(p_path, "name"), dns1123_label_errors)
            if name in names:
                c.add(duplicate(child(p_path, "name"), name))
            names.add(name)
        number = port.get("port", 0)
        if c.integer(number, child(p_path, "port")) is not None:
            _port_number(c, number, child(p_path, "port"))
        protocol = port.get("protocol")
        if _absent(protocol):
            c.add(required(child(p_path, "protocol")))
        elif protocol not in PROTOCOLS:
            c.add(not_supported(child(p_path, "protocol"), protocol, PROTOCOLS))
        target = port.get("targetPort")
        if target is not None:
            _port_number_or_name(c, target, child(p_path, "targetPort"))
        node_port = port.get("nodePort")
        np_path = child(p_path, "nodePort")
        if c.integer(node_port, np_path):
            if stype not in NODE_PORT_TYPES:
                c.add(forbidden(np_path, "may not be used when `type` is 'ClusterIP'"))
            elif (node_port, protocol) in node_ports:
                c.add(duplicate(np_path, node_port))
            node_ports.add((node_port, protocol))
        key = (number, protocol)
        if _is_int(number) and isinstance(protocol, str):
            if key in keys:
                c.add(duplicate(p_path, {"port": number, "protocol": protocol}))
            keys.add(key)


def _port_number_or_name(c: Checker, value: Any, path: str) -> None:
    """ValidatePortNumOrName."""
    if _is_int(value):
        _port_number(c, value, path)
    elif isinstance(value, str):
        _name_rule(c, value, path, port_name_errors)
    else:
        c.invalid(path, value, "must be an integer or a string")


def _affinity(c: Checker, spec: dict) -> None:
    affinity = spec.get("sessionAffinity") or "None"
    config_path = "spec.sessionAffinityConfig"
    config = c.obj(spec.get("sessionAffinityConfig"), config_path, "SessionAffinityConfig")
    if affinity == "None" and config:
        c.invalid(config_path, config, "must not be set when session affinity is None")
    if affinity != "ClientIP" or config is None:
        return
    client_path = child(config_path, "clientIP")
    client = c.obj(config.get("clientIP"), client_path, "ClientIPConfig")
    if client is None:
        return
    t_path = child(client_path, "timeoutSeconds")
    timeout = c.integer(client.get("timeoutSeconds"), t_path)
    if timeout is not None and not 0 < timeout <= MAX_AFFINITY_TIMEOUT:
        c.invalid(t_path, timeout, f"must be greater than 0 and less than {MAX_AFFINITY_TIMEOUT}")


def _traffic_policies(c: Checker, spec: dict, stype: str) -> None:
    """validateServiceExternalTrafficPolicy and the internal one. A needed healthCheckNodePort
    left out is not an error here: the apiserver allocates it after validation."""
    external = spec.get("externalTrafficPolicy")
    if externally_accessible(spec):
        if external == "":
            c.add(required("spec.externalTrafficPolicy"))
        elif external is not None and external not in TRAFFIC_POLICIES:
            c.add(not_supported("spec.externalTrafficPolicy", external, TRAFFIC_POLICIES))
    elif not _absent(external):
        c.invalid("spec.externalTrafficPolicy", external,
                  "may only be set for externally-accessible services")
    health_path = "spec.healthCheckNodePort"
    health = spec.get("healthCheckNodePort")
    if _is_int(health) and health:  # its type is the table's check
        if not needs_health_check(spec):
            c.invalid(health_path, health, "may only be set when `type` is 'LoadBalancer' and "
                      "`externalTrafficPolicy` is 'Local'")
        else:
            _port_number(c, health, health_path)
    internal = spec.get("internalTrafficPolicy")
    if stype == "ExternalName" or internal is None:
        return
    if internal == "":
        c.add(required("spec.internalTrafficPolicy"))
    elif internal not in TRAFFIC_POLICIES:
        c.add(not_supported("spec.internalTrafficPolicy", internal, TRAFFIC_POLICIES))


def validate_service_update(old: Any, new: Any) -> list[FieldError]:
    """ValidateServiceUpdate: the clusterIP (and clusterIPs) of a Service that has one stay,
    unless the Service is or becomes an ExternalName one."""
    old_spec = old.get("spec") if isinstance(old, dict) and isinstance(old.get("spec"), dict) else {}
    new_spec = new.get("spec") if isinstance(new, dict) and isinstance(new.get("spec"), dict) else {}
    if "ExternalName" in (old_spec.get("type"), new_spec.get("type")):
        return []
    before, after = old_spec.get("clusterIP") or "", new_spec.get("clusterIP") or ""
    if before != after:
        return [invalid("spec.clusterIP", after, "field is immutable")]
    return []


# --- Endpoints ----------------------------------------------------------------------------------

def validate_endpoints(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateEndpoints (loopback addresses allowed, see the module docstring)."""
    def body(c: Checker, ep: dict) -> None:
        subsets = c.array(ep.get("subsets"), "subsets") or []
        for s_path, subset in c.each_obj(subsets, "subsets", "EndpointSubset"):
            ready = c.array(subset.get("addresses"), child(s_path, "addresses")) or []
            not_ready = c.array(subset.get("notReadyAddresses"),
                                child(s_path, "notReadyAddresses")) or []
            if not ready and not not_ready:
                c.add(required(s_path, "must specify `addresses` or `notReadyAddresses`"))
            for field, items in (("addresses", ready), ("notReadyAddresses", not_ready)):
                for a_path, address in c.each_obj(items, child(s_path, field), "EndpointAddress"):
                    _endpoint_address(c, address, a_path)
            ports = c.array(subset.get("ports"), child(s_path, "ports")) or []
            names: set[str] = set()
            for p_path, port in c.each_obj(ports, child(s_path, "ports"), "EndpointPort"):
                _endpoint_port(c, port, p_path, names, require_name=len(ports) > 1,
                               allow_zero=False)
    return _validate(obj, "Endpoints", strict, body)


def _endpoint_address(c: Checker, address: dict, path: str) -> None:
    ip = address.get("ip")
    if _absent(ip):
        c.add(required(child(path, "ip")))
    elif isinstance(ip, str):
        for msg in _ip_errors(ip):
            c.invalid(child(path, "ip"), ip, msg)
    _host_and_node(c, address, path)


def _host_and_node(c: Checker, obj: dict, path: str) -> None:
    hostname, node = obj.get("hostname"), obj.get("nodeName")
    if isinstance(hostname, str) and hostname:
        _name_rule(c, hostname, child(path, "hostname"), dns1123_label_errors)
    if isinstance(node, str) and node:
        _name_rule(c, node, child(path, "nodeName"), dns1123_subdomain_errors)


def _endpoint_port(c: Checker, port: dict, path: str, names: set[str], *, require_name: bool,
                   allow_zero: bool) -> None:
    name = port.get("name")
    if _absent(name):
        if require_name:
            c.add(required(child(path, "name")))
    elif isinstance(name, str):
        _name_rule(c, name, child(path, "name"), dns1123_label_errors)
        if name in names:
            c.add(duplicate(child(path, "name"), name))
        names.add(name)
    number = port.get("port")
    number = 0 if number is None and not allow_zero else number
    if c.integer(number, child(path, "port")) is not None and not (allow_zero and number == 0):
        _port_number(c, number, child(path, "port"))
    protocol = port.get("protocol")
    if _absent(protocol):
        c.add(required(child(path, "protocol")))
    elif protocol not in PROTOCOLS:
        c.add(not_supported(child(path, "protocol"), protocol, PROTOCOLS))


# --- EndpointSlice ------------------------------------------------------------------------------

def validate_endpointslice(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateEndpointSlice (loopback addresses allowed, see the module docstring)."""
    def body(c: Checker, eps: dict) -> None:
        address_type = eps.get("addressType")
        if _absent(address_type):
            c.add(required("addressType"))
        elif address_type not in ADDRESS_TYPES:
            c.add(not_supported("addressType", address_type, ADDRESS_TYPES))
        endpoints = c.array(eps.get("endpoints"), "endpoints") or []
        if len(endpoints) > MAX_SLICE_ENDPOINTS:
            c.add(FieldError("endpoints", "Too many", f"must have at most {MAX_SLICE_ENDPOINTS} items",
                             len(endpoints)))
        for e_path, endpoint in c.each_obj(endpoints[:MAX_SLICE_ENDPOINTS], "endpoints", "Endpoint"):
            _slice_endpoint(c, endpoint, e_path, address_type)
        ports = c.array(eps.get("ports"), "ports") or []
        if len(ports) > MAX_SLICE_PORTS:
            c.add(FieldError("ports", "Too many", f"must have at most {MAX_SLICE_PORTS} items",
                             len(ports)))
        names: set[str] = set()
        for p_path, port in c.each_obj(ports[:MAX_SLICE_PORTS], "ports", "EndpointPort"):
            _endpoint_port(c, port, p_path, names, require_name=False, allow_zero=True)
    return _validate(obj, "EndpointSlice", strict, body)


def _slice_endpoint(c: Checker, endpoint: dict, path: str, address_type: Any) -> None:
    a_path = child(path, "addresses")
    addresses = endpoint.get("addresses")
    if not addresses:
        c.add(required(a_path, "must contain at least 1 address"))
    elif isinstance(addresses, list) and len(addresses) > MAX_ENDPOINT_ADDRESSES:
        c.add(FieldError(a_path, "Too many", f"must have at most {MAX_ENDPOINT_ADDRESSES} items",
                         len(addresses)))
    for i, address in enumerate(addresses if isinstance(addresses, list) else []):
        if not isinstance(address, str):
            continue
        if address_type in ("IPv4", "IPv6"):
            want = 4 if address_type == "IPv4" else 6
            try:
                ok = ipaddress.ip_address(address).version == want
            except ValueError:
                ok = False
            if not ok:
                c.invalid(index(a_path, i), address, f"must be a valid {address_type} address")
        elif address_type == "FQDN":
            _name_rule(c, address, index(a_path, i), dns1123_subdomain_errors)
    c.obj(endpoint.get("conditions"), child(path, "conditions"), "EndpointConditions")
    _host_and_node(c, endpoint, path)


def validate_endpointslice_update(old: Any, new: Any) -> list[FieldError]:
    """An EndpointSlice's addressType never changes."""
    before = old.get("addressType") if isinstance(old, dict) else None
    after = new.get("addressType") if isinstance(new, dict) else None
    return [] if before == after else [invalid("addressType", after, "field is immutable")]


DEFAULTERS = {"Service": default_service, "Endpoints": default_endpoints,
              "EndpointSlice": default_endpointslice}
VALIDATORS = {"Service": validate_service, "Endpoints": validate_endpoints,
              "EndpointSlice": validate_endpointslice}
UPDATE_VALIDATORS = {"Service": validate_service_update,
                     "EndpointSlice": validate_endpointslice_update}

__all__ = ["default_service", "default_endpoints", "default_endpointslice", "validate_service",
           "validate_endpoints", "validate_endpointslice", "validate_service_update",
           "validate_endpointslice_update", "is_headless", "DEFAULTERS", "VALIDATORS",
           "UPDATE_VALIDATORS", "SERVICE_TYPES", "NODE_PORT_TYPES", "NONE",
           "externally_accessible", "needs_health_check"]
