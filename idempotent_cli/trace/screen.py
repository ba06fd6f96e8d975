"""What a trace prints: one screen, or the same facts as one JSON document (``--json``)."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from typing import Any

from idempotent_runtime.contract import OnConflict

from idempotent_cli.dlq.commands import Context, letter_summary, message_line
from idempotent_cli.dlq.keystate import KeyTable
from idempotent_cli.dlq.letters import Which
from idempotent_cli.stack import Pipeline, listing
from idempotent_cli.trace import hops
from idempotent_cli.trace.look import (
    InFlight,
    Letters,
    Record,
    Versions,
    has_result,
    stored_attributes,
    when,
)
from idempotent_cli.trace.wanted import Wanted

LABEL = 14  # the width of the screen's left column
QUEUE_NAMES = {Which.DLQ: "dead-letter queue", Which.SUBSCRIPTION: "subscription's dead-letter queue"}
# What SQS does not show, said wherever it matters.
NOT_VISIBLE = (
    "SQS does not show messages in flight (received by the consumer, not yet deleted or back in the queue), "
    "only their number: once the consumer writes the key's record the table above says so (in progress in "
    "guarded mode, stored or completed when done)"
)


@dataclass(frozen=True)
class Traced:
    """One consumer's trace of the key: where it looked, with what configuration, and what it found."""

    context: Context
    keys: KeyTable
    wanted: Wanted
    table: Record
    dead_letters: list[Letters]
    queue: InFlight
    emitted: list[hops.Item]  # what the key emitted, hop by hop

    @property
    def pipeline(self) -> Pipeline:
        return self.context.target.pipeline

    @property
    def anything(self) -> bool:
        """Whether the key is here: a record (even an expired one), a dead letter, a peeked message."""
        return (
            self.table.state != "absent"
            or any(letters.found for letters in self.dead_letters)
            or bool(self.queue.found)
        )


def meaning(record: Record, keys: KeyTable) -> str:
    """What the key's state means for its next delivery."""
    mode = keys.mode
    state = record.state
    if state == "absent":
        return "not in the table: the next delivery of this key is processed"
    if state == "expired":
        return (
            f"its record expired at {when(record.expires_at)} (TTL; DynamoDB deletes it within about 48 "
            "hours): it counts as absent, the next delivery of this key is processed"
        )
    if state == "lease_expired":
        return (
            f"claimed by {record.owner}, whose lease expired at {when(record.lease_expires_at)}: the next "
            "delivery of the same payload takes the claim over and runs the processor again"
        )
    if state == "in_progress":
        return (
            f"in progress: claimed by {record.owner} until {when(record.lease_expires_at)} (lease); a "
            "delivery of this key meanwhile fails and is retried until the claim completes or its lease "
            "expires"
        )
    if state == "conflict":
        per_policy = (
            "counted as a duplicate"
            if keys.config.on_conflict == OnConflict.DUPLICATE
            else "quarantined to the dead-letter queue as a conflict"
        )
        return f"done with another payload: a delivery of this body is {per_policy} (ON_CONFLICT)"
    versions = record.versions
    if state in ("stale", "older"):
        return _against(versions, state)
    if state in ("stored", "completed"):
        if versions is not None:
            return _version_stored(
                versions, " (the same payload as this body)" if record.message_fingerprint else ""
            )
        done = {
            "document": "the document is in the table",
            "transaction": "the marker of its transaction is in the table",
            "guarded": "the processor ran for it",
        }.get(mode, "done")
        same = " (the same payload as this body)" if record.message_fingerprint else ""
        return f"{done}{same}; a delivery of this key is a duplicate, with another payload a conflict"
    return f"invalid: {record.reason or 'the item at the key is not an idempotency record'}"


def _against(versions: Versions | None, state: str) -> str:
    """Versioned: what a delivery of the body does to a key that holds another version of it."""
    stored = versions.stored if versions else None
    message = versions.message if versions else None
    if state == "stale":
        holds = (
            f"holds version {stored.text}, newer than this body's {message.text}"
            if stored and message
            else "holds a newer version"
        )
        return f"{holds}: a delivery of this body is stale, it writes nothing"
    if stored is None:
        holds = "holds an item no versioned write made (it has no version)"
    else:
        holds = f"holds version {stored.text}, older than this body's {message.text if message else '?'}"
    return f"{holds}: a delivery of this body writes its state over it"


def _version_stored(versions: Versions, same: str) -> str:
    """Versioned: the key holds a state (or a tombstone) at a version."""
    version = versions.stored.text if versions.stored else "?"
    held = (
        f"the entity is deleted: its tombstone at version {version} is in the table"
        if versions.deleted
        else f"version {version} of the entity's state is in the table"
    )
    return (
        f"{held}{same}; a delivery of this version is a duplicate (with another payload a conflict), of an "
        "older one stale, of a newer one written over it"
    )


def document(traced: Traced) -> dict[str, Any]:
    """The ``--json`` document of one consumer's trace."""
    context, keys, wanted, record = traced.context, traced.keys, traced.wanted, traced.table
    return {
        "pipeline": _pipeline(context, keys),
        "key": {
            "given": wanted.given,
            "partition": record.key.partition,
            "sort": record.key.sort,
            "text": str(record.key),
            "idempotency_key": record.key.idempotency_key,
        },
        "table": {
            "state": record.state,
            "record_state": record.record_state,
            "meaning": meaning(record, keys),
            "record": record.location,
            "found": bool(record.item),
            "fingerprint": record.fingerprint,
            "message_fingerprint": record.message_fingerprint,
            "expires_at": when(record.expires_at),
            "status": record.status,
            "owner": record.owner,
            "lease_expires_at": when(record.lease_expires_at),
            "message_id": record.message_id,
            "dedup_id": record.dedup_id,
            **_versions_document(record.versions),
            "attributes": stored_attributes(record.item, list(record.location), keys.config.ttl_attribute),
            "item": record.item,
        },
        "dead_letters": [
            {"queue": letters.which.value, **letter_summary(copies[0], letters.max_receive_count, copies)}
            for letters in traced.dead_letters
            for copies in letters.found
        ],
        "dead_letter_queues": [
            {
                "queue": letters.which.value,
                "url": letters.url,
                "read": letters.walked.visited,
                "not_reached": letters.walked.not_reached,
                "in_flight_elsewhere": letters.walked.in_flight_elsewhere,
                "key_unknown": letters.key_unknown,
            }
            for letters in traced.dead_letters
        ],
        "queue": _queue_document(traced.queue),
        "emitted": hops.document(traced.emitted),
    }


def _versions_document(versions: Versions | None) -> dict[str, Any]:
    """Versioned mode: the stored version, the body's, and whether the state is a tombstone (other modes:
    None, None, False)."""

    def shown(version: Any) -> dict[str, str] | None:
        return {"kind": version.kind, "text": version.text} if version is not None else None

    if versions is None:
        return {"version": None, "message_version": None, "deleted": False}
    return {
        "version": shown(versions.stored),
        "message_version": shown(versions.message),
        "deleted": versions.deleted,
    }


def _pipeline(context: Context, keys: KeyTable) -> dict[str, Any]:
    pipeline = context.target.pipeline
    return {
        "stack": pipeline.stack,
        "function": pipeline.function,
        "mode": keys.mode,
        "key_source": str(keys.config.key_source),
        "key_prefix": keys.config.key_prefix,
        "table": keys.table_name,
    }


def _queue_document(queue: InFlight) -> dict[str, Any]:
    return {
        "url": queue.url,
        "fifo": queue.fifo,
        "visible": queue.counts.visible,
        "in_flight": queue.counts.in_flight,
        "delayed": queue.counts.delayed,
        "peeked": queue.peeked,
        "read": queue.read,
        "messages": queue.found,
        "not_shown": NOT_VISIBLE if queue.counts.in_flight else None,
    }


def lines(traced: Traced, args: argparse.Namespace, *, name_function: bool = False) -> list[str]:
    """The screen of one consumer's trace (``name_function``: its ``logs`` command names the function, one
    of several)."""
    context, keys, wanted, record = traced.context, traced.keys, traced.wanted, traced.table
    pipeline = context.target.pipeline
    config = keys.config
    out = [
        f"key {record.key} ({wanted.given}) of {pipeline.title}, in {context.clients.where}",
        _row(
            "consumer",
            f"{keys.mode} mode, {config.key_source} keys"
            + (f", KEY_PREFIX {config.key_prefix!r}" if config.key_prefix else "")
            + f"; table {keys.table_name}",
        ),
    ]
    out += _table_lines(record, keys)
    out += _letters_lines(traced.dead_letters)
    out += _queue_lines(traced.queue)
    if traced.emitted:
        out.append(_row("emitted", f"{sum(len(i.messages) for i in traced.emitted)} message(s), hop by hop:"))
        out += ["  " + line for line in hops.lines(traced.emitted)]
    out.append(_row("logs", _logs_command(context, record, args, name_function=name_function)))
    return out


def several_lines(
    pipelines: list[Pipeline], looks: list[Traced | str], args: argparse.Namespace
) -> list[str]:
    """The key looked for in each consumer of a stack: where it was found, then the screen of each consumer
    that has it (of each that keys it, when none has it)."""
    traced = [look for look in looks if isinstance(look, Traced)]
    holding = [look for look in traced if look.anything]
    where = ", ".join(look.pipeline.whose for look in holding) or "none of them"
    out = [
        f"stack {pipelines[0].stack} has {len(pipelines)} consumers: {listing(pipelines)}",
        f"the key was looked for in each that can key it ({len(traced)}): found in {where}",
    ]
    for pipeline, look in zip(pipelines, looks, strict=True):
        if isinstance(look, str):
            out.append(f"  {pipeline.whose}: not looked in, it cannot key this: {look}")
        elif holding and not look.anything:
            out.append(f"  {pipeline.whose}: not there (no record, no dead letter)")
    for look in holding or traced:
        out += ["", *lines(look, args, name_function=True)]
    return out


def several_document(pipelines: list[Pipeline], looks: list[Traced | str]) -> dict[str, Any]:
    """The ``--json`` document of a key looked for in each consumer of a stack."""
    return {
        "stack": pipelines[0].stack,
        "consumers": [
            {
                "pipeline": pipeline.whose,
                "function": pipeline.function,
                "outputs": list(pipeline.outputs),
                "traced": isinstance(look, Traced),
                "found": look.anything if isinstance(look, Traced) else False,
                "not_traced": look if isinstance(look, str) else None,
            }
            for pipeline, look in zip(pipelines, looks, strict=True)
        ],
        "found_in": [look.pipeline.function for look in looks if isinstance(look, Traced) and look.anything],
        "traces": [document(look) for look in looks if isinstance(look, Traced)],
    }


def _row(label: str, text: str) -> str:
    return f"{label:<{LABEL}}{text}"


def _more(text: str) -> str:
    return " " * LABEL + text


def _table_lines(record: Record, keys: KeyTable) -> list[str]:
    location = ", ".join(f"{name} {value!r}" for name, value in record.location.items())
    out = [_row("table", f"{record.state}: {meaning(record, keys)}"), _more(f"record at {location}")]
    if record.versions is not None:
        out += [_more(line) for line in _version_lines(record)]
    if record.item:
        facts = [f"fingerprint {record.fingerprint or '- (written before fingerprints)'}"]
        if record.message_fingerprint and record.message_fingerprint != record.fingerprint:
            facts.append(f"this body's {record.message_fingerprint}")
        facts.append(f"expires {when(record.expires_at)}" if record.expires_at else "never expires (no TTL)")
        out.append(_more("; ".join(facts)))
        written = [f"message {record.message_id}"] if record.message_id else []
        written += [f"deduplication id {record.dedup_id}"] if record.dedup_id else []
        if written:
            out.append(_more(f"written for {', '.join(written)}"))
        names = stored_attributes(record.item, list(record.location), keys.config.ttl_attribute)
        if names:
            out.append(_more(f"attributes: {', '.join(names)}"))
        if has_result(record.item):
            out.append(_more("the processor's result is stored with it (--json shows the item)"))
    return out


def _version_lines(record: Record) -> list[str]:
    """Versioned mode: ``version 5 (number); this body's 3; a tombstone: the entity is deleted``."""
    versions = record.versions
    assert versions is not None
    stored, message = versions.stored, versions.message
    facts = []
    if stored is not None:
        facts.append(f"version {stored.text} ({stored.kind})")
    elif record.item:
        facts.append("no version (no versioned write made this item)")
    if message is not None:
        facts.append(
            f"this body's {message.text}"
            if stored
            else f"this body's version {message.text} ({message.kind})"
        )
    if versions.deleted:
        facts.append("a tombstone: the entity is deleted")
    return ["; ".join(facts)] if facts else []


def _letters_lines(found: list[Letters]) -> list[str]:
    out: list[str] = []
    for letters in found:
        label = "dead letters" if not out else ""
        name = QUEUE_NAMES[letters.which]
        if letters.url is None:
            out.append(
                _row(label, f"no {name}: no SNS subscription with a redrive policy delivers to the queue")
            )
            continue
        count = f"{len(letters.found)} in the {name}" if letters.found else f"none in the {name}"
        out.append(_row(label, f"{count} {letters.url} ({letters.walked.visited} read)"))
        for first, *copies in letters.found:
            out.append(_more(message_line(first, letters.max_receive_count, 1 + len(copies)).strip()))
        out += [_more(f"! {note}") for note in _unread(letters)]
    return out


def _unread(letters: Letters) -> list[str]:
    notes = []
    walked = letters.walked
    if walked.not_reached:
        notes.append(
            f"{walked.not_reached} message(s) not read: SQS hands out at most 10 messages of a FIFO group "
            "at a time, and these are behind them (a dead letter of this key may be among them; `dlq "
            "redrive` and `dlq purge` reach them as they remove the ones before)"
        )
    if walked.in_flight_elsewhere:
        notes.append(
            f"{walked.in_flight_elsewhere} message(s) held by another reader: not read (trace again when "
            "they are visible)"
        )
    if letters.key_unknown:
        notes.append(
            f"{letters.key_unknown} message(s) SQS moved whose key cannot be told: the consumer keys by the "
            "deduplication id, which SQS replaces with the message id in a FIFO dead-letter queue"
        )
    return notes


def _queue_lines(queue: InFlight) -> list[str]:
    if queue.url is None:
        return [_row("in flight", "the pipeline's source queue is unknown")]
    counts = f"{queue.counts.visible} visible, {queue.counts.in_flight} in flight" + (
        f", {queue.counts.delayed} delayed (not readable yet)" if queue.counts.delayed else ""
    )
    out = [_row("in flight", f"queue {queue.url} ({'FIFO' if queue.fifo else 'standard'}): {counts}")]
    if queue.counts.in_flight:
        out.append(_more(f"! {NOT_VISIBLE}"))
    if queue.peeked and queue.counts.visible:
        out.append(
            _more(
                f"peeked at {queue.read} of {queue.counts.visible} visible message(s): "
                f"{len(queue.found)} with this key"
            )
        )
        for message in queue.found:
            out.append(
                _more(
                    f"  {message['message_id']}  {message['group'] or '-'}  {message['sent'] or '?'}  "
                    f"receive count {message['receive_count']} (this read included)"
                )
            )
        if queue.read < queue.counts.visible:
            out.append(
                _more(
                    "! SQS hands out at most 10 messages a receive and, at visibility 0, the same ones again"
                    + (" (in a FIFO queue the first of each group)" if queue.fifo else "")
                    + f": the other {queue.counts.visible - queue.read} were not seen"
                )
            )
    elif queue.counts.visible:
        limit = f" (maxReceiveCount {queue.max_receive_count})" if queue.max_receive_count else ""
        out.append(
            _more(
                f"the visible messages were not read: --peek reads them, and each read counts as a receive"
                f"{limit}: the runtime quarantines a failing message on its last receive"
            )
        )
    return out


def _logs_command(context: Context, record: Record, args: argparse.Namespace, *, name_function: bool) -> str:
    from idempotent_cli.local import invoked_as

    words = [invoked_as(), "logs"]
    pipeline = context.target.pipeline
    if pipeline.stack:
        words += ["--stack", pipeline.stack]
    function = args.function or (pipeline.whose if name_function else None)
    if function:
        words += ["--function", function]
    if args.local:
        words.append("--local")
    if args.app_dir:
        words += ["--app-dir", args.app_dir]
    words += ["--key", str(record.key)]
    return " ".join(shlex.quote(word) for word in words)
