"""The two prctl(2) calls a supervisor needs, through ctypes (Linux only)."""
from __future__ import annotations

import ctypes
import os

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> None:
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_child_subreaper() -> None:
    """Orphaned descendants are re-parented to us instead of to PID 1, so we reap them."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_pdeathsig(sig: int) -> None:
    """Deliver `sig` to the calling process when its parent (thread) dies."""
    _prctl(PR_SET_PDEATHSIG, sig)
