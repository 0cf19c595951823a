"""The only place kube-proxy touches the kernel: `nft` run inside the cluster's fabric
namespace (`nsenter --net=<fabric> nft ...`), a transaction's text on stdin, and `conntrack -D`
there for stale UDP flows. Every command names the namespace it enters, so none can reach the
host's (without a fabric the caller falls back to userspace)."""
from __future__ import annotations

import asyncio
import json
import os
import shutil

from components.kube_proxy.rules import FAMILY, cleanup

NFT = "nft"
NFT_TIMEOUT = 60.0   # a full sync of thousands of services takes seconds (nft 1.0.6 is quadratic)
PROBE_TIMEOUT = 10.0
BRIDGE_NF_CALL_IPTABLES = "/proc/sys/net/bridge/bridge-nf-call-iptables"


class NftError(RuntimeError):
    """`nft` failed; the message is one line."""


def find_tool(name: str) -> str | None:
    """A tool's path: PATH, else where Debian puts it (a pod's PATH may lack /usr/sbin)."""
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)),
                                      None)


def find_nft() -> str | None:
    return find_tool(NFT)


def argv(netns: str, tool: str, *args: str) -> list[str]:
    """`tool args` inside the namespace `netns`."""
    return ["nsenter", f"--net={netns}", tool, *args]


def one_line(stderr: str) -> str:
    """nft's error, the offending input line beside it: `Error: ... (at: add rule ...)`."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "Error:" in line:
            message = line[line.index("Error:"):]
            source = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("^") else ""
            return f"{message} (at: {source[:200]})" if source else message
    return lines[0][:300] if lines else "nft failed without a message"


async def run(netns: str, args: list[str], stdin: str | None = None,
              timeout: float = NFT_TIMEOUT, nft: str = NFT) -> str:
    """stdout of `nft args` (in `netns`); NftError with one line otherwise."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv(netns, nft, *args),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        raise NftError(f"cannot run {nft}: {exc.strerror or exc}") from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin is not None else None), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise NftError(f"nft {' '.join(args)}: no answer within {timeout:g}s") from None
    if proc.returncode != 0:
        raise NftError(one_line(err.decode(errors="replace")))
    return out.decode(errors="replace")


async def apply(netns: str, text: str, timeout: float = NFT_TIMEOUT, nft: str = NFT) -> None:
    """One atomic transaction: all of `text` or, on any error, nothing."""
    if text:
        await run(netns, ["-f", "-"], stdin=text, timeout=timeout, nft=nft)


def _items(text: str) -> list[dict]:
    """The objects of `nft -j` output."""
    try:
        items = json.loads(text).get("nftables", [])
    except (ValueError, AttributeError):
        raise NftError("nft -j: unreadable JSON") from None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def parse_listing(text: str) -> tuple[list[str], dict[str, int | None]]:
    """`nft -j list table` → (chain names, set name → timeout in seconds or None)."""
    chains: list[str] = []
    sets: dict[str, int | None] = {}
    for item in _items(text):
        if isinstance(item.get("chain"), dict):
            chains.append(str(item["chain"].get("name")))
        elif isinstance(item.get("set"), dict):
            timeout = item["set"].get("timeout")
            sets[str(item["set"].get("name"))] = timeout if isinstance(timeout, int) else None
    return chains, sets


async def list_table(netns: str, table: str, nft: str = NFT) -> tuple[list[str], dict[str, int | None]]:
    """The chains and sets of our table; empty when it does not exist (yet)."""
    tables = _items(await run(netns, ["-j", "list", "tables", FAMILY], timeout=PROBE_TIMEOUT, nft=nft))
    if not any(isinstance(i.get("table"), dict) and i["table"].get("name") == table for i in tables):
        return [], {}
    return parse_listing(await run(netns, ["-j", "list", "table", FAMILY, table], nft=nft))


async def delete_table(netns: str, table: str, nft: str = NFT) -> None:
    """`--cleanup`: this proxy's table gone (a missing table is no error)."""
    await apply(netns, cleanup(table), nft=nft)


async def fabric_problem(netns: str, nft: str = NFT) -> str | None:
    """Why nft cannot program the fabric `netns`, or None when it can."""
    if not os.path.exists(netns):
        return f"the fabric network namespace {netns} does not exist"
    try:
        await run(netns, ["list", "tables"], timeout=PROBE_TIMEOUT, nft=nft)
    except NftError as exc:
        return f"nft in the fabric {netns}: {exc}"
    return None


async def bridge_nf_call_iptables(netns: str) -> bool:
    """Whether bridged packets in the fabric pass through nftables' ip hooks (br_netfilter's
    per-namespace net.bridge.bridge-nf-call-iptables, read from inside the fabric)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv(netns, "cat", BRIDGE_NF_CALL_IPTABLES), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        out, _ = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT)
    except (OSError, asyncio.TimeoutError):
        return False
    return proc.returncode == 0 and out.strip() == b"1"


async def delete_flows(netns: str, filters: list[tuple[str, ...]], conntrack: str = "conntrack") -> str | None:
    """`conntrack -D <filter>` for each filter, in the fabric; why it could not, or None. No
    flow to delete (conntrack's exit status 1) is no error."""
    for flt in filters:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv(netns, conntrack, "-D", *flt), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            _, err = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT)
        except OSError as exc:
            return f"cannot run {conntrack}: {exc.strerror or exc}"
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return f"conntrack -D {' '.join(flt)}: no answer within {PROBE_TIMEOUT:g}s"
        if proc.returncode not in (0, 1):
            return one_line(err.decode(errors="replace"))
    return None