"""The tools' errors live in :mod:`idempotent_cli.errors`; this name stays for the modules that import it."""

from idempotent_cli.errors import Ambiguous, DlqError

__all__ = ["Ambiguous", "DlqError"]
