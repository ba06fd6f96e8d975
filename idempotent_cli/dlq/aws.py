"""The clients live in :mod:`idempotent_cli.aws`; this name stays for the modules that import it."""

from idempotent_cli.aws import Clients, connect

__all__ = ["Clients", "connect"]
