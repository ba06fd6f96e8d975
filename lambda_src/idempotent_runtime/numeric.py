"""Numbers as text, one function per purpose, over one reading of ``int``, ``float`` and ``Decimal``:

* :func:`canonical`: one text per value, for fingerprints (``100`` = ``100.0`` = ``1E+2``);
* :func:`plain`: the value without an exponent, for keys (``1e2`` -> ``100``, ``1.50`` -> ``1.5``);
* :func:`exact`: the text Python writes for the value as it is (``1.50`` stays ``1.50``), for results;
* :func:`dynamodb`: :func:`exact`, for a number DynamoDB can hold (raises ValueError naming the rule).

``NaN`` and ``Infinity`` raise :class:`NotFinite`.
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal

from idempotent_runtime.contract import MAX_NUMBER_DIGITS, MAX_NUMBER_MAGNITUDE, MIN_NUMBER_MAGNITUDE

Number = int | float | Decimal

# Integral values up to this many digits are written as integers in canonical text; larger ones keep the
# exponent form (1E+5000), so nothing huge is ever materialised. It is Python's default limit on int/str
# conversion: the parser makes a JSON integer with more digits a Decimal, so an int and a Decimal of one
# value meet the same rule, although the C encoder writes every int in full.
MAX_INTEGER_DIGITS = sys.int_info.default_max_str_digits  # 4300
_PLAIN_INTEGERS = 10**MAX_INTEGER_DIGITS  # ints below this in magnitude have at most that many digits
_SMALL_INT = 10**MAX_NUMBER_DIGITS  # every int below this in magnitude fits in DynamoDB
_MAX_ADJUSTED = Decimal(MAX_NUMBER_MAGNITUDE).adjusted()  # 125
_MIN_ADJUSTED = Decimal(MIN_NUMBER_MAGNITUDE).adjusted()  # -130


class NotFinite(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity``; ``text`` is how Python writes it (``nan``, ``NaN``)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"{text} is not a finite number")
        self.text = text


def exact(value: Number) -> str:
    """The value as Python writes it: a float's shortest repr, a Decimal's own text, an int's digits."""
    if isinstance(value, float):
        text = float.__repr__(value)
        if not math.isfinite(value):
            raise NotFinite(text)
        return text
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise NotFinite(str(value))
        return str(value)
    return int.__repr__(value)


def _decimal(value: Number) -> Decimal:
    """The exact Decimal of ``value`` (an int without int's string conversion limit)."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise NotFinite(str(value))
        return value
    return Decimal(exact(value)) if isinstance(value, float) else Decimal(value)


def normalized(value: Decimal) -> tuple[int, str, int]:
    """``(sign, digits, exponent)`` of a finite non-zero Decimal without trailing zeros in ``digits``: one
    form per value, computed exactly (``Decimal.normalize`` would round to the context's 28 digits)."""
    sign, digit_tuple, exponent = value.as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exponent, int)
    return sign, digits, exponent + len(digit_tuple) - len(digits)


def canonical(value: Number) -> str:
    """One text per numeric value: ``100``, ``100.0`` and ``1E+2`` are ``100``; ``1.50`` is ``15E-1``.

    Integral values up to 4300 digits are plain integers (as JSON writes ``int``); others
    ``<digits>E<exponent>`` with no trailing zero in the digits, which no other value shares - the same for
    an ``int`` and a ``Decimal`` of one value.
    """
    if type(value) is int and -_PLAIN_INTEGERS < value < _PLAIN_INTEGERS:
        try:
            return str(value)
        except ValueError:  # the interpreter's limit was lowered: the digits of the Decimal below
            pass
    decimal = _decimal(value)
    if not decimal:
        return "0"
    sign, digits, exponent = normalized(decimal)
    minus = "-" if sign else ""
    if exponent >= 0 and len(digits) + exponent <= MAX_INTEGER_DIGITS:
        return minus + digits + "0" * exponent
    return f"{minus}{digits}E{exponent}"


def plain(value: Number) -> str:
    """A number's value without an exponent (``1e2`` -> ``100``, ``1.50`` -> ``1.5``, ``-0`` -> ``0``):
    the text of a numeric key. Call only for numbers whose text is bounded (keys are checked first)."""
    if type(value) is int:
        return str(value)
    decimal = _decimal(value)
    if not decimal:
        return "0"
    sign, digits, exponent = normalized(decimal)
    minus = "-" if sign else ""
    if exponent >= 0:
        return minus + digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return f"{minus}{digits[:point]}.{digits[point:]}"
    return f"{minus}0.{'0' * -point}{digits}"


def dynamodb(value: Number) -> str:
    """The text DynamoDB stores for a number, exactly (:func:`exact`); raises ValueError, naming the rule,
    for a number DynamoDB cannot hold (``is nan, ...``, ``has 39 significant digits; ...``)."""
    if type(value) is int and -_SMALL_INT < value < _SMALL_INT:
        return str(value)
    try:
        decimal = _decimal(value)
    except NotFinite as exc:
        raise ValueError(f"is {exc.text}, which DynamoDB cannot store") from None
    if not decimal:
        return "0"
    _sign, digits, _exponent = normalized(decimal)
    if len(digits) > MAX_NUMBER_DIGITS:
        raise ValueError(
            f"has {len(digits)} significant digits; DynamoDB numbers hold at most {MAX_NUMBER_DIGITS}"
        )
    adjusted = decimal.adjusted()
    if not _MIN_ADJUSTED <= adjusted <= _MAX_ADJUSTED:
        raise ValueError(
            f"has a magnitude of about 1E{adjusted:+d}, outside DynamoDB's range "
            f"{MIN_NUMBER_MAGNITUDE} to {MAX_NUMBER_MAGNITUDE}"
        )
    return exact(value)
