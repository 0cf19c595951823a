"""Options the commands share, and Go's spelling of boolean flags.

kubectl's flags are Go flags: a boolean is `--wait`, `--wait=true` or `--wait=false`, and
never takes the next argument as its value. `GoCommand` accepts that spelling for click's
boolean flags (`--wait/--no-wait`), so `kubemu delete pod x --wait=false` works as it does
with kubectl.
"""
from __future__ import annotations

import click

TRUE = ("true", "t", "1")
FALSE = ("false", "f", "0")

namespace_option = click.option("-n", "--namespace", default=None,
                                help="the namespace (default: default, or a manifest's own)")
all_namespaces_option = click.option("-A", "--all-namespaces", is_flag=True,
                                     help="across all namespaces (adds a NAMESPACE column)")
watch_timeout_option = click.option("--watch-timeout", type=float, default=None, hidden=True,
                                    help="stop watching after this many seconds (for tests)")


class GoCommand(click.Command):
    """A click command whose boolean flags also read `--flag=true|false`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        out: list[str] = []
        for i, arg in enumerate(args):
            if arg == "--":
                out.extend(args[i:])
                break
            out.extend(self._go_bool(arg))
        return super().parse_args(ctx, out)

    def _go_bool(self, arg: str) -> list[str]:
        name, eq, value = arg.partition("=")
        if not eq or not name.startswith("--") or value.lower() not in TRUE + FALSE:
            return [arg]
        for param in self.params:
            if isinstance(param, click.Option) and param.is_flag and param.is_bool_flag and name in param.opts:
                if value.lower() in TRUE:
                    return [name]
                return param.secondary_opts[:1]  # no --no-X spelling: false is leaving the flag out
        return [arg]
