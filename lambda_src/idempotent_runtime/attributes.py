"""Python values to DynamoDB attribute values, exactly, and DynamoDB's rules on what an item may hold.

A value DynamoDB cannot hold is rejected naming where it is (``order.lines[3].price``): over 38 significant
digits or outside 1E-130..9.99...E+125, NaN, Infinity, nesting over 32 levels, text with no UTF-8 form, items
over 400 KB. Recursion stops at the nesting limit, so deep input cannot raise ``RecursionError`` here.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from idempotent_runtime import numeric
from idempotent_runtime.contract import ATTRIBUTE_PREFIX, MAX_ITEM_BYTES, MAX_NESTING_LEVELS
from idempotent_runtime.errors import InvalidMessage


class _Rejected(Exception):
    """A value that cannot be stored; ``where`` collects the path on the way out (no cost on success)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.where: list[str] = []


def _value(value: Any, depth: int) -> dict[str, Any]:
    kind = type(value)
    if kind is str:
        return {"S": value}
    if isinstance(value, str):
        return {"S": value}
    if value is True or value is False:
        return {"BOOL": value}
    if isinstance(value, (int, float, Decimal)):
        try:
            return {"N": numeric.dynamodb(value)}
        except ValueError as exc:
            raise _Rejected(f"number {_excerpt(value)} {exc}") from None
    if value is None:
        return {"NULL": True}
    if isinstance(value, (dict, list, tuple)):
        if depth >= MAX_NESTING_LEVELS:
            raise _Rejected(f"is nested more than {MAX_NESTING_LEVELS} levels deep (DynamoDB's limit)")
        if isinstance(value, dict):
            members: dict[str, Any] = {}
            for key, member in value.items():
                if not isinstance(key, str):
                    raise _Rejected(f"has a key that is not a string: {key!r:.80}")
                try:
                    members[key] = _value(member, depth + 1)
                except _Rejected as rejected:
                    rejected.where.append(f".{key}")
                    raise
            return {"M": members}
        items = []
        for index, member in enumerate(value):
            try:
                items.append(_value(member, depth + 1))
            except _Rejected as rejected:
                rejected.where.append(f"[{index}]")
                raise
        return {"L": items}
    if isinstance(value, (bytes, bytearray)):
        return {"B": bytes(value)}
    if isinstance(value, (set, frozenset)):
        return _set(value)
    raise _Rejected(f"is a {type(value).__name__}, which DynamoDB cannot store: {value!r:.80}")


def _set(value: set | frozenset) -> dict[str, Any]:
    if not value:
        raise _Rejected("is an empty set, which DynamoDB cannot store")
    if all(isinstance(v, str) for v in value):
        return {"SS": sorted(value)}
    if all(isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in value):
        try:
            return {"NS": sorted(numeric.dynamodb(v) for v in value)}
        except ValueError as exc:
            raise _Rejected(f"holds a number that {exc}") from None
    if all(isinstance(v, (bytes, bytearray)) for v in value):
        return {"BS": sorted(bytes(v) for v in value)}
    raise _Rejected(f"is a set of mixed types, which DynamoDB cannot store: {value!r:.80}")


def _excerpt(value: Any) -> str:
    try:
        text = str(value)
    except ValueError:  # an int too long to write out (Python's 4300-digit limit)
        return f"<an integer of {value.bit_length()} bits>"
    return text if len(text) <= 60 else text[:57] + "..."


def to_item(attributes: dict[Any, Any], source: str = "body field") -> dict[str, Any]:
    """Attributes as an item. Names must be non-empty strings not beginning with ``idempotency:`` (the
    runtime's own); ``source`` names where they came from in reasons (``body field``, ``processor
    attribute``)."""
    item: dict[str, Any] = {}
    for name, value in attributes.items():
        if not isinstance(name, str) or not name:
            raise InvalidMessage(f"{source} names must be non-empty strings, got {name!r:.80}")
        if name.startswith(ATTRIBUTE_PREFIX):
            raise InvalidMessage(
                f"{source} {name!r} begins with {ATTRIBUTE_PREFIX!r}, which the runtime reserves for its own "
                "attributes"
            )
        if type(value) is str:  # the common case, without a call
            item[name] = {"S": value}
            continue
        try:
            item[name] = _value(value, 0)
        except _Rejected as rejected:
            path = name + "".join(reversed(rejected.where))
            raise InvalidMessage(f"{source} {path} {rejected.reason}") from None
    return item


def item_size(item: dict[str, dict[str, Any]]) -> int:
    """The item's size as DynamoDB counts it (names + values; numbers approximated as DynamoDB documents)."""
    return sum(len(name.encode("utf-8")) + _value_size(av) for name, av in item.items())


def _value_size(av: dict[str, Any]) -> int:
    ((kind, value),) = av.items()
    if kind == "S":
        return len(value) if value.isascii() else len(value.encode("utf-8"))
    if kind == "N":
        return _number_size(value)
    if kind == "B":
        return len(value)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + _value_size(v) + 1 for k, v in value.items())
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in value)
    if kind == "SS":
        return sum(len(v.encode("utf-8")) for v in value)
    if kind == "NS":
        return sum(_number_size(v) for v in value)
    if kind == "BS":
        return sum(len(v) for v in value)
    return len(repr(value))


def _number_size(text: str) -> int:
    digits = text.lstrip("-").split("e")[0].split("E")[0].replace(".", "").strip("0")
    return (len(digits) + 1) // 2 + 1


def lone_surrogate(exc: UnicodeEncodeError) -> str:
    """Why text that failed to encode as UTF-8 cannot be stored: UTF-8 has no form for a lone surrogate
    (half of a UTF-16 pair, e.g. the JSON escape ``\\ud800`` without its partner)."""
    text = exc.object if isinstance(exc.object, str) else ""
    found = text[exc.start : exc.end]
    excerpt = text[max(0, exc.start - 30) : exc.end + 10]
    return (
        f"has a lone surrogate {found!r} (half of a utf-16 pair), which is not valid unicode "
        f"and cannot be stored in dynamodb: {excerpt!r}"
    )


def check_item_size(item: dict[str, dict[str, Any]], limit: int = MAX_ITEM_BYTES) -> None:
    """Raise :class:`InvalidMessage` for an item over ``limit`` bytes or with a string that has no UTF-8
    form (a lone surrogate)."""
    try:
        size = item_size(item)
    except UnicodeEncodeError as exc:
        raise InvalidMessage(f"a string {lone_surrogate(exc)}") from None
    if size > limit:
        raise InvalidMessage(f"item is {size} bytes, over dynamodb's {limit}-byte (400 KB) item limit")
