"""The controller-manager's shared informers (client-go's SharedInformerFactory): one list+watch
cache per resource, made on first request and shared by every controller, so N controllers
watching pods cost one watch and one copy of the pods.

The indexes are what keeps a sync from scanning every pod in the cluster:

* ``controller`` - pods and replicasets by their controller's uid; objects without a controller
  are filed under ``orphan_value(namespace)`` (the only candidates for adoption);
* ``owner``      - by every ownerReference uid (the garbage collector's "who depends on X");
* ``uid``        - by metadata.uid (identity, as the garbage collector sees it);
* ``node``       - pods by spec.nodeName (the node lifecycle's taint-based eviction);
* ``service``    - EndpointSlices by "<namespace>/<kubernetes.io/service-name label>" (the
  EndpointSlice controller's slices of one Service).

ConfigMaps and ServiceAccounts are watched by name only (kube-root-ca.crt, default), and
Secrets are the bootstrap tokens only (kube-system, type bootstrap.kubernetes.io/token): the
controllers that need them own those, and nothing else of them is worth a copy.
"""
from __future__ import annotations

import asyncio

from components.controllers import endpointslice, rootcacertpublisher, serviceaccounts
from kubemu import bootstraptoken
from components.controllers.nodelifecycle import LEASE_NAMESPACE
from components.controllers.podutil import controller_ref, meta
from kubemu.api.resources import BY_KIND, Resource, for_kind
from kubemu.apiclient import ApiClient
from kubemu.informer import Informer

CONTROLLER_INDEX = "controller"
OWNER_INDEX = "owner"
UID_INDEX = "uid"
NODE_INDEX = "node"
SERVICE_INDEX = "service"


def orphan_value(namespace: str) -> str:
    # ":" can't occur in a uid, so this never collides with a controller's uid
    return f"orphan:{namespace or 'default'}"


def _by_controller(obj: dict) -> list[str]:
    ref = controller_ref(obj)
    if ref is not None and ref.get("uid"):
        return [ref["uid"]]
    return [orphan_value(meta(obj).get("namespace") or "")]


def _by_owner(obj: dict) -> list[str]:
    return [ref["uid"] for ref in meta(obj).get("ownerReferences") or [] if ref.get("uid")]


def _by_uid(obj: dict) -> list[str]:
    uid = meta(obj).get("uid")
    return [uid] if uid else []


def _by_node(obj: dict) -> list[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


def _by_service(obj: dict) -> list[str]:
    service = (meta(obj).get("labels") or {}).get(endpointslice.LABEL_SERVICE_NAME)
    return [endpointslice.service_key(meta(obj).get("namespace"), service)] if service else []


_INDEXERS = {
    "pods": {CONTROLLER_INDEX: _by_controller, OWNER_INDEX: _by_owner, UID_INDEX: _by_uid,
             NODE_INDEX: _by_node},
    "replicasets": {CONTROLLER_INDEX: _by_controller, OWNER_INDEX: _by_owner, UID_INDEX: _by_uid},
    "deployments": {OWNER_INDEX: _by_owner, UID_INDEX: _by_uid},
    "nodes": {},
    "leases": {},
    "namespaces": {},
    "configmaps": {},
    "serviceaccounts": {},
    "services": {},
    "endpoints": {},
    "endpointslices": {SERVICE_INDEX: _by_service},
    "statefulsets": {OWNER_INDEX: _by_owner, UID_INDEX: _by_uid},
    "daemonsets": {OWNER_INDEX: _by_owner, UID_INDEX: _by_uid},
    "controllerrevisions": {CONTROLLER_INDEX: _by_controller, OWNER_INDEX: _by_owner,
                            UID_INDEX: _by_uid},
    "jobs": {CONTROLLER_INDEX: _by_controller, OWNER_INDEX: _by_owner, UID_INDEX: _by_uid},
    "cronjobs": {OWNER_INDEX: _by_owner, UID_INDEX: _by_uid},
    "persistentvolumes": {UID_INDEX: _by_uid},
    "persistentvolumeclaims": {OWNER_INDEX: _by_owner, UID_INDEX: _by_uid},
    "storageclasses": {},
    "poddisruptionbudgets": {},
    "secrets": {},
    "certificatesigningrequests": {},
}
# Resources watched in one namespace only (the node lifecycle needs just the node leases, the
# token cleaner and bootstrap signer just the bootstrap tokens).
_NAMESPACES = {"leases": LEASE_NAMESPACE, "secrets": bootstraptoken.NAMESPACE}
# Resources watched by name only: the root CA publisher's ConfigMap and the ServiceAccount
# controller's "default" in every namespace, never the users' ConfigMaps and ServiceAccounts.
_FIELD_SELECTORS = {"configmaps": f"metadata.name={rootcacertpublisher.CONFIGMAP}",
                    "serviceaccounts": f"metadata.name={serviceaccounts.DEFAULT}",
                    "secrets": f"type={bootstraptoken.SECRET_TYPE}"}
_RESOURCE_OF_KIND = {kind: r for (_, kind), r in BY_KIND.items()}


def resource_of(kind: str, api_version: str | None = None) -> Resource:
    """The resource serving `kind` (kinds are unique in kubemu; `api_version` checks it)."""
    return for_kind(api_version, kind) if api_version else _RESOURCE_OF_KIND[kind]


class SharedInformers:
    def __init__(self, api: ApiClient, resync_period: float = 0.0):
        self.api = api
        self.resync_period = resync_period
        self._informers: dict[str, Informer] = {}
        # index name -> the informers that have it, kept as informers are made: the garbage
        # collector's lookups run on every pod event, and asking each informer for its
        # indexers would copy them every time
        self._with_index: dict[str, list[Informer]] = {}
        self._started = False

    def informer(self, resource: str) -> Informer:
        """The informer of `resource` (a plural from ``_INDEXERS``); controllers ask for theirs
        before `run`, so only what some controller needs is ever watched."""
        informer = self._informers.get(resource)
        if informer is None:
            if self._started:
                raise RuntimeError(f"informer {resource!r} requested after the start")
            informer = Informer(self.api, resource, namespace=_NAMESPACES.get(resource),
                                field_selector=_FIELD_SELECTORS.get(resource, ""),
                                resync_period=self.resync_period, indexers=_INDEXERS[resource])
            self._informers[resource] = informer
            for index in _INDEXERS[resource]:
                self._with_index.setdefault(index, []).append(informer)
        return informer

    async def run(self, stop: asyncio.Event) -> None:
        """Run every requested informer until `stop` is set."""
        self._started = True
        await asyncio.gather(*(inf.run(stop) for inf in self._informers.values()))

    async def wait_for_sync(self) -> None:
        """Until every informer has delivered its first LIST (client-go's WaitForCacheSync):
        a sync that ran earlier would see, say, a ReplicaSet but not yet its pods."""
        await asyncio.gather(*(inf.wait_for_sync() for inf in self._informers.values()))

    # -- lookups across informers --

    def get(self, kind: str, namespace: str | None, name: str) -> dict | None:
        """The cached object of `kind` (None when not cached or not watched)."""
        resource = _RESOURCE_OF_KIND.get(kind)   # a kind we don't serve is simply not cached
        informer = self._informers.get(resource.plural) if resource else None
        if informer is None:
            return None
        return informer.get(f"{namespace or 'default'}/{name}" if resource.namespaced else name)

    def by_uid(self, uid: str, kind: str | None = None) -> dict | None:
        """The cached object with this uid, of any kind. `kind` (an ownerReference's) is only
        where to look first: a reference's kind may be wrong, and a uid is unique anyway."""
        informers = self._with_index.get(UID_INDEX, [])
        resource = _RESOURCE_OF_KIND.get(kind) if kind else None
        likely = self._informers.get(resource.plural) if resource else None
        if likely is not None and likely in informers:
            found = likely.indexer.by_index(UID_INDEX, uid)
            if found:
                return found[0]
        for informer in informers:   # (`likely` again only when the uid is not there: rare)
            found = informer.indexer.by_index(UID_INDEX, uid)
            if found:
                return found[0]
        return None

    def has_dependents(self, uid: str) -> bool:
        return any(informer.indexer.index_keys(OWNER_INDEX, uid)
                   for informer in self._with_index.get(OWNER_INDEX, ()))
