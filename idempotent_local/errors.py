"""The local tool's errors: each one means "here is what went wrong and what to do", shown as one message."""

from __future__ import annotations


class LocalCloudError(RuntimeError):
    """A failure the user can act on; the command line prints its message and exits with code 1."""


class RunnerError(LocalCloudError):
    """The runner cannot do its job (no mapping, no code, a function that fails its cold start)."""


class DemoError(LocalCloudError):
    """The demo cannot run against what is deployed."""
