"""Lambda's event filtering (``FilterCriteria``): which records an event source mapping hands its function.

A mapping has up to five filters; each ``Pattern`` is a JSON object in EventBridge's pattern syntax, matched
against the record as the function would receive it (for a DynamoDB stream: ``eventName``, ``dynamodb``
with ``Keys`` / ``NewImage`` / ``OldImage`` in DynamoDB's JSON, ...). A record that matches one of the
filters is delivered; one that matches none is dropped, never delivered (a stream mapping reads past it).

Matching, as EventBridge documents it:

- every field a pattern names must be present, with the same nesting; fields it does not name are ignored;
- a field's rules are a list, any one of which may match (OR); an array in the record matches when one of
  its elements does;
- values compare exactly: strings character by character, numbers by their JSON text (``300`` is not
  ``300.0``), ``null`` only with ``null`` and ``""`` only with ``""``;
- operators: ``prefix``, ``suffix`` (each also ``{"equals-ignore-case": ...}``), ``equals-ignore-case``,
  ``anything-but`` (a value, a list, or ``prefix`` / ``suffix`` / ``equals-ignore-case``), ``numeric``
  (``=``, ``<``, ``<=``, ``>``, ``>=``, a range as two of them; only JSON numbers match: DynamoDB's
  ``{"N": "5"}`` holds a string), ``exists`` (on leaves only: an object or a missing field "does not
  exist"), and ``$or`` across fields.

EventBridge's ``cidr`` and ``wildcard`` are refused as not modelled. :func:`compile_pattern` checks a pattern
as Lambda does when the mapping is created or updated (the emulator refuses an invalid one then);
:func:`matches` applies patterns to a record.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

MAX_PATTERN_LENGTH = 4096  # Lambda: Filter.Pattern is at most 4096 characters
NUMERIC_OPERATORS = ("=", "<", "<=", ">", ">=")
NOT_MODELLED = ("cidr", "wildcard")
_MISSING = object()


class InvalidPattern(ValueError):
    """A filter pattern Lambda refuses (``InvalidParameterValueException``); the text says why."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | bool) or _is_number(value)


def _check_text_operand(name: str, operand: Any) -> None:
    if isinstance(operand, dict) and set(operand) == {"equals-ignore-case"}:
        operand = operand["equals-ignore-case"]
    if not isinstance(operand, str):
        raise InvalidPattern(f"{name} takes a string (or {{'equals-ignore-case': string}}), not {operand!r}")


def _check_anything_but(operand: Any) -> None:
    if isinstance(operand, dict):
        if len(operand) != 1 or next(iter(operand)) not in ("prefix", "suffix", "equals-ignore-case"):
            raise InvalidPattern(f"anything-but takes a value, a list or one of prefix / suffix: {operand!r}")
        ((name, value),) = operand.items()
        values = value if name == "equals-ignore-case" and isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) for v in values):
            raise InvalidPattern(f"anything-but {name} takes a string: {operand!r}")
    elif isinstance(operand, list):
        strings, numbers = all(isinstance(v, str) for v in operand), all(map(_is_number, operand))
        if not operand or not (strings or numbers):
            raise InvalidPattern(f"anything-but takes a list of strings or of numbers: {operand!r}")
    elif not (isinstance(operand, str) or _is_number(operand)):
        raise InvalidPattern(f"anything-but takes a string or a number: {operand!r}")


def _check_numeric(operand: Any) -> None:
    pairs = list(zip(operand[::2], operand[1::2], strict=False)) if isinstance(operand, list) else []
    if not pairs or len(operand) % 2 or len(pairs) > 2:
        raise InvalidPattern(f"numeric takes [operator, number] or a range of two: {operand!r}")
    for operator, value in pairs:
        if operator not in NUMERIC_OPERATORS or not _is_number(value):
            raise InvalidPattern(
                f"numeric takes operators {', '.join(NUMERIC_OPERATORS)} and numbers: {operand!r}"
            )
    if len(pairs) == 2 and ("=" in (pairs[0][0], pairs[1][0]) or pairs[0][0][0] == pairs[1][0][0]):
        raise InvalidPattern(f"a numeric range takes a lower and an upper bound: {operand!r}")


def _check_rule(rule: Any) -> None:
    """One element of a field's list: a value, or an object with one operator."""
    if _is_scalar(rule):
        return
    if not isinstance(rule, dict) or len(rule) != 1:
        raise InvalidPattern(f"a rule is a value or an object with one operator: {rule!r}")
    ((name, operand),) = rule.items()
    if name in NOT_MODELLED:
        raise InvalidPattern(f"the operator {name!r} is EventBridge's; the emulator does not model it")
    if name in ("prefix", "suffix"):
        _check_text_operand(name, operand)
    elif name == "equals-ignore-case":
        if not isinstance(operand, str):
            raise InvalidPattern(f"equals-ignore-case takes a string: {operand!r}")
    elif name == "anything-but":
        _check_anything_but(operand)
    elif name == "numeric":
        _check_numeric(operand)
    elif name == "exists":
        if not isinstance(operand, bool):
            raise InvalidPattern(f"exists takes true or false: {operand!r}")
    else:
        raise InvalidPattern(f"unknown operator {name!r}")


def _check_object(pattern: Any, path: str) -> None:
    if not isinstance(pattern, dict):
        raise InvalidPattern(f"{path or 'the pattern'} must be a JSON object")
    for key, value in pattern.items():
        where = f"{path}.{key}" if path else key
        if key == "$or":
            if not isinstance(value, list) or len(value) < 2:
                raise InvalidPattern(f"{where} takes a list of at least two patterns")
            for option in value:
                _check_object(option, where)
        elif isinstance(value, dict):
            _check_object(value, where)
        elif isinstance(value, list) and value:
            for rule in value:
                _check_rule(rule)
        else:
            raise InvalidPattern(f"{where} must be an object or a non-empty list of rules, not {value!r}")


@functools.lru_cache(maxsize=256)
def compile_pattern(text: str) -> dict[str, Any]:
    """The pattern ``text`` parsed and checked; :class:`InvalidPattern` says what Lambda would refuse."""
    if len(text) > MAX_PATTERN_LENGTH:
        raise InvalidPattern(f"a pattern holds at most {MAX_PATTERN_LENGTH} characters, not {len(text)}")
    try:
        pattern = json.loads(text)
    except ValueError as error:
        raise InvalidPattern(f"the pattern is not JSON: {error}") from None
    _check_object(pattern, "")
    return pattern  # type: ignore[no-any-return]


def _equal(rule: Any, value: Any) -> bool:
    if isinstance(rule, bool) or isinstance(value, bool):
        return isinstance(rule, bool) and isinstance(value, bool) and rule is value
    if _is_number(rule) or _is_number(value):
        return _is_number(rule) and _is_number(value) and json.dumps(rule) == json.dumps(value)
    return bool(rule == value)  # strings, or null with null


def _text(operand: Any, value: Any, test: str) -> bool:
    """``prefix`` / ``suffix`` / ``equals-ignore-case`` (``test``) of ``operand`` against ``value``."""
    if not isinstance(value, str):
        return False
    fold = isinstance(operand, dict)
    expected = operand["equals-ignore-case"] if fold else operand
    candidates = expected if isinstance(expected, list) else [expected]
    if fold or test == "equals-ignore-case":
        value, candidates = value.lower(), [c.lower() for c in candidates]
    if test == "prefix":
        return any(value.startswith(c) for c in candidates)
    if test == "suffix":
        return any(value.endswith(c) for c in candidates)
    return value in candidates


def _numeric(operand: list[Any], value: Any) -> bool:
    if not _is_number(value):
        return False
    checks = {"=": value.__eq__, "<": value.__lt__, "<=": value.__le__, ">": value.__gt__, ">=": value.__ge__}
    return all(checks[operator](bound) for operator, bound in zip(operand[::2], operand[1::2], strict=True))


def _anything_but(operand: Any, value: Any) -> bool:
    if isinstance(operand, dict):
        ((test, expected),) = operand.items()
        return not _text(expected, value, test)
    excluded = operand if isinstance(operand, list) else [operand]
    return not any(_equal(each, value) for each in excluded)


def _rule_matches(rule: Any, value: Any) -> bool:
    if not isinstance(rule, dict):
        return _equal(rule, value)
    ((name, operand),) = rule.items()
    if name in ("prefix", "suffix", "equals-ignore-case"):
        return _text(operand, value, name)
    if name == "numeric":
        return _numeric(operand, value)
    if name == "anything-but":
        return _anything_but(operand, value)
    return False


def _leaf_matches(rules: list[Any], field: Any) -> bool:
    """A field's rules against its value: a leaf, an array of leaves, or (for ``exists``) nothing."""
    if isinstance(field, list):
        values = [v for v in field if _is_scalar(v)]
    else:
        values = [field] if field is not _MISSING and _is_scalar(field) else []
    for rule in rules:
        if isinstance(rule, dict) and "exists" in rule:
            if bool(values) == rule["exists"]:
                return True
        elif any(_rule_matches(rule, value) for value in values):
            return True
    return False


def _object_matches(pattern: dict[str, Any], value: Any) -> bool:
    if isinstance(value, list):  # an array of objects: one of them matches
        return any(_object_matches(pattern, element) for element in value) or (
            not any(isinstance(e, dict) for e in value) and _object_matches(pattern, _MISSING)
        )
    for key, rules in pattern.items():
        if key == "$or":
            if not any(_object_matches(option, value) for option in rules):
                return False
            continue
        field = value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
        matched = _object_matches(rules, field) if isinstance(rules, dict) else _leaf_matches(rules, field)
        if not matched:
            return False
    return True


def matches(patterns: Iterable[str], record: dict[str, Any]) -> bool:
    """Whether ``record`` passes a mapping's filters: no filter at all, or one pattern that matches."""
    texts = list(patterns)
    return not texts or any(_object_matches(compile_pattern(text), record) for text in texts)


__all__ = ["MAX_PATTERN_LENGTH", "InvalidPattern", "compile_pattern", "matches"]
