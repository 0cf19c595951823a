"""The Kubernetes REST API over the apiserver's handler table: one aiohttp handler for every path.

Each request: authenticate (client certificate or bearer token; without credentials the request
is system:anonymous, group system:unauthenticated, which RBAC lets read the public paths and
kube-public's cluster-info, as kube-apiserver's --anonymous-auth; Impersonate-* headers are
refused, 403) -> `caller.current` -> RequestInfo -> authorize
(RBAC) -> the handler the verb maps to, the same functions the ZeroMQ wire calls (same storage,
watch cache and audit log) -> the answer as JSON, YAML or a Table. Every error is a meta/v1
Status (status.py); anything unexpected is one log line and a 500 Status, never a traceback.

    GET    collection            list (watch with ?watch=true|1, or /api/v1/watch/...)
    GET    item[/status]         get            GET item/scale   get_scale     GET pods/x/log  logs
    GET|POST pods/x/exec, pods/x/attach   a WebSocket relayed to the pod's kubelet (remotecommand.py)
    GET    metrics.k8s.io pods, nodes   PodMetrics, NodeMetrics from the kubelets' stats (metrics.py)
    GET|POST pods/x/portforward   SPDY tunneled over a WebSocket, relayed to the kubelet (portforward.py)
    POST   collection            create (review kinds: review, token_review, self_subject_review)
    POST   pods/x/binding        bind           POST pods/x/eviction  evict
    POST   serviceaccounts/x/token  token_request
    PUT    item | /status | /scale   update | update_status | update_scale
    PATCH  item | /status | /scale   patch (json, merge, strategic; apply-patch+yaml is 415)
    DELETE item | collection     delete | delete_collection
"""
from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import random
import time
from pathlib import Path
from typing import Any, Callable

import yaml
from aiohttp import HttpVersion11, web
from multidict import CIMultiDict

from kubemu.api import authz, certificates, fields
from kubemu.api.identity import ANONYMOUS, UNAUTHENTICATED, UserInfo
from kubemu.api.limits import MAX_OBJECT_BYTES
from kubemu.api.patch import PatchError, apply_patch
from kubemu.api.resources import UnknownResourceError, resolve
from kubemu.wire import BadRequest, Gone, WireError

from .. import caller, podlogs
from .. import warnings as request_warnings
from ..authn import AuthenticationError
from . import health, media, metrics, query, status, tables
from .portforward import PortForward
from .remotecommand import RemoteCommand
from .requestinfo import RequestInfo, RequestInfoError, request_info

log = logging.getLogger("kubemu.apiserver.rest")

# A body may hold a whole object plus its envelope; over this it is refused before it is read.
MAX_BODY_BYTES = MAX_OBJECT_BYTES + 64 * 1024
# What anyone may read, signed in or not (kube-apiserver's system:public-info-viewer).
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
_PUBLIC_PREFIXES = tuple(p + "/" for p in PUBLIC_PATHS)
# A watch without timeoutSeconds ends after a random time in this range (kube-apiserver's
# minRequestTimeout to twice that), so that clients re-list and spread out.
WATCH_TIMEOUT = (1800.0, 3600.0)
# How long a watch may take to produce its first event before the 200 goes out: errors found
# while it starts (a bad selector, an unknown resource) are then answered as HTTP errors.
WATCH_START = 0.5
BODY_TIMEOUT = 60.0
# Impersonate-User, -Group, -Uid, -Extra-<key>
IMPERSONATE_PREFIX = "impersonate-"
REVIEW_HANDLERS = {"selfsubjectaccessreviews": "review", "subjectaccessreviews": "review",
                   "localsubjectaccessreviews": "review", "selfsubjectrulesreviews": "review",
                   "tokenreviews": "token_review", "selfsubjectreviews": "self_subject_review"}
# Handlers that write nothing: a client that goes away may cancel them (no shield, no task).
READS = frozenset({"get", "list", "get_scale"})
CREATE_SUBRESOURCES = {("pods", "binding"): "bind", ("pods", "eviction"): "evict",
                       ("serviceaccounts", "token"): "token_request"}


class Refusal(Exception):
    """Answer this request with (code, Status) and stop."""

    def __init__(self, answer: tuple[int, dict]):
        super().__init__(answer[1].get("message", ""))
        self.code, self.status = answer


class RestAPI:
    """`await authenticator.authenticate(peer_cert_der, authorization)` -> UserInfo | None (raises
    AuthenticationError for bad credentials); `authorizer.authorize(Attributes)` -> Decision;
    `handlers` is API.handlers() plus the review and token handlers by name."""

    def __init__(self, handlers: dict[str, Callable], authenticator, authorizer, *,
                 state_dir=None, kubelet_credentials: tuple[str, str] | None = None, audit=None,
                 discovery=None, openapi=None,
                 ready: Callable[[], bool] = lambda: True, clock: Callable[[], float] = time.time,
                 watch_timeout: tuple[float, float] = WATCH_TIMEOUT, body_timeout: float = BODY_TIMEOUT):
        self.handlers = handlers
        self.params = {name: _parameters(fn) for name, fn in handlers.items()}
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.state_dir = Path(state_dir) if state_dir else None
        self.remote = RemoteCommand(self.state_dir, kubelet_credentials, audit)
        self.metrics = metrics.Metrics(metrics.Kubelets(self.remote.kubelet), clock)
        self.portforward = PortForward(self.remote)
        self.discovery = discovery
        self.openapi = openapi
        self.health = health.Checks(handlers, ready)
        self.clock = clock
        self.watch_timeout = watch_timeout
        self.body_timeout = body_timeout

    async def close(self) -> None:
        """Let go of what the door holds between requests (its kubelet connections)."""
        await self.remote.close()

    # --- the door

    async def serve(self, request: web.BaseRequest) -> web.StreamResponse:
        """The handler of every request (server.HTTPSServer's)."""
        if request.headers.get("Expect"):
            await _expect(request)
        request_warnings.current.set([])
        try:
            return await self._serve(request)
        except Refusal as r:
            return self._json(request, r.code, r.status, media.Output())
        except query.QueryError as err:
            return self._json(request, *status.bad_request(str(err)), media.Output())
        except media.BodyError as err:
            return self._json(request, err.code, status.status(err.code, str(err)), media.Output())
        except WireError as err:
            return self._json(request, *status.from_wire(err), media.Output())
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as exc:  # one line, no traceback: the server keeps serving
            log.error("%s %s failed: %s: %s", request.method, request.path, type(exc).__name__, exc)
            return self._json(request, *status.internal(), media.Output())

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        user = await self._authenticate(request)
        if any(h.lower().startswith(IMPERSONATE_PREFIX) for h in request.headers):
            # serving the request as the real caller would run `kubectl --as` as someone else
            raise Refusal(status.forbidden("impersonation (Impersonate-* headers, kubectl --as) "
                                           "is not supported by kubemu"))
        caller.current.set(user)
        caller.user_agent.set(request.headers.get("User-Agent"))
        try:
            info = request_info(request.method, request.path, request.query)
        except RequestInfoError:
            raise Refusal(status.not_found_path()) from None
        if not self._public(request.path):
            self._authorize(user, info)
        out = media.negotiate(request.headers.get("Accept", ""))
        if out is None:
            raise Refusal((406, status.status(406, "only the following media types are accepted: "
                                                   "application/json, application/yaml, "
                                                   "application/json;as=Table;v=v1;g=meta.k8s.io")))
        if not info.is_resource_request:
            return await self._non_resource(request, out)
        return await self._resource(request, info, out, user)

    @staticmethod
    def _public(path: str) -> bool:
        return path in PUBLIC_PATHS or path.startswith(_PUBLIC_PREFIXES)

    async def _authenticate(self, request: web.Request) -> UserInfo:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        try:
            user = await self.authenticator.authenticate(der, request.headers.get("Authorization"))
        except AuthenticationError:
            raise Refusal(status.unauthorized()) from None
        return user if user is not None else UserInfo(ANONYMOUS, (UNAUTHENTICATED,))

    def _authorize(self, user: UserInfo, info: RequestInfo) -> None:
        attrs = authz.Attributes(user=user, verb=info.verb, resource_request=info.is_resource_request,
                                 api_group=info.api_group, api_version=info.api_version,
                                 resource=info.resource, subresource=info.subresource,
                                 namespace=info.namespace, name=info.name, path=info.path)
        decision = self.authorizer.authorize(attrs)
        if not decision.allowed:
            raise Refusal(status.forbidden(authz.forbidden_message(attrs, decision.reason), info.api_group,
                                           info.resource, info.name))

    # --- answers

    def _json(self, request: web.Request, code: int, body: Any, out: media.Output) -> web.Response:
        hdrs: CIMultiDict = CIMultiDict()
        for text in request_warnings.current.get() or []:  # RFC 7234 warn-code 299, as kube-apiserver
            hdrs.add("Warning", "299 - " + json.dumps(text))
        if out.form == "yaml":
            return web.Response(status=code, text=yaml.safe_dump(body, sort_keys=False),
                                content_type=media.YAML, headers=hdrs)
        return web.Response(status=code, body=media.encode_json(body),
                            content_type=media.JSON, headers=hdrs)

    def _shaped(self, kind: str, value: dict, out: media.Output, include: str) -> dict:
        """An object or list as the Accept header asked for it."""
        is_list = isinstance(value.get("items"), list) and value.get("kind", "").endswith("List")
        items = value["items"] if is_list else [value]
        if out.form == "Table":
            return tables.table(kind, items, self.clock(), include=include, version=out.version,
                                list_meta=value.get("metadata") if is_list else {})
        if out.form.startswith("PartialObjectMetadata"):
            partial = [tables.row_object(o, "Metadata", out.version) for o in items]
            if not is_list:
                return partial[0]
            return {"kind": "PartialObjectMetadataList", "apiVersion": f"meta.k8s.io/{out.version}",
                    "metadata": value.get("metadata") or {}, "items": partial}
        return value

    # --- non-resource paths

    async def _non_resource(self, request: web.Request, out: media.Output) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if request.method not in ("GET", "HEAD"):
            raise Refusal(status.method_not_allowed(request.method, path))
        answer = self.health.answer(path, query.boolean(request.query, "verbose"),
                                    request.query.getall("exclude", []))
        if answer is not None:
            code, text = await answer
            return web.Response(status=code, text=text, content_type="text/plain")
        if self.discovery is not None:
            found = self.discovery.document(path, request.headers.get("Accept", ""))
            if found is not None:
                content_type, document = found
                return web.Response(body=media.encode_json(document),
                                    headers={"Content-Type": content_type})
        if self.openapi is not None and path.startswith("/openapi/"):
            document = self.openapi.document(path)
            if document is not None:
                return self._json(request, 200, document, media.Output())
        raise Refusal(status.not_found_path())

    # --- resource paths

    async def _resource(self, request: web.Request, info: RequestInfo, out: media.Output,
                        user: UserInfo) -> web.StreamResponse:
        if info.api_group == metrics.GROUP:  # served here, not stored: its plurals are the core group's
            return self._json(request, *await self.metrics.serve(info, request.query, out, self._call), out)
        try:
            r = resolve(info.resource)
        except UnknownResourceError:
            raise Refusal(status.not_found_path()) from None
        if r.plural != info.resource or (info.api_group, info.api_version) != (r.group, r.version):
            raise Refusal(status.not_found_path())
        # a cluster-scoped resource has no path under /namespaces/<ns>/, but a Namespace's own
        # path is one: RequestInfo reads /api/v1/namespaces/x[/status] as namespace x, name x
        if info.namespace and not r.namespaced and not (r.kind == "Namespace" and info.namespace == info.name):
            raise Refusal(status.not_found_path())
        include = request.query.get("includeObject", "Metadata")
        if include not in tables.INCLUDE:
            raise query.QueryError(f'includeObject: Unsupported value: "{include}"')
        return await self._dispatch(request, info, r, out, user, include)

    async def _dispatch(self, request, info: RequestInfo, r, out, user, include) -> web.StreamResponse:
        verb, sub, q = info.verb, info.subresource, request.query
        ns = info.namespace if r.namespaced else None
        if r.kind == "Pod" and sub in ("exec", "attach", "portforward") and verb in ("get", "create"):
            if verb == "get":  # a WebSocket's GET must also be allowed to create, as Kubernetes since 1.35
                self._authorize(user, dataclasses.replace(info, verb="create"))
            pod = await self._call("get", resource="pods", name=info.name, namespace=ns)
            if sub == "portforward":
                return await self.portforward.serve(request, pod)
            return await self.remote.serve(request, pod, sub)
        if verb == "watch":
            return await self._watch(request, info, r, out, include)
        if verb == "list":
            listed = await self._call("list", resource=r.plural, namespace=ns or None,
                                      label_selector=q.get("labelSelector", ""),
                                      field_selector=q.get("fieldSelector", ""),
                                      limit=query.integer(q, "limit") or 0,
                                      resource_version=q.get("resourceVersion", ""),
                                      resource_version_match=q.get("resourceVersionMatch") or None,
                                      **{"continue": q.get("continue", "")})
            return self._json(request, 200, self._shaped(r.kind, listed, out, include), out)
        if verb == "get":
            if sub == "log" and r.kind == "Pod":
                return await self._log(request, info)
            if sub == "scale":
                return self._json(request, 200, await self._call("get_scale", resource=r.plural, name=info.name,
                                                                  namespace=ns), out)
            if sub not in ("", "status", "approval") or (sub == "approval" and r.kind != certificates.KIND):
                raise Refusal(status.not_found_path())
            obj = await self._call("get", resource=r.plural, name=info.name, namespace=ns)
            return self._json(request, 200, self._shaped(r.kind, obj, out, include), out)
        common = {"dry_run": query.dry_run(q.getall("dryRun", [])) or None,
                  "field_validation": query.field_validation(q),
                  "field_manager": q.get("fieldManager") or None}
        if verb == "create":
            return await self._create(request, info, r, ns, user, common, out)
        if verb == "update":
            body = await self._body(request, media.OBJECT_TYPES)
            if not isinstance(body, dict):
                raise BadRequest("the body must be an object")
            if sub == "scale":
                return self._json(request, 200, await self._scale(r, info, ns, body, user, common), out)
            name = (body.get("metadata") or {}).get("name") if isinstance(body.get("metadata"), dict) else None
            if name not in (None, "", info.name):
                raise BadRequest(f"the name of the object ({name}) does not match the name on the URL ({info.name})")
            method = {"": "update", "status": "update_status", "finalize": "finalize",
                      "approval": "update_approval"}.get(sub)
            if method is None or (method == "finalize" and r.kind != "Namespace") or \
                    (method == "update_approval" and r.kind != certificates.KIND):
                raise Refusal(status.not_found_path())
            obj = await self._call(method, resource=r.plural, object=body, namespace=ns, **common)
            return self._json(request, 200, self._shaped(r.kind, obj, out, include), out)
        if verb == "patch":
            return await self._patch(request, info, r, ns, user, common, out, include)
        if verb == "delete":
            if sub:
                raise Refusal(status.not_found_path())
            options = await self._delete_options(request)
            obj = await self._call("delete", resource=r.plural, name=info.name, namespace=ns,
                                   grace_period_seconds=options["gracePeriodSeconds"],
                                   propagation_policy=options["propagationPolicy"],
                                   preconditions=options["preconditions"], dry_run=options["dryRun"])
            return self._json(request, 200, obj, out)
        if verb == "deletecollection":
            options = await self._delete_options(request)
            listed = await self._call("delete_collection", resource=r.plural, namespace=ns,
                                      label_selector=q.get("labelSelector", ""),
                                      field_selector=q.get("fieldSelector", ""),
                                      grace_period_seconds=options["gracePeriodSeconds"],
                                      propagation_policy=options["propagationPolicy"],
                                      dry_run=options["dryRun"])
            return self._json(request, 200, listed, out)
        raise Refusal(status.method_not_allowed(request.method, f"{r.plural}"))

    async def _call(self, method: str, **params):
        """Call handler `method` with the params given: None means the handler's default; a
        param it does not take is refused (never silently ignored: a dryRun dropped would write)."""
        fn = self.handlers.get(method)
        if fn is None:
            raise Refusal(status.method_not_allowed("this request", f"this apiserver (no {method} handler)"))
        accepted = self.params[method]
        for name in list(params):
            if params[name] is None or (params[name] == "" and accepted is not None and name not in accepted):
                del params[name]
            elif accepted is not None and name not in accepted:
                raise BadRequest(f"{name} is not supported by kubemu's apiserver for this request")
        if method in READS:
            return await fn(**params)
        # a client that goes away does not cancel a write half-way: the write finishes alone
        return await asyncio.shield(fn(**params))

    async def _body(self, request: web.Request, allowed: tuple[str, ...]) -> object:
        kind = media.body_type(request.headers.get("Content-Type"), allowed)
        data = await self._read(request)
        return media.decode(kind, data)

    async def _read(self, request: web.Request) -> bytes:
        """The whole body, at most MAX_BODY_BYTES of it, sent within body_timeout (a slow client's
        body does not hold a handler forever)."""
        try:
            async with asyncio.timeout(self.body_timeout):
                return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise Refusal(status.too_large(MAX_BODY_BYTES)) from None
        except TimeoutError:
            raise Refusal((408, status.status(408, f"the request body was not sent within {self.body_timeout:g}s",
                                              "Timeout"))) from None

    async def _create(self, request, info, r, ns, user, common, out) -> web.StreamResponse:
        body = await self._body(request, media.CREATE_TYPES)
        if not isinstance(body, dict):
            raise BadRequest("the body must be an object")
        if info.subresource:
            method = CREATE_SUBRESOURCES.get((r.plural, info.subresource))
            if method is None or not info.name:
                raise Refusal(status.not_found_path())
            if method == "bind":
                target = body.get("target") if isinstance(body.get("target"), dict) else {}
                await self._call("bind", name=info.name, node=target.get("name"), namespace=ns, **common)
                return self._json(request, 201, _success(r, info.name), out)
            if method == "evict":
                return self._json(request, 201, await self._call("evict", name=info.name, namespace=ns, object=body,
                                                                 **common), out)
            result = await self._call(method, name=info.name, object=body, namespace=ns)
            return self._json(request, 201, result, out)
        if info.name:
            raise Refusal(status.method_not_allowed("POST", f"{r.plural}/{info.name}"))
        if not r.stored:
            method = REVIEW_HANDLERS.get(r.plural)
            if method is None:
                raise Refusal(status.not_found_path())
            params: dict = {"object": body}
            if method == "review":
                params.update(resource=r.plural, namespace=ns)
            return self._json(request, 201, await self._call(method, **params), out)
        obj = await self._call("create", resource=r.plural, object=body, namespace=ns, **common)
        return self._json(request, 201, self._shaped(r.kind, obj, out, "Metadata"), out)

    async def _patch(self, request, info, r, ns, user, common, out, include) -> web.StreamResponse:
        kind = media.body_type(request.headers.get("Content-Type"), tuple(media.PATCH_TYPES))
        data = await self._read(request)
        body = media.decode(media.JSON, data)
        patch_type = media.PATCH_TYPES[kind]
        if info.subresource == "scale":
            scale = await self._call("get_scale", resource=r.plural, name=info.name, namespace=ns)
            try:
                patched = apply_patch(scale, body, patch_type)
            except PatchError as err:
                raise BadRequest(str(err)) from None
            return self._json(request, 200, await self._scale(r, info, ns, patched, user, common,
                                                              precondition_from=scale), out)
        if info.subresource not in ("", "status", "approval") or \
                (info.subresource == "approval" and r.kind != certificates.KIND):
            raise Refusal(status.not_found_path())
        obj = await self._call("patch", resource=r.plural, name=info.name, patch=body, namespace=ns,
                               patch_type=patch_type, subresource=info.subresource or None,
                               **common)
        return self._json(request, 200, self._shaped(r.kind, obj, out, include), out)

    async def _scale(self, r, info, ns, scale: dict, user, common, precondition_from: dict | None = None) -> dict:
        """The whole Scale goes to update_scale: its rules (an empty Scale scales to 0, unknown
        fields as fieldValidation says) are the wire's."""
        rv = (scale.get("metadata") or {}).get("resourceVersion") if isinstance(scale.get("metadata"), dict) else None
        if precondition_from is not None and rv == (precondition_from.get("metadata") or {}).get("resourceVersion"):
            rv = None  # a patch that did not set it: no precondition, as kube-apiserver's GuaranteedUpdate
        return await self._call("update_scale", resource=r.plural, name=info.name, namespace=ns,
                                replicas=scale, resource_version=rv or None,
                                **common)

    async def _delete_options(self, request: web.Request) -> dict:
        q = request.query
        body: dict = {}
        if request.can_read_body:
            data = await self._read(request) if request.content_length != 0 else b""
            if data.strip():
                kind = media.body_type(request.headers.get("Content-Type"), media.OBJECT_TYPES)
                decoded = media.decode(kind, data)
                if not isinstance(decoded, dict):
                    raise BadRequest("DeleteOptions must be an object")
                body = decoded
        grace = body.get("gracePeriodSeconds", query.integer(q, "gracePeriodSeconds"))
        if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
            raise BadRequest(f"gracePeriodSeconds: Invalid value: {grace!r}: must be an integer")
        policy = query.propagation(body.get("propagationPolicy", q.get("propagationPolicy")))
        orphan = body.get("orphanDependents", None)
        if orphan is None and "orphanDependents" in q:
            orphan = query.boolean(q, "orphanDependents")
        if policy is None and orphan is not None:
            policy = "Orphan" if orphan else "Background"
        dry = body.get("dryRun")
        if dry is not None and not isinstance(dry, list):
            raise BadRequest("dryRun must be a list")
        dry_run = query.dry_run([str(v) for v in dry or []] + q.getall("dryRun", [])) or None
        pre = body.get("preconditions")
        if pre is not None and not isinstance(pre, dict):
            raise BadRequest("preconditions must be an object")
        return {"gracePeriodSeconds": grace, "propagationPolicy": policy, "preconditions": pre or None,
                "dryRun": dry_run}

    # --- watch

    async def _watch(self, request: web.Request, info: RequestInfo, r, out: media.Output,
                     include: str) -> web.StreamResponse:
        q = request.query
        timeout = query.integer(q, "timeoutSeconds")
        limit = float(timeout) if timeout else random.uniform(*self.watch_timeout)
        if info.subresource:
            raise Refusal(status.not_found_path())
        field_selector = _named_selector(info.name, q.get("fieldSelector", ""))
        events = self.handlers["watch"](resource=r.plural, namespace=(info.namespace or None) if r.namespaced
                                        else None, label_selector=q.get("labelSelector", ""),
                                        field_selector=field_selector,
                                        resource_version=q.get("resourceVersion", ""),
                                        allow_bookmarks=query.boolean(q, "allowWatchBookmarks"),
                                        batched=False)  # HTTP's watch is an event per chunk
        response: web.StreamResponse | None = None
        pending = asyncio.ensure_future(events.__anext__())
        try:
            done, _ = await asyncio.wait({pending}, timeout=WATCH_START)
            if done and not isinstance(pending.exception(), (Gone, StopAsyncIteration, type(None))):
                raise pending.exception()
            response = web.StreamResponse(status=200, headers={"Content-Type": media.JSON,
                                                               "Cache-Control": "no-cache, private"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            async with asyncio.timeout(limit):
                while True:
                    try:
                        event = await pending
                    except StopAsyncIteration:
                        break
                    except Gone as err:  # 410 Expired, as an event of the stream
                        await response.write(_line({"type": "ERROR", "object": status.from_wire(err)[1]}))
                        break
                    await response.write(_line(self._event(r.kind, event, out, include)))
                    pending = asyncio.ensure_future(events.__anext__())
        except TimeoutError:
            pass  # timeoutSeconds: the stream ends, the client starts a new one
        except WireError as err:
            if response is None:
                raise
            await response.write(_line({"type": "ERROR", "object": status.from_wire(err)[1]}))
        finally:
            if not pending.done():
                pending.cancel()
                try:
                    await pending
                except BaseException:
                    pass
            await events.aclose()
        await response.write_eof()
        return response

    def _event(self, kind: str, event: dict, out: media.Output, include: str) -> dict:
        obj = event.get("object")
        if out.form == "Table" and isinstance(obj, dict):
            if event.get("type") == "BOOKMARK":
                obj = {"kind": "Table", "apiVersion": f"meta.k8s.io/{out.version}",
                       "metadata": obj.get("metadata") or {}, "columnDefinitions": [], "rows": []}
            else:
                rv = (obj.get("metadata") or {}).get("resourceVersion", "")
                obj = tables.table(kind, [obj], self.clock(), include=include, version=out.version,
                                   list_meta={"resourceVersion": rv})
        elif out.form.startswith("PartialObjectMetadata") and isinstance(obj, dict):
            obj = tables.row_object(obj, "Metadata", out.version)
        return {"type": event.get("type"), "object": obj}

    # --- pods/log

    async def _log(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        q = request.query
        if self.state_dir is None:
            raise podlogs.no_state_dir()
        opts = podlogs.Options(container=q.get("container") or None, follow=query.boolean(q, "follow"),
                               previous=query.boolean(q, "previous"), tail_lines=query.integer(q, "tailLines"),
                               since_seconds=query.integer(q, "sinceSeconds", minimum=1),
                               timestamps=query.boolean(q, "timestamps"),
                               limit_bytes=query.integer(q, "limitBytes", minimum=1))
        pod = await self._call("get", resource="pods", name=info.name, namespace=info.namespace or "default")
        path = podlogs.log_path(self.state_dir, pod, opts.container, opts.previous)
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            async for chunk in podlogs.stream(path, opts, self.clock):
                await response.write(chunk)
        except OSError as err:  # the file went away with its pod: the stream just ends
            log.info("log of pod %s/%s: %s", info.namespace, info.name, err)
        await response.write_eof()
        return response


def _parameters(fn) -> set[str] | None:
    """The keyword names a handler takes; None if it takes any (**params)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return set(params)


def _named_selector(name: str, field_selector: str) -> str:
    """The field selector of a watch of one named object (/api/v1/watch/namespaces/x/pods/name):
    the client's, if it selects exactly that name, else metadata.name=<name>; a selector that
    selects anything else is refused, as kube-apiserver's ListResource does."""
    if not name:
        return field_selector
    if not field_selector:
        return f"metadata.name={fields.escape_value(name)}"
    try:
        selected = fields.parse_field_selector(field_selector).requires_exact_match("metadata.name")
    except fields.FieldSelectorError as err:
        raise BadRequest(str(err)) from None
    if selected != name:
        raise BadRequest("fieldSelector metadata.name doesn't match requested name")
    return field_selector


async def _expect(request: web.BaseRequest) -> None:
    """`Expect: 100-continue` (curl's, before a body over 1 KiB) is answered at once, any other
    expectation is 417 (HTTPExpectationFailed, answered by aiohttp), as aiohttp's router does."""
    if request.version == HttpVersion11:
        if request.headers["Expect"].lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {request.headers['Expect']}")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own size starts after this line
        await request.writer.drain()


def _line(event: dict) -> bytes:
    return media.encode_json(event) + b"\n"


def _success(r, name: str) -> dict:
    """What a binding answers (a Status of success, as kube-apiserver's)."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "kind": r.plural}, "code": 201}
