"""kubemu's apiserver: the only door to the store, with two transports over one handler table.

    python -m components.apiserver --listen ENDPOINT --store-endpoints EP1,EP2,EP3 [--audit-log FILE]
                                   [--state-dir DIR] [--secure-port 6443] [--bind-address 127.0.0.1]
                                   [--tls-cert-file F --tls-private-key-file F] [--client-ca-file F]
                                   [--service-account-key-file F] [--service-account-signing-key-file F]
                                   [--advertise-address 127.0.0.1] [--service-cluster-ip-range 10.96.0.0/12]
                                   [--service-node-port-range 30000-32767]

The ZeroMQ wire (below) is how kubemu's components talk; HTTPS (`rest/`, only with
--tls-cert-file) serves the Kubernetes REST API to kubectl and the client libraries from the same
handlers, storage, watch cache and audit log, after authentication (`authn`) and RBAC
(`rbaccache`).

Stateless: every object lives in the store at `registry_key(resource, namespace, name)` (msgpack),
and an object's resourceVersion is its key's mod_revision (a string). Kill it at any time; clients
reconnect and resume their watches from the last resourceVersion they saw.

Wire methods (params are maps; `resource` is anything `kubemu.api.resources.resolve` accepts).
Who calls is never a param: it is the identity the transport authenticated (`caller`), which the
audit log records and RBAC authorizes. Every mutating method also takes `dry_run=False` (validate,
write nothing); those that write an object also `field_validation="Strict"|"Warn"|"Ignore"` (what
unknown fields get; default Warn) and `field_manager`:

    create        {resource, object, namespace=None}                      -> object
    get           {resource, name, namespace=None}                        -> object
    list          {resource, namespace=None, label_selector="", field_selector="", limit=0, continue=""}
                  -> {apiVersion, kind: <Kind>List, metadata: {resourceVersion, continue?}, items}
    update        {resource, object, namespace=None}     spec/metadata (status kept) -> object
    update_status {resource, object, namespace=None}     status/metadata (spec kept) -> object
    patch         {resource, name, patch, namespace=None, patch_type="merge"|"strategic"|"json",
                   subresource=None|"status"}                             -> object
    delete        {resource, name, namespace=None, grace_period_seconds=None,
                   propagation_policy="Background"|"Foreground"|"Orphan", preconditions=None}
                  -> the object's final state (with deletionTimestamp if it stays for now)
    delete_collection {resource, namespace=None, label_selector="", field_selector="",
                   grace_period_seconds=None, propagation_policy="Background"} -> the deleted, as a list
    evict         {name, namespace=None, object=None (a policy/v1 Eviction)}  pods/eviction -> Status
    bind          {name, node, namespace=None}           pods/binding     -> pod
    get_scale     {resource, name, namespace=None}       autoscaling/v1 Scale
    update_scale  {resource, name, replicas (a count or a Scale), namespace=None, resource_version=None}
                  -> Scale
    watch (stream){resource, namespace=None, label_selector="", field_selector="",
                   resource_version="", allow_bookmarks=False}
                  -> {"type": ADDED|MODIFIED|DELETED|BOOKMARK, "object": ...}
    log           {name, namespace=None, container=None, previous=False, tail_lines=None}
                  pods/log, from the kubelet's files under --state-dir    -> {"log": text}
    healthz       {}                                                      -> {"ok": True}

Errors (Kubernetes' words): NotFound `pods "web" not found`; Conflict `pods "web" already exists`
(details.reason AlreadyExists) or `Operation cannot be fulfilled on pods "web": the object has been
modified; ...` (reason Conflict); Invalid with the ValidationError text and details.causes (field
paths); Gone reason Expired `too old resource version: 1 (5)`; TooLarge over 1.5 MiB; BadRequest,
among others for a parameter nested deeper than `kubemu.api.limits.MAX_DEPTH` (refused at the door,
before any handler walks it: `object is nested more than 100 levels deep (the limit)`).

Services get their clusterIP and nodePorts from allocations kept in the store, so every apiserver
shares them (`servicealloc`: IPAddress objects and the NodePort bitmap, decided by `servicestrategy`
over `serviceips`' bitmaps, repaired by `servicerepair`'s loops); the apiserver keeps the `kubernetes` Service in `default` and its endpoints pointing at its HTTPS door
on --advertise-address (`kubernetes_service`).

Parts: `storage` (objects in the store), `handlers` (the methods), `watchcache` (one store watch
per resource fanned out to watchers), `namespaces` (the namespaces creates check, from a watch),
`podlogs` (the log subresource), `audit` (the JSON-lines audit log), `server` (wiring), `rest`
(the HTTPS door: `requestinfo` reads a request's path, `app` maps verbs onto the handlers,
`status` shapes errors, `tables` prints, `media` reads bodies, `server` listens).
"""
