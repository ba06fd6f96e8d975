"""A message body as data: exact JSON parsing, canonical JSON, payload fingerprints, guarded results as text.

Integers are ``int`` (over 4300 digits ``Decimal``), other numbers ``Decimal`` with the text's exact value;
``NaN``, ``Infinity`` and a name repeated in an object are rejected. Canonical JSON: sorted keys, compact,
ASCII escapes, numbers by value (``1`` = ``1.0`` = ``1e0``); its SHA-256 is the fingerprint. Nothing here
recurses on the data, so deep nesting cannot raise ``RecursionError`` (only the parser, whose caller rejects).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from idempotent_runtime.contract import FIELD_PATH_SEPARATOR, MAX_NESTING_LEVELS

# Integral values up to this many digits are written as integers in canonical text; larger ones keep the
# exponent form (1E+5000), so nothing huge is ever materialised. It is Python's default limit on int/str
# conversion: the parser makes a JSON integer with more digits a Decimal, so an int and a Decimal of one
# value meet the same rule, although the C encoder writes every int in full.
_MAX_INTEGER_DIGITS = sys.int_info.default_max_str_digits  # 4300
_PLAIN_INTEGERS = 10**_MAX_INTEGER_DIGITS  # ints below this in magnitude have at most that many digits


class NotANumber(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a JSON text."""


def _reject_constant(name: str) -> Any:
    raise NotANumber(name)


class RepeatedName(ValueError):
    """A JSON object in the text holds the same name twice (:func:`repeated_path` says where)."""


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # The common path: one dict() and one length comparison per object.
    members = dict(pairs)
    if len(members) != len(pairs):
        raise RepeatedName("a JSON object holds the same name twice")
    return members


def _integer(text: str) -> int | Decimal:
    if len(text) - (text[0] == "-") <= _MAX_INTEGER_DIGITS:
        try:
            return int(text)
        except ValueError:  # the interpreter's int limit (sys.set_int_max_str_digits) is lower
            pass
    return Decimal(text)


_DECODER = json.JSONDecoder(
    parse_float=Decimal, parse_constant=_reject_constant, object_pairs_hook=_unique_names
)
# Only after an integer over the interpreter's limit, or with the limit raised: a Python call per integer
# is slow.
_LONG_INTEGER_DECODER = json.JSONDecoder(
    parse_float=Decimal, parse_int=_integer, parse_constant=_reject_constant, object_pairs_hook=_unique_names
)


def parse_json(text: str) -> Any:
    """The JSON value of ``text``, numbers exact. Raises ValueError (:class:`NotANumber` for ``NaN`` /
    ``Infinity``, :class:`RepeatedName` for an object holding a name twice) or RecursionError (nesting
    deeper than the interpreter can parse)."""
    limit = sys.get_int_max_str_digits()
    if not 0 < limit <= _MAX_INTEGER_DIGITS:  # raised (or 0, none): the C parser would make longer ints
        return _LONG_INTEGER_DECODER.decode(text)
    try:
        return _DECODER.decode(text)
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
        return _LONG_INTEGER_DECODER.decode(text)  # an integer over the limit: a Decimal


class _Constant:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def constant_path(text: str) -> tuple[str, str] | None:
    """Where the first ``NaN`` / ``Infinity`` of ``text`` is: ``(field path, constant)``; None if none."""
    try:
        decoder = json.JSONDecoder(parse_float=Decimal, parse_int=_integer, parse_constant=_Constant)
        data = decoder.decode(text)
    except (ValueError, RecursionError):
        return None
    for path, value in walk(data):
        if isinstance(value, _Constant):
            return path or "body", value.name
    return None


class _Members(dict[str, Any]):
    """An object as :func:`repeated_path` parses it: ``repeated`` is a name it holds twice (or None)."""

    __slots__ = ("repeated",)
    repeated: str | None


def _marked(pairs: list[tuple[str, Any]]) -> _Members:
    members = _Members(pairs)
    members.repeated = None
    if len(members) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                members.repeated = name
                break
            seen.add(name)
    return members


def repeated_path(text: str) -> str | None:
    """The field path of the first name a JSON object of ``text`` holds twice (``order.lines[1].price``);
    None if none. Parses again, slowly: call it only after :func:`parse_json` raised RepeatedName."""
    try:
        data = json.JSONDecoder(
            parse_float=Decimal, parse_int=_integer, parse_constant=_Constant, object_pairs_hook=_marked
        ).decode(text)
    except (ValueError, RecursionError):
        return None
    for path, value in walk(data):
        name = getattr(value, "repeated", None) if type(value) is _Members else None
        if name is not None:
            return f"{path}{FIELD_PATH_SEPARATOR}{name}" if path else name
    return None


def walk(data: Any) -> Iterable[tuple[str, Any]]:
    """Every value of ``data`` with its path (``order.lines[3].price``), depth-first, without recursion."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        yield path, value
        if isinstance(value, dict):
            stack.extend(
                (f"{path}{FIELD_PATH_SEPARATOR}{k}" if path else str(k), v)
                for k, v in reversed(value.items())
            )
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))


# --- numbers ------------------------------------------------------------------------------------------


def normalized(value: Decimal) -> tuple[int, str, int]:
    """``(sign, digits, exponent)`` of a finite non-zero Decimal without trailing zeros in ``digits``: one
    form per value, computed exactly (``Decimal.normalize`` would round to the context's 28 digits)."""
    sign, digit_tuple, exponent = value.as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exponent, int)
    return sign, digits, exponent + len(digit_tuple) - len(digits)


def canonical_number(value: int | Decimal) -> str:
    """One text per numeric value: ``100``, ``100.0`` and ``1E+2`` are ``100``; ``1.50`` is ``15E-1``.

    Integral values up to 4300 digits are plain integers (as JSON writes ``int``); others
    ``<digits>E<exponent>`` with no trailing zero in the digits, which no other value shares - the same for
    an ``int`` and a ``Decimal`` of one value. Raises ValueError for NaN / Infinity.
    """
    if type(value) is int:
        if -_PLAIN_INTEGERS < value < _PLAIN_INTEGERS:
            try:
                return str(value)
            except ValueError:  # the interpreter's limit was lowered: the digits of the Decimal below
                pass
        value = Decimal(value)  # exact, and without int's string conversion limit
    elif not isinstance(value, Decimal):
        value = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not value.is_finite():
        raise ValueError(f"{value} is not a finite number")
    if not value:
        return "0"
    sign, digits, exponent = normalized(value)
    minus = "-" if sign else ""
    if exponent >= 0 and len(digits) + exponent <= _MAX_INTEGER_DIGITS:
        return minus + digits + "0" * exponent
    return f"{minus}{digits}E{exponent}"


def plain_number(value: int | Decimal | float) -> str:
    """A number's value without an exponent (``1e2`` -> ``100``, ``1.50`` -> ``1.5``, ``-0`` -> ``0``):
    the text of a numeric key. Call only for numbers whose text is bounded (keys are checked first)."""
    if type(value) is int:
        return str(value)
    if not isinstance(value, Decimal):
        value = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not value.is_finite():
        raise ValueError(f"{value} is not a finite number")
    if not value:
        return "0"
    sign, digits, exponent = normalized(value)
    minus = "-" if sign else ""
    if exponent >= 0:
        return minus + digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return f"{minus}{digits[:point]}.{digits[point:]}"
    return f"{minus}0.{'0' * -point}{digits}"


# --- canonical JSON and fingerprints ------------------------------------------------------------------


class _Slow(Exception):
    """The C encoder met something it cannot write exactly (a Decimal): use the Python encoder."""


def _to_slow(value: Any) -> Any:
    raise _Slow()


class _Raw(str):
    """Text to copy to the output as is (the Python encoder's stack holds these beside values)."""


_OPEN_OBJECT, _CLOSE_OBJECT = _Raw("{"), _Raw("}")
_OPEN_ARRAY, _CLOSE_ARRAY = _Raw("["), _Raw("]")
_COMMA = _Raw(",")


def _encode(value: Any, sort_keys: bool, number: Callable[[Any], str]) -> str:
    """Compact JSON without recursion; ``number`` writes ints, floats and Decimals. Raises TypeError /
    ValueError for values JSON cannot hold."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is _Raw or kind is str:
            out.append(item if kind is _Raw else encode_basestring_ascii(item))
        elif item is None:
            out.append("null")
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif isinstance(item, dict):
            pairs = list(item.items())
            for key, _ in pairs:
                if not isinstance(key, str):
                    raise TypeError(f"keys must be strings, got {type(key).__name__} {key!r:.40}")
            if sort_keys:
                pairs.sort(key=lambda pair: pair[0])
            sequence: list[Any] = [_OPEN_OBJECT]
            for index, (key, member) in enumerate(pairs):
                if index:
                    sequence.append(_COMMA)
                sequence.append(_Raw(encode_basestring_ascii(key) + ":"))
                sequence.append(member)
            sequence.append(_CLOSE_OBJECT)
            stack.extend(reversed(sequence))
        elif isinstance(item, (list, tuple)):
            sequence = [_OPEN_ARRAY]
            for index, member in enumerate(item):
                if index:
                    sequence.append(_COMMA)
                sequence.append(member)
            sequence.append(_CLOSE_ARRAY)
            stack.extend(reversed(sequence))
        elif isinstance(item, (int, float, Decimal)):
            out.append(number(item))
        elif isinstance(item, str):  # a str subclass
            out.append(encode_basestring_ascii(str(item)))
        else:
            raise TypeError(f"a {type(item).__name__} is not JSON: {item!r:.60}")
    return "".join(out)


# The C encoder writes the common case (no Decimal) exactly as the Python encoder below would.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False, default=_to_slow)
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=_to_slow)


def canonical_json(data: Any) -> str:
    """Canonical JSON text of parsed JSON data (see the module docstring); ASCII only."""
    try:
        return _CANONICAL.encode(data)
    except (_Slow, RecursionError):
        return _encode(data, True, canonical_number)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def raw_fingerprint(body: str) -> str:
    """The fingerprint of a body that is not JSON: the SHA-256 of its bytes."""
    return sha256_hex(body.encode("utf-8", "surrogatepass"))


def field_value(data: Any, path: Sequence[str]) -> tuple[bool, Any]:
    """``(True, value)`` at the dotted ``path`` of nested objects, or ``(False, None)`` when absent."""
    value = data
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def without_fields(data: dict[str, Any], paths: Iterable[Sequence[str]]) -> dict[str, Any]:
    """A copy of ``data`` without the fields at ``paths`` (copying only the objects on those paths)."""
    result = dict(data)
    for path in paths:
        parent = result
        for part in path[:-1]:
            child = parent.get(part)
            if not isinstance(child, dict):
                break
            parent[part] = child = dict(child)
            parent = child
        else:
            parent.pop(path[-1], None)
    return result


class Fingerprinter:
    """``fingerprint(data) -> str``: SHA-256 (hex) of the canonical JSON of the payload.

    ``fields``: only these dotted paths (a missing field counts, as absent); ``exclude``: the body without
    these paths. Both apply to JSON objects; any other JSON value is fingerprinted whole.
    """

    def __init__(self, fields: Sequence[str] | None = None, exclude: Sequence[str] | None = None) -> None:
        self.fields = [(text, tuple(text.split(FIELD_PATH_SEPARATOR))) for text in fields or ()]
        self.exclude = [tuple(text.split(FIELD_PATH_SEPARATOR)) for text in exclude or ()]

    def __call__(self, data: Any) -> str:
        if isinstance(data, dict):
            if self.fields:
                selected: list[list[Any]] = []
                for text, path in self.fields:
                    found, value = field_value(data, path)
                    selected.append([text, value] if found else [text])
                data = selected
            elif self.exclude:
                data = without_fields(data, self.exclude)
        return sha256_hex(canonical_json(data).encode("ascii"))


# --- guarded results ----------------------------------------------------------------------------------


def _exact_number(value: Any) -> str:
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} is not a JSON number")
        return float.__repr__(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} is not a JSON number")
        return str(value)
    return int.__repr__(value)


# A stored result holds at most this many levels of objects and arrays, and this many values.
MAX_RESULT_NESTING = MAX_NESTING_LEVELS
MAX_RESULT_VALUES = 100_000


def check_result(value: Any) -> None:
    """Raise ValueError unless ``value`` comes back from :func:`decode_result` as it is: string object keys
    (JSON makes ``True`` ``"true"``), bounded nesting (no value containing itself) and size."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > MAX_RESULT_VALUES:
            raise ValueError(f"holds more than {MAX_RESULT_VALUES} values")
        if isinstance(item, dict):
            members: Iterable[Any] = item.values()
            for key in item:
                if not isinstance(key, str):
                    raise ValueError(f"has an object key that is not a string: {key!r:.40}")
        elif isinstance(item, (list, tuple)):
            members = item
        else:
            continue
        if depth >= MAX_RESULT_NESTING:
            raise ValueError(f"is nested more than {MAX_RESULT_NESTING} levels deep (or contains itself)")
        stack.extend((member, depth + 1) for member in members)


def encode_result(value: Any) -> str:
    """A processor's result as compact JSON, Decimals exact. Raises for anything JSON cannot hold, or could
    not give back as it was (:func:`check_result`)."""
    check_result(value)
    try:
        return _COMPACT.encode(value)
    except (_Slow, RecursionError):
        return _encode(value, False, _exact_number)


def decode_result(text: str) -> Any:
    """A stored result: integers as ``int``, other numbers as ``Decimal`` (their exact value)."""
    return parse_json(text)
