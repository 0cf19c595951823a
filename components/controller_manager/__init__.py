"""The controller-manager: kubemu's kube-controller-manager, as thin asyncio shells around the
pure reconcile cores of `components.controllers`.

    python -m components.controller_manager --api ipc:///run/kubemu/api.sock

Layout (after kubernetes/sample-controller):

* `informers`  one shared list+watch cache per resource (pods, replicasets, deployments, nodes,
               leases in kube-node-lease, namespaces, services, endpoints, endpointslices,
               and by name only the ConfigMaps
               kube-root-ca.crt and ServiceAccounts default), created once and used by every controller, with the
               indexes the syncs look things up by (pods by controller uid and by node, ...);
* `workers`    a controller's rate-limited work queue and its N workers: one level-based sync
               per key, errors retried with backoff, ``requeue_after`` honoured;
* `executor`   carries out the actions a core returns, through the API client;
* one module per controller shell: `replicaset`, `deployment`, `nodelifecycle`, `nodeipam`
  (with --allocate-node-cidrs: a podCIDR per node), `garbagecollector`, `namespace` (a deleted namespace is emptied, then finalized),
  `serviceaccounts` (a "default" ServiceAccount per namespace), `rootcacertpublisher` (the
  ConfigMap kube-root-ca.crt per namespace, with --root-ca-file only), `endpointslice` and
  `endpoints` (a selector Service's EndpointSlices and legacy Endpoints); their event handlers only enqueue keys (plus the ReplicaSet
  expectations bookkeeping);
* `app`        the wiring: flags in, informers synced, READY=1, controllers running, SIGTERM out.

Stateless by design: everything is rebuilt from the informers after a restart, and every sync
compares the cached world with the desired one, so a kill -9 at any point converges.
"""
