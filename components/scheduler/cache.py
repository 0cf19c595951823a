"""The scheduler's view of the cluster: nodes and where every pod is, assumptions included
(kube-scheduler's internal cache, pure).

    cache.set_node(node)              # node informer: add / update
    cache.add_pod(key, bound_pod)     # pod informer: a pod with spec.nodeName (confirms an assumption)
    cache.assume(key, pod, "node-1")  # right after a decision, before the bind is even sent
    cache.forget(key)                 # the bind failed: take the assumption back
    schedule(pod, cache.nodes(), cache.infos, ...)

Assume/forget is what lets decisions run serially while binds run concurrently: the next
decision already counts the pods just placed, before the watch shows their bindings. The watch
then confirms each assumption (same key, now with spec.nodeName); a pod the watch shows on
another node than assumed (someone else bound it) simply moves there.

Methods that take pods off a node return True when they freed room on it, which is when
kube-scheduler gives the unschedulable pods another try (an assigned pod deleted).
"""
from __future__ import annotations

from typing import Optional

from components.scheduling import filters as F

from .nodeinfo import NodeInfo


class SchedulerCache:
    def __init__(self) -> None:
        self.infos: dict[str, NodeInfo] = {}   # node name -> NodeInfo; what schedule() takes
        self._pod_node: dict[str, str] = {}    # pod key -> the node it is bound or assumed on
        self._assumed: set[str] = set()
        self._infos: Optional[list] = None     # the known nodes' NodeInfos by name, rebuilt on change

    # -- nodes --

    def set_node(self, node: dict) -> None:
        name = F.node_name(node)
        info = self.infos.get(name)
        if info is None:
            self.infos[name] = NodeInfo(name, node)
            self._infos = None
        else:
            if info.node is None:   # a ghost (pods named it first) joins the nodes offered
                self._infos = None
            info.set_node(node)   # a known node's update keeps its place in node_infos()

    def remove_node(self, name: str) -> None:
        """Forget a deleted node; pods still bound to it keep a ghost NodeInfo until they go."""
        info = self.infos.get(name)
        if info is None:
            return
        if len(info):
            info.set_node(None)
        else:
            del self.infos[name]
        self._infos = None

    def node_infos(self) -> list[NodeInfo]:
        """The NodeInfos of the nodes to schedule onto, in a stable order (by name)."""
        if self._infos is None:
            self._infos = [info for _, info in sorted(self.infos.items()) if info.node is not None]
        return self._infos

    def nodes(self) -> list:
        """The objects of the nodes to schedule onto, in node_infos()'s order."""
        return [info.node for info in self.node_infos()]

    # -- pods --

    def add_pod(self, key: str, pod: dict) -> bool:
        """A bound pod as the informer shows it (add, update, or the confirmation of an
        assumption). True if this freed room somewhere: it finished (a terminal pod holds
        nothing, so it leaves its node), moved, or asks for less."""
        if F.is_terminal(pod):
            return self.remove_pod(key)
        node = (pod.get("spec") or {}).get("nodeName")
        self._assumed.discard(key)
        freed = False
        previous = self._pod_node.get(key)
        if previous is not None and previous != node:
            freed = self.remove_pod(key)
        info = self.infos.get(node)
        if info is None:
            info = self.infos[node] = NodeInfo(node)
        before = info.requested
        info.add_pod(key, pod)
        self._pod_node[key] = node
        after = info.requested   # lower only when the pod replaced itself with smaller requests
        return freed or after.cpu < before.cpu or after.memory < before.memory

    def remove_pod(self, key: str) -> bool:
        """The pod is gone from its node (deleted, terminal, or an assumption withdrawn).
        True if it was on one."""
        self._assumed.discard(key)
        node = self._pod_node.pop(key, None)
        if node is None:
            return False
        info = self.infos.get(node)
        if info is not None:
            info.remove_pod(key)
            if not len(info) and info.node is None:
                del self.infos[node]
        return True

    def assume(self, key: str, pod: dict, node: str) -> None:
        """Count `pod` on `node` from now on, as if bound there."""
        self.remove_pod(key)
        info = self.infos.get(node)
        if info is None:
            info = self.infos[node] = NodeInfo(node)
        info.add_pod(key, pod)
        self._pod_node[key] = node
        self._assumed.add(key)

    def forget(self, key: str) -> bool:
        """Withdraw an assumption the watch has not confirmed; True if there was one."""
        if key not in self._assumed:
            return False
        return self.remove_pod(key)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed
