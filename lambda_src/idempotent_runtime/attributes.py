"""Python values to DynamoDB attribute values, and DynamoDB's item size rule (400 KB)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from idempotent_runtime.errors import InvalidMessage

MAX_ITEM_BYTES = 400 * 1024


def to_attribute_value(value: Any) -> dict[str, Any]:
    """A Python value (as json.loads returns, plus Decimal, bytes, sets) as a DynamoDB attribute value."""
    if isinstance(value, str):
        return {"S": value}
    if value is True or value is False:
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMessage(f"number {value!r} cannot be stored in dynamodb")
        return {"N": repr(value)}
    if value is None:
        return {"NULL": True}
    if isinstance(value, dict):
        return {"M": {_name(k): to_attribute_value(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"L": [to_attribute_value(v) for v in value]}
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise InvalidMessage(f"number {value!r} cannot be stored in dynamodb")
        return {"N": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"B": bytes(value)}
    if isinstance(value, (set, frozenset)):
        return _set(value)
    raise InvalidMessage(f"a {type(value).__name__} cannot be stored in dynamodb: {value!r:.80}")


def to_item(attributes: dict[str, Any]) -> dict[str, Any]:
    return {_name(k): to_attribute_value(v) for k, v in attributes.items()}


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidMessage(f"attribute names must be non-empty strings, got {name!r:.80}")
    return name


def _set(value: set | frozenset) -> dict[str, Any]:
    if not value:
        raise InvalidMessage("an empty set cannot be stored in dynamodb")
    if all(isinstance(v, str) for v in value):
        return {"SS": sorted(value)}
    if all(isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in value):
        return {"NS": sorted(to_attribute_value(v)["N"] for v in value)}
    if all(isinstance(v, (bytes, bytearray)) for v in value):
        return {"BS": sorted(bytes(v) for v in value)}
    raise InvalidMessage(f"a set of mixed types cannot be stored in dynamodb: {value!r:.80}")


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
