"""versioned mode: the latest state per entity, never overwritten by an older one.

Each message carries its entity's state and a version (``VERSION_FIELD``: a number, or an RFC 3339
timestamp with its UTC offset). One conditional PutItem writes the state when the key holds none, or an
older version of the same kind; otherwise the old item the failed condition returns decides: our own write
(its response was lost) -> processed; a newer version -> stale; the same version -> a duplicate, or a
conflict with another fingerprint; a version of the other kind -> invalid. A message whose body has
``"deleted": true`` is a tombstone: the state of a deleted entity, versioned like any other.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from idempotent_runtime import numeric
from idempotent_runtime.contract import (
    DELETED_ATTRIBUTE,
    FINGERPRINT_ATTRIBUTE,
    TOMBSTONE_FIELD,
    VERSION_ATTRIBUTE,
    Mode,
    Outcome,
)
from idempotent_runtime.errors import (
    Conflict,
    InvalidMessage,
    TransientError,
)
from idempotent_runtime.message import Key, Message
from idempotent_runtime.modes.base import Done, RecordState, text_of
from idempotent_runtime.modes.document import DocumentMode
from idempotent_runtime.payload import field_value

NUMBER, TIMESTAMP = "number", "timestamp"
# The DynamoDB type each kind is stored as: a number exactly, a timestamp as fixed-width UTC text (which
# sorts as the instants do). DynamoDB compares values of one type only, and so does the condition.
_TYPE = {NUMBER: "N", TIMESTAMP: "S"}
_KIND = {letter: kind for kind, letter in _TYPE.items()}
# A state is written when the key holds nothing (or an expired tombstone, or an item without a version:
# one no versioned write made), or a version of the same kind that is older.
NEWER = (
    "attribute_not_exists(#pk) OR #ttl < :now OR attribute_not_exists(#version) OR "
    "(attribute_type(#version, :type) AND #version < :version)"
)
FRACTION_DIGITS = 9  # nanoseconds: the finest clock producers write
_DATE = r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
_TIME = r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
_TIMESTAMP = re.compile(rf"{_DATE}[Tt ]{_TIME}(?:([Zz])|([+-])([0-9]{{2}})(?::?([0-9]{{2}}))?)")
_NAIVE = re.compile(rf"{_DATE}(?:[Tt ]{_TIME})?")
_RULE = "a version is a JSON number or an RFC 3339 timestamp with its UTC offset (2026-11-26T10:00:00Z)"


class Version(NamedTuple):
    """A version in its one comparable form: ``value`` (a Decimal, or the UTC text of a timestamp) compares
    within ``kind``; ``text`` is how the table holds it and reasons show it."""

    kind: str
    value: Decimal | str
    text: str

    @property
    def attribute(self) -> dict[str, str]:
        return {_TYPE[self.kind]: self.text}

    def __str__(self) -> str:
        return f"{self.kind} {self.text}"


def read_version(value: Any, what: str) -> Version:
    """The version a message's field holds; ``what`` names the field. Raises InvalidMessage for anything
    else: a boolean, a string that is no timestamp, a timestamp without its offset (naive: another instant
    for every producer's time zone), a date without a time, a number DynamoDB cannot hold, a fraction
    finer than nanoseconds (it would be rounded)."""
    if isinstance(value, str):
        utc = _utc(value, what)
        return Version(TIMESTAMP, utc, utc)
    if value is True or value is False or not isinstance(value, int | Decimal):
        raise InvalidMessage(f"{what} is {_shown(value)}; {_RULE}")
    try:
        text = numeric.dynamodb(value)
    except ValueError as exc:
        raise InvalidMessage(f"{what} is the number {_shown(value)}, which {exc}") from None
    return Version(NUMBER, Decimal(value), text)


def _utc(text: str, what: str) -> str:
    """An RFC 3339 timestamp as fixed-width UTC text: ``2026-11-26T08:00:00.500000000Z``."""
    found = _TIMESTAMP.fullmatch(text)
    if found is None:
        naive = _NAIVE.fullmatch(text)
        if naive is None:
            why = "a string that is not a timestamp"
        else:  # a naive time is another instant in each producer's time zone
            why = "a date without a time" if naive[4] is None else "a timestamp without a UTC offset"
        raise InvalidMessage(f"{what} is {why}: {text[:80]!r}; {_RULE}")
    *fields, fraction, _zulu, sign, hours, minutes = found.groups()
    digits = (fraction or "").rstrip("0")
    if len(digits) > FRACTION_DIGITS:
        raise InvalidMessage(
            f"{what} {text[:80]!r} has a fraction of a second finer than nanoseconds "
            f"({FRACTION_DIGITS} digits): it would be rounded"
        )
    try:
        year, month, day, hour, minute, second = map(int, fields)
        local = datetime(year, month, day, hour, minute, second)
        offset = timedelta(hours=int(hours or 0), minutes=int(minutes or 0))
        if int(minutes or 0) >= 60 or offset >= timedelta(days=1):
            raise ValueError(f"the UTC offset {sign}{hours}:{minutes or '00'} is not under 24 hours")
        utc = local - offset if sign == "+" else local + offset
    except (ValueError, OverflowError) as exc:
        raise InvalidMessage(f"{what} {text[:80]!r} is not a valid timestamp ({exc})") from None
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
        f".{digits:0<{FRACTION_DIGITS}}Z"
    )


def stored_version(item: dict[str, Any]) -> Version | None:
    """The version an item holds (None: none, an item no versioned write made)."""
    attribute = item.get(VERSION_ATTRIBUTE)
    if not isinstance(attribute, dict) or len(attribute) != 1:
        return None
    ((letter, text),) = attribute.items()
    kind = _KIND.get(letter)
    if kind is None or not isinstance(text, str):
        raise InvalidMessage(f"the stored {VERSION_ATTRIBUTE} is {attribute!r:.80}, of no version kind")
    return Version(kind, Decimal(text) if kind == NUMBER else text, text)


def compare_versions(incoming: Version, stored: Version, key: object) -> int:
    """-1, 0 or 1 as ``incoming`` is older than, the same as or newer than ``stored``: numbers by value
    (``1e3`` = ``1000``), timestamps by instant. A key's versions are all of one kind: a message with the
    other kind is invalid (neither order would be right)."""
    if incoming.kind != stored.kind:
        raise InvalidMessage(
            f"this message's version ({incoming}) cannot be compared with the one key {key} holds "
            f"({stored}): a key's versions are all numbers or all timestamps"
        )
    return (incoming.value > stored.value) - (incoming.value < stored.value)  # type: ignore[operator]


def _replaced(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``data`` with ``value`` at ``path`` (copying only the objects on the path)."""
    copy = dict(data)
    copy[path[0]] = _replaced(data[path[0]], path[1:], value) if len(path) > 1 else value
    return copy


def _shown(value: Any) -> str:
    """A JSON value as JSON names it."""
    if isinstance(value, dict | list):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    text = numeric.exact(value) if isinstance(value, int | Decimal) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class VersionedMode(DocumentMode):
    """One PutItem, conditional on the stored version being older: 1 request whatever the outcome.
    Processor (optional): as in document mode, the attributes to store; the version and the tombstone
    flag are read from the body, before it runs."""

    name = Mode.VERSIONED
    no_expiry = "nothing (no TTL: a state never expires, a tombstone only with TOMBSTONE_TTL_SECONDS)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.config.version_field
        assert field is not None  # the contract's settings rules require it
        self.version_path = tuple(field.split("."))
        self.what = f"version field {field!r}"
        self.names = {**self.names, "#version": VERSION_ATTRIBUTE}

    def version(self, message: Message) -> Version:
        found, value = field_value(message.json_object(), self.version_path)
        if not found:
            raise InvalidMessage(f"{self.what} is missing from the body; {_RULE}")
        return read_version(value, self.what)

    def fingerprint(self, message: Message) -> str:
        """As every mode's, with a timestamp version by its instant: the same state sent with ``+02:00``
        by one producer and ``Z`` by another is one payload."""
        try:
            version = self.version(message)
        except InvalidMessage:  # not JSON, or no version to read: as every mode's
            return super().fingerprint(message)
        return self._fingerprint(message.json_object(), version)

    def _fingerprint(self, data: dict[str, Any], version: Version) -> str:
        if version.kind == TIMESTAMP:
            data = _replaced(data, self.version_path, version.value)
        return self.fingerprints(data)

    def process(self, message: Message, context: object | None = None) -> Done:
        key = message.key
        assert key is not None
        # Before the processor, which may change the parsed body it is handed.
        version = self.version(message)
        fingerprint = self._fingerprint(message.json_object(), version)
        now = self.clock()
        extra: dict[str, Any] = {VERSION_ATTRIBUTE: version.attribute}
        expires = None
        if message.json_object().get(TOMBSTONE_FIELD) is True:
            extra[DELETED_ATTRIBUTE] = {"BOOL": True}
            expires = self.expiry(self.config.tombstone_ttl_seconds, now)
        item, own, token = self.document(message, key, fingerprint, expires, extra)
        values = {
            ":now": {"N": str(int(now))},
            ":type": {"S": _TYPE[version.kind]},
            ":version": version.attribute,
        }
        return self.put(
            item, own, token, NEWER, values, lambda old: self._refused(key, version, fingerprint, old)
        )

    def _refused(self, key: Key, version: Version, fingerprint: str, old: dict[str, Any]) -> Done:
        """What a write the stored state refused means: stale, a duplicate or a conflict."""
        stored = stored_version(old)
        if stored is None:  # the condition admits an item without a version: it changed meanwhile
            raise TransientError(f"key {key} changed while its state was written; retried")
        order = compare_versions(version, stored, key)
        if order < 0:
            newer = f"holds version {stored.text}, newer than this message's {version.text}"
            return Done(Outcome.STALE, reason=f"stale: key {key} {newer}")
        if order > 0:  # older and of the same kind, yet refused: it changed meanwhile
            raise TransientError(f"key {key} holds the older version {stored.text}, yet refused; retried")
        stored_fingerprint = text_of(old, FINGERPRINT_ATTRIBUTE)
        if stored_fingerprint is None or stored_fingerprint == fingerprint:
            return Done(Outcome.DUPLICATE)
        return self.conflict(Conflict(key, fingerprint, stored_fingerprint, version=version.text))

    def state(self, item: dict[str, Any], fingerprint: str, now: float) -> tuple[RecordState, str | None]:
        """As a delivery of the stored version sees it."""
        return self.delivery_state(None, item, fingerprint, now)

    def delivery_state(
        self, message: Message | None, item: dict[str, Any], fingerprint: str, now: float
    ) -> tuple[RecordState, str | None]:
        """By versions first: an older one is stale, a newer one new (a delivery writes it), the same one
        done or a conflict by fingerprint; an item without a version is replaced (new). Raises
        InvalidMessage where a delivery would be quarantined as invalid."""
        state, stored_fingerprint = super().state(item, fingerprint, now)  # as a document's
        if state == RecordState.NEW:
            return state, stored_fingerprint
        stored = stored_version(item)
        if stored is None:
            return RecordState.NEW, stored_fingerprint
        if message is None:
            return state, stored_fingerprint
        order = compare_versions(self.version(message), stored, message.key)
        if order < 0:
            return RecordState.STALE, stored_fingerprint
        return (RecordState.NEW if order > 0 else state), stored_fingerprint
