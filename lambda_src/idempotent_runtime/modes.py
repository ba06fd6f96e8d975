"""What the three idempotency modes share: the table's attribute names, the clock, and the rule that a
record past its TTL counts as absent."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from idempotent_runtime.config import Config
from idempotent_runtime.message import Message

# DynamoDB deletes expired items up to ~48 h after their TTL: every condition treats such a record as absent.
ABSENT = "attribute_not_exists(#pk) OR #ttl < :now"


class Mode:
    """Base of the modes; each adds ``process(message, context) -> (outcome, result)``."""

    name = ""
    # Bytes of the sort key a mode reserves for itself (the transaction marker's prefix).
    sort_reserve = 0

    def __init__(
        self,
        config: Config,
        dynamodb: Callable[[], Any],
        processor: Callable[[Message], Any] | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = config.table_name
        self.pk, self.sk, self.ttl = config.partition_key, config.sort_key, config.ttl_attribute
        self.ttl_seconds = config.ttl_seconds
        self.names = {"#pk": self.pk, "#ttl": self.ttl}
        self.dynamodb = dynamodb
        self.processor = processor
        self.clock = clock
