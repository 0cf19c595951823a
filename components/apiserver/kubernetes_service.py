"""The `kubernetes` Service in `default`, and its Endpoints and EndpointSlice: how pods find the
apiserver (kube-apiserver's "kubernetes service" controller and its endpoint reconciler).

Pure:
    desired(service_cidr, advertise_address, secure_port) -> Desired(service, endpoints, slice)
    service_change(current, desired)  -> None (leave it) | the object to write
    endpoints_change(current, desired) -> None | the object to write (Endpoints or EndpointSlice)
Shell:
    Reconciler(api, desired).run()    creates or repairs the three at start, then every
                                      INTERVAL seconds, through the apiserver's own handlers;
                                      a round that fails is said in one log line (once while
                                      the same error lasts) and the next round comes all the same;
                                      the apiservers of an HA cluster share the address and port,
                                      so they want the same objects: a create another apiserver's
                                      beat is no error

As kube-apiserver writes them: the Service has the first address of the service range, port
`https` 443 to the secure port, no selector (so the EndpointSlice controller leaves it alone);
Endpoints and an EndpointSlice named `kubernetes` carry --advertise-address and the secure port.
An existing Service keeps its clusterIP (immutable): one made with another range is left as it
is, said once in the log; only its ports and type are put back.
"""
from __future__ import annotations

import asyncio
import copy
import ipaddress
import logging
from typing import Any, NamedTuple

from kubemu.api.service import SERVICE_NAME_LABEL
from kubemu.netplan import KUBERNETES_SERVICE_INDEX, service_ip
from kubemu.wire import Conflict, NotFound, WireError

log = logging.getLogger("kubemu.apiserver")

NAME, NAMESPACE = "kubernetes", "default"
PORT_NAME, SERVICE_PORT = "https", 443
INTERVAL = 10.0  # kube-apiserver's --endpoint-reconciler interval
SERVICE_LABELS = {"component": "apiserver", "provider": "kubernetes"}
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"


class Desired(NamedTuple):
    service: dict
    endpoints: dict
    slice: dict


def desired(service_cidr: str, advertise_address: str, secure_port: int) -> Desired:
    ip = service_ip(service_cidr, KUBERNETES_SERVICE_INDEX)
    meta = {"name": NAME, "namespace": NAMESPACE}
    port = {"name": PORT_NAME, "port": secure_port, "protocol": "TCP"}
    family = "IPv6" if ipaddress.ip_address(advertise_address).version == 6 else "IPv4"
    return Desired(
        service={"apiVersion": "v1", "kind": "Service",
                 "metadata": {**meta, "labels": dict(SERVICE_LABELS)},
                 "spec": {"type": "ClusterIP", "clusterIP": ip, "sessionAffinity": "None",
                          "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "protocol": "TCP",
                                     "targetPort": secure_port}]}},
        endpoints={"apiVersion": "v1", "kind": "Endpoints",
                   "metadata": {**meta, "labels": {SKIP_MIRROR_LABEL: "true"}},
                   "subsets": [{"addresses": [{"ip": advertise_address}], "ports": [dict(port)]}]},
        slice={"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {**meta, "labels": {SERVICE_NAME_LABEL: NAME}},
               "addressType": family,
               "endpoints": [{"addresses": [advertise_address], "conditions": {"ready": True}}],
               "ports": [dict(port)]})


def service_change(current: dict | None, want: dict) -> dict | None:
    """What to write for the Service: `want` if absent, `current` with the desired ports and
    type if those differ (getMasterServiceUpdateIfNeeded), else None."""
    if current is None:
        return copy.deepcopy(want)
    spec = current.get("spec") if isinstance(current.get("spec"), dict) else {}
    want_spec = want["spec"]
    if _ports(spec.get("ports")) == _ports(want_spec["ports"]) and spec.get("type") == "ClusterIP":
        return None
    out = copy.deepcopy(current)
    out["spec"] = {**spec, "type": "ClusterIP", "ports": copy.deepcopy(want_spec["ports"])}
    return out


def _ports(ports: Any) -> list:
    """The fields of the ports that matter, defaults filled (protocol TCP)."""
    out = []
    for p in ports if isinstance(ports, list) else []:
        if isinstance(p, dict):
            out.append((p.get("name"), p.get("port"), p.get("protocol") or "TCP", p.get("targetPort")))
    return out


def endpoints_change(current: dict | None, want: dict) -> dict | None:
    """What to write for the Endpoints or EndpointSlice: `want` if absent, `current` with the
    desired addresses, ports and labels if they differ, else None."""
    if current is None:
        return copy.deepcopy(want)
    fields = [f for f in want if f not in ("apiVersion", "kind", "metadata")]
    labels = (current.get("metadata") or {}).get("labels") or {}
    if all(_same(current.get(f), want[f]) for f in fields) and \
            all(labels.get(k) == v for k, v in want["metadata"]["labels"].items()):
        return None
    out = copy.deepcopy(current)
    for f in fields:
        out[f] = copy.deepcopy(want[f])
    out["metadata"]["labels"] = {**labels, **want["metadata"]["labels"]}
    return out


def _same(have: Any, want: Any) -> bool:
    """`have` holds `want` (defaults the apiserver added, like a port's protocol, may be extra)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_same(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(_same, have, want))
    return have == want


class Reconciler:
    """Keeps the three objects as `want` says, through the apiserver's handlers (`api`)."""

    def __init__(self, api, want: Desired, service_cidr: str):
        self.api = api
        self.want = want
        self.service_cidr = service_cidr
        self.told_foreign_ip = False
        self.last_error = ""
        self.rounds = 0  # rounds done, failed or not

    async def run(self, interval: float = INTERVAL) -> None:
        while True:
            try:
                await self.reconcile()
                self.last_error = ""
            except Exception as err:  # noqa: BLE001 - the task must outlive any one round
                # said once while it lasts (a store away, a taken address, a bug)
                message = err.message if isinstance(err, WireError) else f"{type(err).__name__}: {err}"
                if message != self.last_error:
                    self.last_error = message
                    log.warning("the kubernetes service: %s (retrying every %gs)", message, interval)
            self.rounds += 1
            await asyncio.sleep(interval)

    async def reconcile(self) -> None:
        """One round; the endpoints are kept even when the Service cannot be (its address
        taken): the first error is raised at the end."""
        failed: WireError | None = None
        try:
            svc = await self._get("services")
            change = service_change(svc, self.want.service)
            if change is not None:
                await self._write("services", svc, change)
            elif svc is not None:
                self._check_ip(svc)
        except WireError as err:
            failed = err
        for resource, want in (("endpoints", self.want.endpoints),
                               ("endpointslices.discovery.k8s.io", self.want.slice)):
            current = await self._get(resource)
            change = endpoints_change(current, want)
            if change is not None:
                await self._write(resource, current, change)
        if failed is not None:
            raise failed

    def _check_ip(self, svc: dict) -> None:
        ip = (svc.get("spec") or {}).get("clusterIP")
        if ip != self.want.service["spec"]["clusterIP"] and not self.told_foreign_ip:
            self.told_foreign_ip = True
            log.warning("the kubernetes service has clusterIP %s, not %s (the first address of "
                        "--service-cluster-ip-range %s): left as it is; delete it to have it made "
                        "again", ip, self.want.service["spec"]["clusterIP"], self.service_cidr)

    async def _get(self, resource: str) -> dict | None:
        try:
            return await self.api.get(resource, NAME, NAMESPACE)
        except NotFound:
            return None

    async def _write(self, resource: str, current: dict | None, obj: dict) -> None:
        try:
            if current is None:
                await self.api.create(resource, obj, NAMESPACE)
                log.info("created %s default/kubernetes", resource.partition(".")[0])
            else:
                await self.api.update(resource, obj, NAMESPACE)
                log.info("repaired %s default/kubernetes", resource.partition(".")[0])
        except Conflict:
            pass  # someone else wrote it meanwhile: looked at again next round
        except WireError:
            # The apiservers of an HA cluster all make it at their start: the Service of the one
            # that lost the race is refused for its address before its name (the address is
            # allocated first, as kube-apiserver does), yet the Service is there.
            if current is not None or await self._get(resource) is None:
                raise
