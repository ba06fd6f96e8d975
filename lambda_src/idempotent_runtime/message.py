"""One SQS record as processing functions see it."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

from idempotent_runtime.contract import FIFO_QUEUE_SUFFIX
from idempotent_runtime.errors import InvalidMessage, Misconfiguration
from idempotent_runtime.payload import NotANumber, RepeatedName, constant_path, parse_json, repeated_path

_UNPARSED: Any = object()
# 1-128 printable ASCII characters: what SNS accepts as a MessageDeduplicationId, and what third-party APIs
# accept as an idempotency key.
_PLAIN_KEY = re.compile(r"[!-~]{1,128}")


def join_key(parts: Sequence[str], separator: str = "#", plain: re.Pattern[str] = _PLAIN_KEY) -> str:
    """One string that identifies ``parts``: ``a#b`` when that is unambiguous and short printable ASCII.

    When a part contains the separator (``"acct#1" + "p"`` and ``"acct" + "1#p"`` would both join to
    ``acct#1#p``), or the joined text is over 128 characters or not printable ASCII (does not match
    ``plain``, matched against the whole text: a trailing newline is no exception), it is the SHA-256 (hex)
    of ``json.dumps(parts)`` instead, which no two different lists of parts share; two or more parts joined
    hold the separator, so they are never a digest unless it is a hex digit.
    """
    text = separator.join(parts)
    unambiguous = len(parts) == 1 or (separator and not any(separator in part for part in parts))
    if unambiguous and plain.fullmatch(text):
        return text
    return hashlib.sha256(json.dumps(list(parts)).encode("ascii")).hexdigest()


class Key:
    """A record's idempotency key: the item's partition and sort key values as stored (the partition value
    begins with ``KEY_PREFIX``).

    ``idempotency_key`` is the one string to hand to third-party APIs; ``str(key)`` (``partition#sort``) is
    for logs and can be the same for two keys whose values contain ``#``.
    """

    __slots__ = ("partition", "sort")

    def __init__(self, partition: str, sort: str) -> None:
        self.partition = partition
        self.sort = sort

    @property
    def idempotency_key(self) -> str:
        """``partition#sort`` when unambiguous and ≤ 128 printable ASCII characters, else a SHA-256 (hex)
        of both parts: the same for the same key, different for different keys (see :func:`join_key`)."""
        return join_key((self.partition, self.sort))

    def as_dict(self) -> dict[str, str]:
        return {"partition": self.partition, "sort": self.sort}

    def __str__(self) -> str:
        return f"{self.partition}#{self.sort}"

    def __repr__(self) -> str:
        return f"Key({self.partition!r}, {self.sort!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and (self.partition, self.sort) == (other.partition, other.sort)

    def __hash__(self) -> int:
        return hash((self.partition, self.sort))


class Claim(Protocol):
    """What guarded mode hands a message as ``message.lease``: the claim the invocation holds on its key."""

    @property
    def expires_at(self) -> float: ...
    def remaining(self) -> float: ...
    def extend(self, seconds: float) -> float: ...


class Emitter(Protocol):
    """What the outbox hands a message as ``message.outbox``: ``add`` checks one emit and returns its
    deduplication id. The message type knows neither the modes nor the outbox: they attach these to it."""

    def add(self, body: Any, group_id: Any, attributes: Any) -> str: ...


class Message:
    """An SQS record from Lambda's event, with its parsed body and idempotency key.

    ``body`` is the raw text, ``data`` the JSON body parsed once with exact numbers (invalid JSON raises
    :class:`~idempotent_runtime.errors.InvalidMessage`). The runtime sets ``key`` before the processor runs
    (``key.idempotency_key`` is the one to pass to third-party APIs), in guarded mode ``lease``, and
    ``outbox`` (see :meth:`emit`).
    """

    __slots__ = ("_data", "attributes", "body", "group_id", "key", "lease", "message_id", "outbox", "record")

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.message_id: str = record["messageId"]
        body = record.get("body")
        self.body: str = body if isinstance(body, str) else ""
        attributes = record.get("attributes")
        self.attributes: dict[str, str] = attributes if isinstance(attributes, dict) else {}
        self.group_id: str | None = self.attributes.get("MessageGroupId")
        self.key: Key | None = None
        self.lease: Claim | None = None
        self.outbox: Emitter | None = None
        self._data: Any = _UNPARSED

    @property
    def dedup_id(self) -> str | None:
        return self.attributes.get("MessageDeduplicationId")

    @property
    def from_fifo_queue(self) -> bool | None:
        """Whether the record's queue (``eventSourceARN``) is a FIFO queue; None when it names no queue."""
        arn = self.record.get("eventSourceARN")
        return arn.endswith(FIFO_QUEUE_SUFFIX) if isinstance(arn, str) and arn else None

    @property
    def receive_count(self) -> int:
        try:
            return int(self.attributes.get("ApproximateReceiveCount", "1"))
        except ValueError:
            return 1

    @property
    def message_attributes(self) -> dict[str, Any]:
        attributes = self.record.get("messageAttributes")
        return attributes if isinstance(attributes, dict) else {}

    @property
    def data(self) -> Any:
        if self._data is _UNPARSED:
            self._data = _parse(self.body)
        return self._data

    def emit(self, body: Any, *, group_id: str | None = None, attributes: Any = None) -> str:
        """Send ``body`` (a dict as JSON, or a text) to the emit target with this message's effect; returns
        its deduplication id (docs/runtime.md, "Emitting messages")."""
        if self.outbox is None:
            raise Misconfiguration(
                "message.emit() was called but this consumer emits nowhere",
                "the consumer has no emit_target (EMIT_TARGET_ARN), or its mode cannot emit",
            )
        return self.outbox.add(body, group_id, attributes)

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; anything else is a permanent error."""
        data = self.data
        if not isinstance(data, dict):
            raise InvalidMessage(
                f"body must be a json object, got {type(data).__name__}: {_excerpt(self.body)}"
            )
        return data


def _parse(body: str) -> Any:
    try:
        return parse_json(body)
    except NotANumber:
        found = constant_path(body)
        where, name = found if found is not None else ("body", "NaN or Infinity")
        raise InvalidMessage(
            f"{where} is {name}, which is not a JSON number and cannot be stored in dynamodb"
        ) from None
    except RepeatedName:
        where = repeated_path(body) or "(unknown)"
        raise InvalidMessage(
            f"body field {where} appears more than once in its object; a JSON object's names must be "
            "unique (parsers differ on which value counts)"
        ) from None
    except RecursionError:
        raise InvalidMessage(
            f"body is nested too deeply to parse (thousands of levels; dynamodb stores at most 32): "
            f"{_excerpt(body)}"
        ) from None
    except ValueError as exc:
        raise InvalidMessage(f"body is not valid json ({exc}): {_excerpt(body)}") from None


def _excerpt(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")
