"""A message body as data: exact JSON parsing, canonical JSON, payload fingerprints, guarded results as text.

Integers are ``int`` (over 4300 digits ``Decimal``), other numbers ``Decimal`` with the text's exact value;
``NaN``, ``Infinity`` and a name repeated in an object are rejected. Canonical JSON: sorted keys, compact,
ASCII escapes, numbers by value (``1`` = ``1.0`` = ``1e0``); its SHA-256 is the fingerprint. Numbers become
text in :mod:`idempotent_runtime.numeric`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

from idempotent_runtime import numeric
from idempotent_runtime.contract import FIELD_PATH_SEPARATOR, MAX_NESTING_LEVELS


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
    if len(text) - (text[0] == "-") <= numeric.MAX_INTEGER_DIGITS:
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
    if not 0 < limit <= numeric.MAX_INTEGER_DIGITS:  # raised (or 0, none): the C parser makes longer ints
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


# --- canonical JSON and fingerprints ------------------------------------------------------------------


class _Encoder:
    """Compact JSON from the C encoder, each Decimal written by ``number``: the encoder writes a random
    placeholder string for it, replaced afterwards. A text of the data that is the placeholder shows as one
    replacement too many: the placeholder is drawn again (nothing in the data is ever taken for a number).
    Nesting deeper than the interpreter allows raises RecursionError (the record is then rejected)."""

    def __init__(self, number: Callable[[Decimal], str], sort_keys: bool) -> None:
        self.number = number
        self.sort_keys = sort_keys
        self.placeholder = os.urandom(8).hex()

    def __call__(self, data: Any) -> str:
        text = self._encode(data, self.placeholder)
        while text is None:
            self.placeholder = os.urandom(8).hex()
            text = self._encode(data, self.placeholder)
        return text

    def _encode(self, data: Any, placeholder: str) -> str | None:
        numbers: list[str] = []

        def write(value: Any) -> str:
            if isinstance(value, Decimal):
                numbers.append(self.number(value))
                return placeholder
            raise TypeError(f"a {type(value).__name__} is not JSON: {value!r:.60}")

        encoder = json.JSONEncoder(
            sort_keys=self.sort_keys, separators=(",", ":"), allow_nan=False, default=write
        )
        text = encoder.encode(data)
        if not numbers:
            return text
        pieces = text.split(f'"{placeholder}"')
        if len(pieces) != len(numbers) + 1:
            return None
        return "".join(piece + number for piece, number in zip(pieces, numbers, strict=False)) + pieces[-1]


# Numbers by value (1 = 1.0 = 1e0), keys sorted, ASCII escapes.
canonical_json = _Encoder(numeric.canonical, sort_keys=True)


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


_exact_json = _Encoder(numeric.exact, sort_keys=False)


def encode_result(value: Any) -> str:
    """A processor's result as compact JSON, Decimals exact. Raises for anything JSON cannot hold, or could
    not give back as it was (:func:`check_result`)."""
    check_result(value)
    return _exact_json(value)


def decode_result(text: str) -> Any:
    """A stored result: integers as ``int``, other numbers as ``Decimal`` (their exact value)."""
    return parse_json(text)
