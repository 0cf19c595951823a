"""kubectl's habits in `kubemu`: get, describe, apply, create, delete, scale, rollout, events."""
from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the kubectl-style commands to the `kubemu` group."""
