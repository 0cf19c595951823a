"""kubectl's habits in `kubemu`: get, describe, apply, create, delete, expose, scale, rollout, events,
cordon, uncordon, drain.

    kubemu [-s ENDPOINT] get pods [-n NS | -A] [-l SEL] [--field-selector SEL] [-o wide|json|yaml|name] [-w]
    kubemu describe deployment web
    kubemu apply -f app.yaml          kubemu create -f pod.yaml        kubemu delete -f app.yaml
    kubemu scale deployment/web --replicas 3
    kubemu expose deployment web --port 80 --target-port 8000 [--type NodePort]
    kubemu rollout status|history|undo deployment/web|statefulset/db|daemonset/agent
    kubemu events [--for pod/web] [-w]
    kubemu port-forward pod/web 18080:8000 [--address 127.0.0.1,::1]
    kubemu cordon|uncordon node-1       kubemu drain node-1 [--ignore-daemonsets] [--timeout 2m]
    kubemu certificate approve|deny node-csr-x [--force]

Output and errors read like kubectl's (tables aligned as its tabwriter aligns them, `Error from
server (NotFound): pods "x" not found`, `The Deployment "web" is invalid: ...`); the exit
status is 1 on any error.

Modules: pure formatting (`printers`, `tabwriter`, `timefmt`, `describe*`, `history`), pure
logic (`manifests`, `apply`, `threeway`, `targets`, `durations`), the connection and error
wording (`session`), and one module per command (`cmd_*`).
"""
from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the kubectl-style commands to the `kubemu` group."""
    # imported here: the command modules import kubemu.cli lazily, and kubemu.cli imports this
    from .cmd_apply import apply, create
    from .cmd_certificate import certificate
    from .cmd_delete import delete
    from .cmd_describe import describe_cmd
    from .cmd_drain import cordon, drain_cmd, uncordon
    from .cmd_events import events
    from .cmd_expose import expose
    from .cmd_get import get
    from .cmd_portforward import port_forward
    from .cmd_rollout import rollout
    from .cmd_scale import scale

    for command in (get, describe_cmd, apply, create, delete, expose, scale, rollout, events, port_forward,
                    cordon, uncordon, drain_cmd, certificate):
        group.add_command(command)
