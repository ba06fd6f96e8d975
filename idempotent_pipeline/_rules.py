"""Checks of the constructs' options, as data: a table of rules per block, each skipping deploy-time tokens.

Values are read once from the Python objects the constructs were given (a ``Duration`` costs one jsii round
trip, a plain ``int`` or ``str`` none) and put into a dict of plain values; the rules then run in Python.
A value only known at deploy time (a CDK token) becomes :data:`TOKEN`; every rule that reads it is skipped.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from aws_cdk import Annotations, Duration, Token
from constructs import IConstruct
from idempotent_runtime.contract import ConfigurationError
from jsii._reference_map import InterfaceDynamicProxy

E = TypeVar("E", bound=Enum)


class _Token:
    """A value only known at deploy time: rules that read it are skipped."""

    def __repr__(self) -> str:
        return "<deploy-time token>"


TOKEN: Any = _Token()

# How CDK encodes tokens in strings and lists (Token.is_unresolved looks for the same markers), and in
# numbers: a double whose top 16 bits are 0xFBFF (aws-cdk-lib core/lib/private/encoding.ts).
_STRING_TOKEN_MARKERS = ("${Token[", "#{Token[")
_NUMBER_TOKEN_BITS = 0xFBFF


def is_token(value: object) -> bool:
    """True for a CDK token. Plain Python values are decided here: asking jsii costs a round trip each."""
    if value is None or isinstance(value, bool | int):
        return False
    if isinstance(value, str):
        return any(marker in value for marker in _STRING_TOKEN_MARKERS)
    if isinstance(value, float):
        return struct.unpack("<Q", struct.pack("<d", value))[0] >> 48 == _NUMBER_TOKEN_BITS
    if isinstance(value, list | tuple):
        return any(is_token(item) for item in value)
    return bool(Token.is_unresolved(value))


# -- reading values -------------------------------------------------------------------------------------

# Durations the constructs create once (the options' defaults) and their seconds: recognised by identity,
# so a default costs no round trip at all.
_KNOWN_SECONDS: dict[int, int] = {}


def duration(seconds: int) -> Duration:
    """A module-level default Duration whose value :func:`seconds` knows without asking jsii."""
    value = Duration.seconds(seconds)
    _KNOWN_SECONDS[id(value)] = seconds
    return value


def seconds(prop: str, value: object) -> Any:
    """Whole seconds of a Duration prop; :data:`TOKEN` for a deploy-time value; None stays None."""
    if value is None:
        return None
    known = _KNOWN_SECONDS.get(id(value))
    if known is not None:
        return known
    if not isinstance(value, Duration):
        raise ConfigurationError(
            f"{prop} must be an aws_cdk.Duration (e.g. Duration.seconds(30)); got {_show(value)}"
        )
    try:
        whole = value.to_seconds()
    except RuntimeError:  # a fraction of a second, or a token in another unit than seconds
        if value.is_unresolved():  # CDK converts a deploy-time value only from seconds
            raise ConfigurationError(
                f"{prop} from a deploy-time value must be given in seconds (Duration.seconds(value)), "
                f"which CDK can pass on; got {value.to_human_string()}"
            ) from None
        raise ConfigurationError(
            f"{prop} must be a whole number of seconds; got {value.to_human_string()}"
        ) from None
    return TOKEN if is_token(whole) else int(whole)


def integer(prop: str, value: object) -> Any:
    if value is None:
        return None
    if is_token(value):
        return TOKEN
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{prop} must be an integer; got {_show(value)}")
    return value


def boolean(prop: str, value: object) -> Any:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ConfigurationError(f"{prop} must be True or False; got {_show(value)}")
    return value


def text(prop: str, value: object) -> Any:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigurationError(f"{prop} must be a string; got {_show(value)}")
    return TOKEN if is_token(value) else value


def texts(prop: str, value: object) -> Any:
    """A list of strings (a str alone is not one: it would be read as its characters)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{prop} must be a list of strings; got {_show(value)}")
    items = [text(f"{prop}[{index}]", item) for index, item in enumerate(value)]
    return TOKEN if any(item is TOKEN for item in items) else tuple(items)


def choice(prop: str, value: object, enum: type[E]) -> E:
    """A member of a closed set, given as the enum member or its string value."""
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(member.value) for member in enum)
        raise ConfigurationError(f"{prop} must be one of {choices}; got {_show(value)}") from None


def instance(prop: str, value: object, kind: type, wanted: str) -> Any:
    """``value`` unchanged when it is a ``kind`` (a class, or a jsii interface such as ``sqs.IQueue``)."""
    if value is not None and not implements(value, kind):
        raise ConfigurationError(f"{prop} must be {wanted}; got {_show(value)}")
    return value


def instances(prop: str, value: object, kind: type, wanted: str) -> Any:
    """``value`` unchanged when it is a list of ``kind`` (a str or a single object is not one)."""
    if value is None:
        return None
    if (
        isinstance(value, str | bytes)
        or not isinstance(value, Sequence)
        or not all(implements(item, kind) for item in value)
    ):
        raise ConfigurationError(f"{prop} must be a list of {wanted}; got {_show(value)}")
    return value


def mapping(prop: str, value: object, kind: type, wanted: str) -> Any:
    """``value`` unchanged when it maps strings to ``kind`` objects."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(name, str) and implements(item, kind) for name, item in value.items()
    ):
        raise ConfigurationError(f"{prop} must be a mapping of names to {wanted}; got {_show(value)}")
    return value


def implements(value: object, kind: type) -> bool:
    """isinstance for classes and for jsii interfaces (typing protocols that isinstance refuses)."""
    if getattr(kind, "_is_protocol", False) is not True:
        return isinstance(value, kind)
    if isinstance(value, InterfaceDynamicProxy):  # an object jsii knows by several interfaces
        return any(implements(delegate, kind) for delegate in value._delegates)
    proxy = getattr(kind, "__jsii_proxy_class__", None)
    if proxy is not None and isinstance(value, proxy()):
        return True
    return any(
        kind in getattr(declared, "__mro__", (declared,))
        for cls in type(value).__mro__
        for declared in getattr(cls, "__jsii_ifaces__", ())
    )


def options_of(prop: str, value: object, kind: type[Any]) -> Any:
    """An options object, or its defaults for None."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ConfigurationError(f"{prop} must be a {kind.__name__}; got {_show(value)}")
    return value


def _show(value: object) -> str:
    if isinstance(value, str | int | float | bool | type(None) | list | tuple | dict):
        return repr(value)
    return f"{type(value).__name__} {value!r}"


# -- rules ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One check: ``broken(*values of props)`` is True for a configuration that cannot work.

    ``message`` is formatted with the props' values (``{batch_size}``). Skipped when a prop is a deploy-time
    token. With ``warning`` (an acknowledgeable id) a broken rule adds a synth warning instead of an error.
    """

    props: tuple[str, ...]
    broken: Callable[..., bool]
    message: str
    warning: str | None = None


def enforce(scope: IConstruct, rules: Iterable[Rule], values: Mapping[str, Any]) -> None:
    """Raise ConfigurationError for the first broken error rule; add a warning for each broken warning."""
    for rule in rules:
        args = [values.get(prop) for prop in rule.props]
        if any(arg is TOKEN for arg in args) or not rule.broken(*args):
            continue
        message = rule.message.format(**values)
        if rule.warning is None:
            raise ConfigurationError(message)
        warn(scope, rule.warning, message)


def warn(scope: IConstruct, warning_id: str, message: str) -> None:
    """An acknowledgeable synth warning (``Annotations.of(scope).acknowledge_warning(id, reason)``)."""
    Annotations.of(scope).add_warning_v2(warning_id, message)


def outside(low: int, high: int | None = None) -> Callable[[Any], bool]:
    """Broken when a value is set and outside [low, high]."""
    return lambda value: value is not None and (value < low or (high is not None and value > high))


def given(value: object) -> bool:
    return value is not None


class lazy:
    """A value for a rule message computed only when the message is written (it may cost jsii calls)."""

    def __init__(self, compute: Callable[[], object]) -> None:
        self._compute = compute

    def __format__(self, spec: str) -> str:
        return format(self._compute(), spec)


def describe(construct: IConstruct, name: object) -> str:
    """A resource's name when known at synth, else its construct path."""
    return construct.node.path if is_token(name) else str(name)
