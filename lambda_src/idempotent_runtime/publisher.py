"""Producer helper: publish JSON messages so that the consumer sees each content of a key once and every
message group in order.

Keys and fingerprints are read with the consumer's own code - its JSON parser, :class:`KeyBuilder` and
:class:`Fingerprinter` - from the consumer's settings (:class:`ConsumerKeys`). The deduplication id follows
the consumer's key source:

* ``fields`` and ``field``: the key and the content fingerprint (``order#line#<sha256>``): an exact resend
  is dropped by SNS within 5 minutes; the same key with new content reaches the consumer, which reports a
  conflict.
* ``dedup_id``: the business key alone (the consumer keys by the id itself: an id made from new content
  would be a new key, and a second effect).
* ``message_id``, ``body_sha256``: the SHA-256 of the body (for ``body_sha256`` the consumer's key).

Order: a request carries at most one message of a group, and a group's next message is sent only after SNS
accepted the one before. After a failure the group stops: its later messages are not attempted, so sending
the unpublished messages again (``result.unpublished``), in order, keeps the group's order.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from idempotent_runtime.config import Config
from idempotent_runtime.contract import (
    FIELD_KEY_SOURCES,
    FIFO_ONLY_KEY_SOURCES,
    FIFO_QUEUE_SUFFIX,
    KEY_SOURCE,
    KeySource,
)
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.keys import KeyBuilder, key_parts
from idempotent_runtime.message import Message, join_key
from idempotent_runtime.payload import Fingerprinter, raw_fingerprint

MAX_BATCH = 10  # PublishBatch's and SendMessageBatch's limit on entries...
MAX_BATCH_BYTES = 262_144  # ...and on the bodies of a request together (256 KiB)


class Status(StrEnum):
    """What happened to one input message."""

    PUBLISHED = "published"  # SNS accepted it (result.message_ids holds its id)
    FAILED = "failed"  # SNS refused it, or its request failed (result.failed says why)
    NOT_ATTEMPTED = "not_attempted"  # not sent: an earlier message of its group failed, or the call stopped


@dataclass(frozen=True)
class PublishFailure:
    """One message SNS did not accept: its position in the input, group, dedup id, and SNS's error."""

    index: int
    group_id: str | None
    dedup_id: str | None
    code: str
    message: str
    sender_fault: bool

    def __repr__(self) -> str:
        fault = "sender" if self.sender_fault else "service"
        where = f"index={self.index}, group_id={self.group_id!r}, dedup_id={self.dedup_id!r}"
        return f"PublishFailure({where}, {self.code} ({fault} fault): {self.message})"


class PublishResult:
    """``statuses[i]`` says what happened to input ``i``; ``message_ids[i]`` is SNS's (or SQS's) id for it
    (None unless published); ``group_ids[i]`` its MessageGroupId; ``failed`` lists the failures;
    ``unpublished`` the inputs to send again, in order; ``counts`` the inputs per status."""

    def __init__(self, entries: Sequence[_Entry]) -> None:
        count = len(entries)
        self.statuses: list[Status] = [Status.NOT_ATTEMPTED] * count
        self.message_ids: list[str | None] = [None] * count
        self.group_ids: list[str | None] = [entry.group_id for entry in entries]
        self.failed: list[PublishFailure] = []
        self.counts: dict[Status, int] = {status: 0 for status in Status}
        self.counts[Status.NOT_ATTEMPTED] = count

    def _set(self, index: int, status: Status) -> None:
        self.counts[self.statuses[index]] -= 1
        self.counts[status] += 1
        self.statuses[index] = status

    def _published(self, index: int, message_id: str | None) -> None:
        self.message_ids[index] = message_id
        self._set(index, Status.PUBLISHED)

    def _failed(self, entry: _Entry, code: str, text: str, sender_fault: bool) -> None:
        self._set(entry.index, Status.FAILED)
        failure = PublishFailure(entry.index, entry.group_id, entry.dedup_id, code, text, sender_fault)
        self.failed.append(failure)

    @property
    def ok(self) -> bool:
        return self.counts[Status.PUBLISHED] == len(self.statuses)

    @property
    def unpublished(self) -> list[int]:
        """The inputs that failed or were not attempted, in input order: publishing them again (in this
        order) keeps every group's order."""
        return [index for index, status in enumerate(self.statuses) if status is not Status.PUBLISHED]

    def raise_for_failures(self) -> None:
        if not self.ok:
            raise PublishError(self)


class MessageRejected(ValueError):
    """An input the consumer would reject (or SNS would refuse), found before anything was sent."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"message {index}: {reason}")
        self.index = index
        self.reason = reason


class PublishError(RuntimeError):
    """Raised by :meth:`PublishResult.raise_for_failures`: not everything was published."""

    def __init__(self, result: PublishResult) -> None:
        unpublished = len(result.unpublished)
        shown = "; ".join(map(repr, result.failed[:5]))
        super().__init__(
            f"{unpublished} message(s) not published ({len(result.failed)} failed, "
            f"{result.counts[Status.NOT_ATTEMPTED]} not attempted): {shown}"
        )
        self.result = result
        self.failed = result.failed


@dataclass(frozen=True)
class ConsumerKeys:
    """How the consumer keys and fingerprints messages: give its own settings (``ConsumerOptions``, or
    :meth:`from_environment` with the deployed function's environment), so the publisher reads each key and
    fingerprint exactly as the consumer will.

    ``key_fields``: with ``key_source="fields"``, the consumer's ``(partition_key_field, sort_key_field)``
    (dotted paths); with ``"field"``, ``(partition_key_field,)``; with ``"dedup_id"``, the body fields whose
    values make each message's deduplication id, which is the consumer's key; none with ``"message_id"``
    and ``"body_sha256"``.
    ``fingerprint_fields`` / ``fingerprint_exclude`` and ``key_prefix`` as the consumer's (default: the
    whole body; no prefix).
    """

    key_fields: Sequence[str] | None = None
    key_source: KeySource | str = KeySource.FIELDS
    fingerprint_fields: Sequence[str] | None = None
    fingerprint_exclude: Sequence[str] | None = None
    key_prefix: str = ""
    _builder: KeyBuilder = field(init=False, repr=False, compare=False)
    _fingerprint: Fingerprinter = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            source = KeySource(self.key_source)
        except ValueError:
            choices = ", ".join(s.value for s in KeySource)
            raise ValueError(f"key_source must be one of {choices}, got {self.key_source!r}") from None
        fields = tuple(self.key_fields) if self.key_fields is not None else None
        _check_key_fields(source, fields)
        named = fields if source in FIELD_KEY_SOURCES and fields else ()
        partition, sort = [*named, None, None][:2]
        # Passed as given: Config refuses what the consumer would (a bare string, both lists, ...).
        chosen: Any = self.fingerprint_fields
        excluded: Any = self.fingerprint_exclude
        # The consumer's configuration with these settings: checked as the consumer checks it at cold start
        # (the table name is not used).
        config = Config(
            table_name="-",
            key_source=source,
            partition_key_field=partition,
            sort_key_field=sort,
            key_prefix=self.key_prefix,
            fingerprint_fields=chosen,
            fingerprint_exclude=excluded,
        )
        for name, value in (
            ("key_source", source),
            ("key_fields", fields),
            ("fingerprint_fields", config.fingerprint_fields),
            ("fingerprint_exclude", config.fingerprint_exclude),
            ("_builder", KeyBuilder(config)),
            ("_fingerprint", Fingerprinter(config.fingerprint_fields, config.fingerprint_exclude)),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def from_environment(
        cls, environment: Mapping[str, str], *, key_fields: Sequence[str] | None = None
    ) -> ConsumerKeys:
        """The settings of a deployed consumer, from its function's environment variables (KEY_SOURCE,
        PARTITION_KEY_FIELD, SORT_KEY_FIELD, FINGERPRINT_FIELDS, FINGERPRINT_EXCLUDE, KEY_PREFIX).
        ``key_fields`` only with KEY_SOURCE=dedup_id: which body fields make the id (the environment cannot
        say)."""
        config = Config.from_env(environment)
        if config.key_source in FIELD_KEY_SOURCES:
            if key_fields is not None:
                raise ValueError(
                    f"key_fields are the consumer's {_NAMED_FIELDS[config.key_source][2]} with "
                    f"{KEY_SOURCE.name}={config.key_source}; got {list(key_fields)!r} as well"
                )
            named = (config.partition_key_field, config.sort_key_field)
            key_fields = tuple(field for field in named if field is not None)
        return cls(
            key_fields=key_fields,
            key_source=config.key_source,
            fingerprint_fields=config.fingerprint_fields,
            fingerprint_exclude=config.fingerprint_exclude,
            key_prefix=config.key_prefix,
        )

    def read(self, body: str) -> tuple[dict[str, Any], str]:
        """The body's JSON object, as the consumer parses it, and its deduplication id. Raises
        :class:`InvalidMessage` with the consumer's reason for a body it would reject."""
        message = Message({"messageId": "-", "body": body})
        data = message.json_object()
        source = self.key_source
        if source in FIELD_KEY_SOURCES:
            key = self._builder(message)
            partition = key.partition[len(self.key_prefix) :]  # the id does not depend on a prefix
            return data, join_key((partition, key.sort, self._fingerprint(data)))
        if source is KeySource.DEDUP_ID:
            dedup = join_key(key_parts(data, self.key_fields or ()))
            keyed = Message({"messageId": "-", "body": body, "attributes": {"MessageDeduplicationId": dedup}})
            self._builder(keyed)  # the consumer's checks of the id as its key
            return data, dedup
        return data, raw_fingerprint(body)


# The body fields each key source reads, as key_fields, and the consumer's settings they are.
_NAMED_FIELDS = {
    KeySource.FIELDS: (2, "(partition_key_field, sort_key_field)", "PARTITION_KEY_FIELD and SORT_KEY_FIELD"),
    KeySource.FIELD: (1, "(partition_key_field,)", "PARTITION_KEY_FIELD"),
}


def _check_key_fields(source: KeySource, fields: tuple[str, ...] | None) -> None:
    count, wanted, settings = _NAMED_FIELDS.get(source, (0, "", ""))
    if count and (fields is None or len(fields) != count):
        raise ValueError(
            f"key_source {source} needs key_fields={wanted}, the consumer's {settings} (dotted paths such as "
            f"'order.id'); got {fields!r}"
        )
    if source is KeySource.DEDUP_ID and not fields:
        raise ValueError(
            "key_source dedup_id needs key_fields: the body fields whose values make each message's "
            f"deduplication id, which the consumer uses as its key; got {fields!r}"
        )
    if source in (KeySource.MESSAGE_ID, KeySource.BODY_SHA256) and fields:
        raise ValueError(
            f"key_source {source} reads no body fields (the consumer keys by the "
            f"{'SQS message id' if source is KeySource.MESSAGE_ID else 'SHA-256 of the body'}); "
            f"got key_fields={list(fields)!r}"
        )


@dataclass(frozen=True)
class _Entry:
    index: int
    body: str
    group_id: str | None
    dedup_id: str | None  # None: a standard topic or queue, which takes none
    lane: str | int  # what must stay in order: the group (FIFO), or nothing but the message itself

    @property
    def size(self) -> int:
        return len(self.body.encode("utf-8", "surrogatepass"))


def _body(message: Any) -> str:
    """The text a message is sent as: a str as it is, anything else as compact JSON."""
    if isinstance(message, str):
        return message
    if not isinstance(message, Mapping):
        raise InvalidMessage(f"must be a json object (a dict, or its JSON text), got {message!r:.80}")
    try:
        return json.dumps(message, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"cannot be written as JSON: {exc}") from None


def dedup_id_for(message: Mapping[str, Any] | str, keys: ConsumerKeys) -> str:
    """The MessageDeduplicationId :func:`publish` gives ``message`` (a dict, or its JSON text) for a
    consumer with ``keys``. Raises ValueError with the consumer's reason for a message it would reject
    (not JSON, a missing, empty, null, object or array key field, a key beginning with ``idempotency#``)."""
    try:
        return keys.read(_body(message))[1]
    except InvalidMessage as exc:
        raise ValueError(exc.reason) from None


def _entries(
    messages: Sequence[Any],
    keys: ConsumerKeys,
    group_id: str | Callable[[dict[str, Any]], str] | None,
    fifo: bool,
) -> list[_Entry]:
    """Every message checked and prepared before anything is sent: a bad one raises ValueError naming it."""
    entries = []
    for index, message in enumerate(messages):
        try:
            body = _body(message)
            data, dedup = keys.read(body)
            group = group_id(data) if callable(group_id) else group_id
        except InvalidMessage as exc:
            raise MessageRejected(index, exc.reason) from None
        if group is not None and (not isinstance(group, str) or join_key((group,)) != group):
            raise MessageRejected(
                index,
                "its group id must be 1-128 printable ASCII characters (what SNS and SQS accept as a "
                f"MessageGroupId), got {group!r:.140}",
            )
        lane: str | int = group if fifo and group is not None else index
        entries.append(_Entry(index, body, group, dedup if fifo else None, lane))
    return entries


def _rounds(entries: list[_Entry], result: PublishResult) -> Iterable[list[_Entry]]:
    """Requests of at most MAX_BATCH entries and MAX_BATCH_BYTES, at most one per lane, earliest first; a
    lane's next entry comes only after its previous one was published (read from ``result`` between
    requests)."""
    lanes: dict[str | int, list[_Entry]] = {}
    for entry in entries:
        lanes.setdefault(entry.lane, []).append(entry)
    waiting = {lane: iter(members[1:]) for lane, members in lanes.items()}
    # (input index, entry): indices are unique, so entries are never compared.
    heads = [(members[0].index, members[0]) for members in lanes.values()]
    heapq.heapify(heads)
    while heads:
        batch: list[_Entry] = []
        size = 0
        while heads and len(batch) < MAX_BATCH and (not batch or size + heads[0][1].size <= MAX_BATCH_BYTES):
            entry = heapq.heappop(heads)[1]
            batch.append(entry)
            size += entry.size
        yield batch
        for entry in batch:
            following = next(waiting[entry.lane], None)
            if following is not None and result.statuses[entry.index] is Status.PUBLISHED:
                heapq.heappush(heads, (following.index, following))


def _send(client: Any, destination: str, batch: list[_Entry], result: PublishResult) -> bool:
    """One PublishBatch (or, to a queue, SendMessageBatch) request; False when it failed as a whole (its
    entries are then failed)."""
    from botocore.exceptions import BotoCoreError, ClientError

    to_queue = client.meta.service_model.service_name == "sqs"
    body = "MessageBody" if to_queue else "Message"
    request = []
    for position, entry in enumerate(batch):
        item = {"Id": str(position), body: entry.body}
        if entry.group_id is not None:
            item["MessageGroupId"] = entry.group_id
        if entry.dedup_id is not None:
            item["MessageDeduplicationId"] = entry.dedup_id
        request.append(item)
    try:
        if to_queue:
            response = client.send_message_batch(QueueUrl=destination, Entries=request)
        else:
            response = client.publish_batch(TopicArn=destination, PublishBatchRequestEntries=request)
    except (BotoCoreError, ClientError) as exc:
        error = exc.response.get("Error", {}) if isinstance(exc, ClientError) else {}
        code = error.get("Code") or type(exc).__name__
        text = error.get("Message") or str(exc)
        for entry in batch:
            result._failed(entry, code, text, error.get("Type") == "Sender")
        return False
    for ok in response.get("Successful", []):
        result._published(batch[int(ok["Id"])].index, ok.get("MessageId"))
    for bad in response.get("Failed", []):
        code, text = bad.get("Code", "Unknown"), bad.get("Message", "")
        result._failed(batch[int(bad["Id"])], code, text, bool(bad.get("SenderFault")))
    return True


def publish(
    client: Any,
    destination: str,
    messages: Iterable[Mapping[str, Any] | str],
    *,
    keys: ConsumerKeys,
    group_id: str | Callable[[dict[str, Any]], str] | None = None,
    fifo: bool | None = None,
    progress: Callable[[PublishResult], None] | None = None,
) -> PublishResult:
    """Publish JSON messages (dicts, or JSON texts sent as they are) to a topic (``client``: SNS,
    ``destination``: its ARN) or, for a pipeline without a topic, a queue (SQS, its URL), ten a request.

    ``keys``: the consumer's key settings. ``group_id``: a MessageGroupId, or a function of the message's
    JSON object as the consumer parses it (e.g. ``lambda m: m["order_id"]``: each order in order, orders in
    parallel); required for FIFO, optional for standard (fair queues). ``fifo``: default, whether the ARN or
    URL ends in ``.fifo``. FIFO messages get the deduplication ids of :func:`dedup_id_for` and keep each
    group's order; standard ones get none (SNS and SQS refuse them). ``progress`` is called with the result
    after each request.

    Every message is checked before the first request: one the consumer would reject raises
    :class:`MessageRejected` (a ValueError) naming it, and nothing is sent; so does a ``group_id`` function
    raising :class:`~idempotent_runtime.errors.InvalidMessage`. Each input ends published, failed
    (refused, or its request failed: the call then stops) or not attempted (an earlier message of its group
    failed, or the call stopped): see ``result.statuses``, ``result.failed``, and
    ``result.raise_for_failures()``.
    """
    fifo = destination.endswith(FIFO_QUEUE_SUFFIX) if fifo is None else fifo
    if fifo and group_id is None:
        raise ValueError(
            f"group_id is required for the FIFO destination {destination}: a MessageGroupId, or a function "
            "of the message (its group keeps its order)"
        )
    if not fifo and keys.key_source in FIFO_ONLY_KEY_SOURCES:
        raise ValueError(
            f"key_source {keys.key_source} needs a FIFO topic or queue (the consumer keys by the "
            f"MessageDeduplicationId, which a standard one does not carry), got {destination}"
        )
    entries = _entries(list(messages), keys, group_id, fifo)
    result = PublishResult(entries)
    for batch in _rounds(entries, result):
        carried_on = _send(client, destination, batch, result)
        if progress is not None:
            progress(result)
        if not carried_on:
            break
    return result
