"""The scheduler's pure decision core: kube-scheduler's default filters and scores over
Kubernetes-shaped dicts, the framework that runs them and words the failure message, and the
per-pod retry backoff. No I/O and no clocks: `components.scheduler` wraps this in a process."""
