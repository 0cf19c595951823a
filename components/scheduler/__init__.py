"""The scheduler process (kube-scheduler's role): binds every pending pod to a node.

    python -m components.scheduler --api ipc:///run/kubemu/api.sock

The decisions are `components.scheduling`'s (filters, scores, kube-scheduler's messages). Here:

  queue.py      the scheduling queue: active / backoff / unschedulable, pure, fake-clock tested
  nodeinfo.py   one node's pods with running request totals
  cache.py      nodes and where every pod is, with kube-scheduler's assume / forget
  plugins.py    the framework's plugins fed from those totals (no re-summing per decision)
  triage.py     which pods and changes matter; the PodScheduled=False status patch
  scheduler.py  the asyncio shell: informers, the decision loop, concurrent binds, Events
"""
