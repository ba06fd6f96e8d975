"""The key a trace is about, from what the user has: the key fields' values, a message id, a deduplication id
or a body.

Whatever the form, it becomes the message Lambda's event source would hand the consumer (a body at the key
fields' paths, a message id, a deduplication id), which the consumer's own code then keys: KEY_PREFIX, the
reserved namespace and the size limits apply exactly as they do in the function.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from idempotent_runtime.contract import FIELD_KEY_SOURCES, FIELD_PATH_SEPARATOR, KEY_SOURCE, KeySource

from idempotent_cli.dlq.letters import Outgoing
from idempotent_cli.errors import DlqError

# The message id of the message a trace builds, for every key source but message_id (which keys by it).
TRACE_MESSAGE_ID = "idempotent-pipeline-trace"
# The key sources that key by an id: its option, and its name.
BY_ID = {
    KeySource.MESSAGE_ID: ("--message-id", "message id"),
    KeySource.DEDUP_ID: ("--dedup-id", "deduplication id"),
}


@dataclass(frozen=True)
class Wanted:
    """The message whose key is traced, and how the user gave it (for the screen)."""

    message: Outgoing
    message_id: str
    given: str  # e.g. "order_id 'o-1', line_id '1'"
    with_body: bool  # a real body: compare its fingerprint with the stored one


def from_args(args: argparse.Namespace, config: Any) -> Wanted:
    """The traced message from the command line's key options, for the consumer configured by ``config``
    (the runtime's Config); a form its KEY_SOURCE does not key by is refused, naming what would work."""
    source = KeySource(config.key_source)
    parts = list(args.parts or [])
    named = options(args)
    given = [name for name, value in named.items() if value is not None]
    if not parts and not given and args.body is None:
        raise DlqError(f"give the key to trace: {_forms(source, config)}")
    if source in FIELD_KEY_SOURCES:
        return _fields(parts, args, given, config)
    if source is KeySource.BODY_SHA256:
        if parts or given or args.body is None:
            raise DlqError(
                f"the consumer keys messages by the SHA-256 of their body ({KEY_SOURCE.name}=body_sha256): "
                f"give the body with --body, got {_shown(parts, given)}"
            )
        return Wanted(as_received(args.body), TRACE_MESSAGE_ID, "this body", True)
    option, noun = BY_ID[source]
    other = [name for name in given if name != option]
    value = named[option]
    if other or len(parts) > 1 or (parts and value is not None):
        raise DlqError(
            f"the consumer keys messages by their {noun} ({KEY_SOURCE.name}={source}): give it as "
            f"one KEY or with {option}, got {_shown(parts, given)}"
        )
    value = value if value is not None else (parts[0] if parts else None)
    if value is None:
        raise DlqError(
            f"the consumer keys messages by their {noun} ({KEY_SOURCE.name}={source}): --body alone "
            f"cannot say which; give the {noun} too ({option} ID)"
        )
    body = args.body if args.body is not None else "{}"
    if source is KeySource.MESSAGE_ID:
        return Wanted(as_received(body), value, f"message id {value!r}", args.body is not None)
    return Wanted(
        as_received(body, dedup_id=value),
        TRACE_MESSAGE_ID,
        f"deduplication id {value!r}",
        args.body is not None,
    )


def options(args: argparse.Namespace) -> dict[str, str | None]:
    """The key options of the command line, by option."""
    return {
        "--partition": args.partition,
        "--sort": args.sort,
        "--message-id": args.message_id,
        "--dedup-id": args.dedup_id,
    }


def _fields(parts: list[str], args: argparse.Namespace, given: list[str], config: Any) -> Wanted:
    source = KeySource(config.key_source)
    paths = _paths(config)
    unread = ("--message-id", "--dedup-id") + (("--sort",) if len(paths) == 1 else ())
    wrong = [name for name in given if name in unread]
    if wrong:
        raise DlqError(
            f"the consumer keys messages by the field{'s' * (len(paths) - 1)} {', '.join(paths)} "
            f"({KEY_SOURCE.name}={source}), not by "
            f"{wrong[0][2:].replace('-', ' ')}: {_forms(source, config)}"
        )
    if args.body is not None:
        if parts or given:
            raise DlqError(
                f"give the key's values or --body, not both (got {_shown(parts, given)} and --body)"
            )
        return Wanted(as_received(args.body), TRACE_MESSAGE_ID, "this body", True)
    if given and parts:
        raise DlqError(
            "give the key's values as KEY KEY or with --partition/--sort, not both "
            f"(got {_shown(parts, given)})"
        )
    values = parts if parts else [args.partition, args.sort][: len(paths)]
    if len(values) != len(paths) or None in values:
        raise DlqError(
            f"the consumer keys messages by {_by(paths)} ({KEY_SOURCE.name}={source}): give "
            f"{'both values' if len(paths) == 2 else 'its value, one'}, got {_shown(parts, given)}"
        )
    body = _body_at(paths, values)
    shown = ", ".join(f"{path} {value!r}" for path, value in zip(paths, values, strict=True))
    return Wanted(as_received(json.dumps(body)), TRACE_MESSAGE_ID, shown, False)


def _paths(config: Any) -> tuple[str, ...]:
    """The body fields the consumer keys by: two (KEY_SOURCE=fields), or one (field)."""
    return tuple(path for path in (config.partition_key_field, config.sort_key_field) if path is not None)


def _by(paths: tuple[str, ...]) -> str:
    return f"two fields, {paths[0]} and {paths[1]}" if len(paths) == 2 else f"one field, {paths[0]}"


def _body_at(paths: tuple[str, ...], values: list[str]) -> dict[str, Any]:
    """A body holding ``values`` at the dotted ``paths`` (as strings: the consumer keys a number by the same
    text, ``1`` for ``1``)."""
    if len(paths) == 2 and paths[0] == paths[1]:
        if values[0] != values[1]:
            raise DlqError(
                f"the partition and sort key are both the field {paths[0]}: give the same value twice, got "
                f"{values[0]!r} and {values[1]!r}"
            )
        values = values[:1]
    body: dict[str, Any] = {}
    for path, value in zip(paths, values, strict=False):
        node = body
        *parents, leaf = path.split(FIELD_PATH_SEPARATOR)
        for name in parents:  # the paths never lie inside each other (contract.SETTINGS_RULES refuses it)
            node = node.setdefault(name, {})
        node[leaf] = value
    return body


def as_received(body: str, *, dedup_id: str | None = None) -> Outgoing:
    """``body`` as the consumer would receive it: no attributes, ``dedup_id`` on a FIFO queue."""
    return Outgoing(body=body, attributes={}, dedup_id=dedup_id)


def _forms(source: KeySource, config: Any) -> str:
    if source is KeySource.FIELDS:
        return (
            f"the values of {config.partition_key_field} and {config.sort_key_field} (trace VALUE VALUE, or "
            "--partition VALUE --sort VALUE), or a body (--body JSON)"
        )
    if source is KeySource.FIELD:
        return (
            f"the value of {config.partition_key_field} (trace VALUE, or --partition VALUE), or a body "
            "(--body JSON)"
        )
    if source is KeySource.BODY_SHA256:
        return "a body (--body TEXT): the consumer keys messages by its SHA-256"
    option, noun = BY_ID[source]
    return f"the {noun} (trace ID, or {option} ID), and optionally its body (--body JSON)"


def _shown(parts: list[str], given: list[str]) -> str:
    shown = [repr(part) for part in parts] + given
    return ", ".join(shown) if shown else "nothing"
