"""The apiserver's HTTPS door: the Kubernetes REST API over the same handlers as the ZeroMQ wire.

`requestinfo` (a request's verb, resource, namespace, name), `app` (authentication, RBAC, the
verbs mapped onto the handler table, watch and log streams), `status` (errors as meta/v1 Status),
`tables` (server-side printing), `media` and `protobuf` (bodies and Accept), `query` (parameters),
`health` (/healthz, /livez, /readyz), `discovery` and `openapi` (the documents), `metrics`
(metrics.k8s.io, from the kubelets' stats), `server` (TLS and the listener's bounds).
"""
