"""Checks of the constructs' options, as data: a table of rules per block, each skipping deploy-time tokens.

Values are read once from the Python objects the constructs were given (a ``Duration`` costs one jsii round
trip, a plain ``int`` or ``str`` none) into a block's frozen props dataclass of plain values; the rules then
run in Python. An option that sets a runtime setting is read and checked by the setting's declaration in
the contract (:func:`read`). A value only known at deploy time (a CDK token) becomes :data:`TOKEN`; every
rule that reads it is skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from aws_cdk import Annotations, Duration, Token
from constructs import IConstruct
from idempotent_runtime import contract
from idempotent_runtime.contract import ConfigurationError, shown
from jsii._reference_map import InterfaceDynamicProxy


class _Token:
    """A value only known at deploy time: rules that read it are skipped."""

    def __repr__(self) -> str:
        return "<deploy-time token>"


TOKEN: Any = _Token()

# How CDK encodes tokens in strings (Token.is_unresolved looks for the same markers).
_STRING_TOKEN_MARKERS = ("${Token[", "#{Token[")


def is_token(value: object) -> bool:
    """True for a CDK token. Strings, and lists of them, are decided here: most values asked about are
    strings, and asking jsii costs a round trip each."""
    if value is None or isinstance(value, bool | int):
        return False
    if isinstance(value, str):
        return any(marker in value for marker in _STRING_TOKEN_MARKERS)
    if isinstance(value, list | tuple):
        return any(is_token(item) for item in value)
    return bool(Token.is_unresolved(value))


# -- reading values -------------------------------------------------------------------------------------

# Durations the constructs create (the options' defaults, a derived visibility timeout) carry their seconds,
# so reading one back costs no round trip at all (measured: without it a synth of the reference app makes ten
# more round trips, and its synth time over plain aws-cdk-lib's grows by about 0.1x).
_SECONDS = "_idempotent_pipeline_seconds"


def duration(seconds: int) -> Duration:
    """A Duration whose value :func:`seconds` knows without asking jsii."""
    value = Duration.seconds(seconds)
    setattr(value, _SECONDS, seconds)
    return value


def seconds(prop: str, value: object) -> Any:
    """Whole seconds of a Duration prop; :data:`TOKEN` for a deploy-time value; None stays None."""
    if value is None:
        return None
    known = getattr(value, _SECONDS, None)
    if known is not None:
        return known
    if not isinstance(value, Duration):
        raise ConfigurationError(
            f"{prop} must be an aws_cdk.Duration (e.g. Duration.seconds(30)); got {shown(value)}"
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


def boolean(prop: str, value: object) -> Any:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ConfigurationError(f"{prop} must be True or False; got {shown(value)}")
    return value


def text(prop: str, value: object) -> Any:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigurationError(f"{prop} must be a string; got {shown(value)}")
    return TOKEN if is_token(value) else value


def texts(prop: str, value: object) -> Any:
    """A list of strings (a str alone is not one: it would be read as its characters)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{prop} must be a list of strings; got {shown(value)}")
    items = [text(f"{prop}[{index}]", item) for index, item in enumerate(value)]
    return TOKEN if any(item is TOKEN for item in items) else tuple(items)


def instance(prop: str, value: object, kind: type, wanted: str) -> Any:
    """``value`` unchanged when it is a ``kind`` (a class, or a jsii interface such as ``sqs.IQueue``)."""
    if value is not None and not implements(value, kind):
        raise ConfigurationError(f"{prop} must be {wanted}; got {shown(value)}")
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
        raise ConfigurationError(f"{prop} must be a list of {wanted}; got {shown(value)}")
    return value


def mapping(prop: str, value: object, kind: type, wanted: str) -> Any:
    """``value`` unchanged when it maps strings to ``kind`` objects."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(name, str) and implements(item, kind) for name, item in value.items()
    ):
        raise ConfigurationError(f"{prop} must be a mapping of names to {wanted}; got {shown(value)}")
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


def read(name: str, kind: contract.Kind, value: object, *, unset: bool = False) -> tuple[Any, Any]:
    """An option as the contract's ``kind`` takes it - read as the kind's option type (a Duration for
    seconds), then checked by the kind, errors naming ``name`` - and, for a value only known at deploy time
    (returned as :data:`TOKEN`), the text the function's environment gets instead. None is unset when
    ``unset`` (an option whose default is None) and never for a lifetime; else the kind refuses it."""
    if value is None and isinstance(kind, contract.Lifetime):
        return contract.NEVER, None
    if value is None and unset:
        return None, None
    if isinstance(kind, contract.Seconds):
        whole = seconds(name, value)
        if whole is TOKEN:
            return TOKEN, Token.as_string(cast(Duration, value).to_seconds())
        value = whole
    elif not isinstance(kind, contract.Choice) and is_token(value):
        # Text, and lists of it, carry their tokens inside; a number token is written as one.
        return TOKEN, kind.render(value) if isinstance(value, str | list | tuple) else Token.as_string(value)
    return kind.coerce(name, value), None


def options_of(prop: str, value: object, kind: type[Any]) -> Any:
    """An options object, or its defaults for None."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ConfigurationError(f"{prop} must be a {kind.__name__}; got {shown(value)}")
    return value


# -- rules ----------------------------------------------------------------------------------------------

P = TypeVar("P")


@dataclass(frozen=True)
class Rule(Generic[P]):
    """One check of a block's resolved props (as aws-cdk-lib's ``validate-queue-props.ts``):
    ``condition(props)`` is true for a configuration that cannot work, ``message(props)`` says so. A rule
    whose condition reads a deploy-time value (:data:`TOKEN`) is skipped. With ``warning`` (an
    acknowledgeable id) a broken rule adds a synth warning instead of failing."""

    condition: Callable[[P], object]
    message: Callable[[P], str]
    warning: str | None = None


class _Unknown(Exception):
    """A rule read a value only known at deploy time."""


class _Known:
    """The props as a rule's condition sees them: reading a deploy-time value, also through one of their
    properties or in a dataclass they hold, skips the rule."""

    def __init__(self, props: object) -> None:
        self._props = props

    def __getattr__(self, name: str) -> Any:
        derived = getattr(type(self._props), name, None)
        if isinstance(derived, property) and derived.fget is not None:
            value = derived.fget(self)
        else:
            value = getattr(self._props, name)
        if value is TOKEN:
            raise _Unknown(name)
        return _Known(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value


def holds(condition: Callable[[P], object], props: P) -> bool:
    """Whether ``condition(props)`` is true; False when it reads a deploy-time value (:data:`TOKEN`), which
    no rule guesses at. The constructs' rules and idempotent_nag's both run their conditions through it."""
    try:
        return bool(condition(cast(P, _Known(props))))
    except _Unknown:
        return False


def enforce(scope: IConstruct, rules: Iterable[Rule[P]], props: P) -> None:
    """Raise ConfigurationError for the first broken error rule; add a warning for each broken warning."""
    for rule in rules:
        if not holds(rule.condition, props):
            continue
        if rule.warning is None:
            raise ConfigurationError(rule.message(props))
        warn(scope, rule.warning, rule.message(props))


def warn(scope: IConstruct, warning_id: str, message: str) -> None:
    """An acknowledgeable synth warning (``Annotations.of(scope).acknowledge_warning(id, reason)``)."""
    Annotations.of(scope).add_warning_v2(warning_id, message)


def outside(value: Any, low: int, high: int | None = None) -> bool:
    """A value that is set and outside [low, high]."""
    return value is not None and (value < low or (high is not None and value > high))


def describe(resource: Any, attribute: str) -> str:
    """A resource's name (its ``attribute``) when known at synth, else its construct path."""
    if resource is None:
        return ""
    name = getattr(resource, attribute)
    return str(resource.node.path if is_token(name) else name)
