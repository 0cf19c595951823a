"""The CSR approver's shell (k8s pkg/controller/certificates/approver): every pending request is
synced; for each permission the pure core (components/controllers/csrapproving.py) recognizes,
a SubjectAccessReview asks the apiserver's authorizer whether the requester holds it, and the
first that is allowed approves the request through the approval subresource. A request none
allows is looked at again with backoff (the requester may be granted the permission later).
"""
from __future__ import annotations

import time

from components.controllers.csrapproving import access_review, approve, recognizers
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import RetryLater, Workers
from kubemu.apiclient import ApiClient


class CSRApprover:
    def __init__(self, api: ApiClient, informers: SharedInformers, clock=time.time):
        self.api = api
        self.clock = clock
        self.csrs = informers.informer("certificatesigningrequests")
        self.workers = Workers("csrapproving", self.sync)
        self.csrs.add_event_handler(self._queue, lambda _old, new: self._queue(new), None)

    def _queue(self, csr: dict) -> None:
        self.workers.add((csr.get("metadata") or {}).get("name", ""))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        pass

    async def sync(self, name: str) -> None:
        csr = self.csrs.get(name)
        tried = []
        for recognizer in recognizers(csr) if csr is not None else ():
            tried.append(recognizer.subresource)
            review = await self.api.review("subjectaccessreviews",
                                           access_review(csr, recognizer.subresource))
            if (review.get("status") or {}).get("allowed"):
                await self.api.update_approval(approve(csr, recognizer.message, self.clock()))
                return
        if tried:  # retried with backoff: the requester may be granted the permission later
            raise RetryLater(f"recognized csr {name!r} as {tried} but subject access review was "
                             f"not approved")
