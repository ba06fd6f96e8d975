"""The idempotency modes behind one abstract base (:class:`~idempotent_runtime.modes.base.BaseMode`).

Only the configured mode's module is imported (cold start).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idempotent_runtime.config import Config
from idempotent_runtime.contract import Mode
from idempotent_runtime.message import Message
from idempotent_runtime.modes.base import BaseMode, Done, RecordState

__all__ = ["BaseMode", "Done", "RecordState", "make_mode"]


def make_mode(
    config: Config, dynamodb: Callable[[], Any], processor: Callable[[Message], Any] | None, **options: Any
) -> BaseMode:
    """The mode ``config.mode`` names, with its processor (required for transaction and guarded: the
    consumer checks it with the contract's settings rules) and :class:`BaseMode`'s ``options``."""
    mode_class: type[BaseMode]
    if config.mode == Mode.DOCUMENT:
        from idempotent_runtime.modes.document import DocumentMode as mode_class
    elif config.mode == Mode.VERSIONED:
        from idempotent_runtime.modes.versioned import VersionedMode as mode_class
    elif config.mode == Mode.TRANSACTION:
        from idempotent_runtime.modes.transaction import TransactionMode as mode_class
    else:
        from idempotent_runtime.modes.guarded import GuardedMode as mode_class
    return mode_class(config, dynamodb, processor, **options)
