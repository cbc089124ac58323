"""Torch hooks that act only in the thread that registered them.

A server runs several students' passes through one shared model at once, one per thread. A hook registered on a
shared module is called by every pass; this one reads (or changes) only the pass of the thread that made it, and
does nothing in the others, which therefore need no lock around their passes.
"""

from __future__ import annotations

import threading

import torch


def in_this_thread(hook):
    """``hook`` acting only when called from the calling thread; elsewhere it returns None, which changes nothing
    (it takes any arguments: a pass may still call it as another thread removes it)."""
    owner = threading.get_ident()

    def hook_in_owner_thread(*args):
        return hook(*args) if threading.get_ident() == owner else None
    return hook_in_owner_thread


def hook_input(module: torch.nn.Module, hook, *, with_kwargs: bool = False):
    """Call ``hook`` before ``module`` runs in this thread's passes; returns the handle that removes it."""
    return module.register_forward_pre_hook(in_this_thread(hook), with_kwargs=with_kwargs)


def hook_output(module: torch.nn.Module, hook, *, with_kwargs: bool = False):
    """Call ``hook`` after ``module`` runs in this thread's passes (it may replace the output); returns the handle."""
    return module.register_forward_hook(in_this_thread(hook), with_kwargs=with_kwargs)
