"""The idempotency modes behind one abstract base (:class:`~idempotent_runtime.modes.base.BaseMode`).

Only the configured mode's module is imported (cold start).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from idempotent_runtime.config import Config
from idempotent_runtime.contract import Mode
from idempotent_runtime.message import Message
from idempotent_runtime.modes.base import BaseMode, Done, RecordState, Warn
from idempotent_runtime.retries import Retrier

__all__ = ["BaseMode", "Done", "RecordState", "make_mode"]


def make_mode(
    config: Config,
    dynamodb: Callable[[], Any],
    processor: Callable[[Message], Any] | None,
    *,
    clock: Callable[[], float] = time.time,
    calls: Retrier | None = None,
    warn: Warn | None = None,
) -> BaseMode:
    """The mode ``config.mode`` names, with its processor (required for transaction and guarded: the
    consumer checks it with the contract's settings rules)."""
    mode_class: type[BaseMode]
    if config.mode == Mode.DOCUMENT:
        from idempotent_runtime.modes.document import DocumentMode

        mode_class = DocumentMode
    elif config.mode == Mode.VERSIONED:
        from idempotent_runtime.modes.versioned import VersionedMode

        mode_class = VersionedMode
    elif config.mode == Mode.TRANSACTION:
        from idempotent_runtime.modes.transaction import TransactionMode

        mode_class = TransactionMode
    else:
        from idempotent_runtime.modes.guarded import GuardedMode

        mode_class = GuardedMode
    return mode_class(config, dynamodb, processor, clock=clock, calls=calls, warn=warn)
