"""idempotent-pipeline send [FILE|-]: publish JSON lines to a deployed pipeline, through the publisher helper.

One JSON object per line (blank lines are skipped), sent exactly as written. The pipeline is found as the
DLQ tool finds it (--stack, or the only one deployed; on a stack of several, --function NAME: its construct
id or path, its function name or an output naming it; --local for the app's emulator); its consumer
function's environment says how messages are keyed and fingerprinted (KEY_SOURCE, PARTITION_KEY_FIELD,
SORT_KEY_FIELD, FINGERPRINT_FIELDS / FINGERPRINT_EXCLUDE, KEY_PREFIX), so every line is read as the
consumer will read it before anything is sent. Messages go to the topic subscribed to the pipeline's queue
(or --topic-arn), or, without one, to the queue itself.

FIFO: each message group keeps its order (the group: --group-id, --group-field, or by default the
consumer's partition key field) and a failure stops its group; deduplication ids come from the key and
the content fingerprint, so sending the same input again is safe.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, TextIO

from idempotent_cli import command
from idempotent_cli.command import add_cloud_arguments, add_command, add_pipeline_arguments
from idempotent_cli.errors import DlqError

DEFAULT_PROGRESS_SECONDS = 2.0
SHOWN_GROUPS = 10  # groups with unpublished messages listed in the summary (--json lists all)


def register(subparsers: Any) -> argparse.ArgumentParser:
    help = "publish JSON lines (a file or stdin) to a pipeline, each message group in order"
    send = add_command(subparsers, "send", help, __doc__)
    send.add_argument("file", nargs="?", metavar="FILE", help="JSON lines to send; - or nothing: stdin")
    where = send.add_argument_group("where to")
    add_pipeline_arguments(where)
    where.add_argument("--topic-arn", help="publish to this topic (default: the one subscribed to the queue)")
    group = send.add_argument_group("message groups (FIFO)").add_mutually_exclusive_group()
    group.add_argument("--group-field", metavar="PATH", help="each message's group: this body field")
    group.add_argument("--group-id", metavar="ID", help="one group for every message")
    send.add_argument(
        "--key-fields",
        metavar="PATH,PATH",
        help="only for a consumer with KEY_SOURCE=dedup_id: the body fields whose values make each "
        "message's deduplication id (its key)",
    )
    add_cloud_arguments(send.add_argument_group("which cloud"))
    send.add_argument("--json", action="store_true", help="print the summary as JSON")
    send.add_argument(
        "--progress-seconds", type=float, default=DEFAULT_PROGRESS_SECONDS, help=argparse.SUPPRESS
    )
    send.set_defaults(func=run)
    return send


@dataclass(frozen=True)
class Lines:
    """The input: each message's text and line number."""

    name: str
    texts: list[str]
    numbers: list[int]


@dataclass(frozen=True)
class Destination:
    client: Any
    address: str  # a topic ARN or a queue URL
    kind: str  # "topic" or "queue"
    fifo: bool


def run(
    args: argparse.Namespace,
    *,
    stdin: IO[str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    connect: command.Connect | None = None,
) -> int:
    """Run ``send``; returns the exit code: 0 when every message was published (errors are printed).
    ``connect(args)`` returns the clients (default: the DLQ tool's, for --local or the credential chain)."""
    from idempotent_cli.console import Console

    console = Console(out=out or sys.stdout, err=err or sys.stderr, clock=clock)
    return command.run(functools.partial(_send, stdin=stdin or sys.stdin), args, console, connect)


def _send(args: argparse.Namespace, console: Any, connect: command.Connect, *, stdin: IO[str]) -> int:
    from idempotent_runtime.publisher import MessageRejected, publish

    from idempotent_cli.stack import find

    lines = _read(args.file, stdin)
    clients = connect(args)
    pipeline = find(clients, stack=args.stack, function=args.function).pipeline()
    keys = _keys(pipeline, args.key_fields)
    destination = _destination(clients, pipeline.queue_url, args.topic_arn)
    group_id = _groups(args, keys, destination)
    console.note(
        f"sending {_count(len(lines.texts), 'message')} from {lines.name} to the {destination.kind} "
        f"{destination.address} ({'FIFO' if destination.fifo else 'standard'}; keys as the consumer "
        f"{pipeline.function} reads them: {_describe(keys)})"
    )
    progress = _Progress(len(lines.texts), console, args.progress_seconds)
    try:
        result = publish(
            destination.client,
            destination.address,
            lines.texts,
            keys=keys,
            group_id=group_id,
            fifo=destination.fifo,
            progress=progress,
        )
    except KeyboardInterrupt:
        console.note(
            f"\ninterrupted: {progress.published} of {len(lines.texts)} published before the last request, "
            f"which may or may not have been. {_again(keys, destination.fifo)}"
        )
        return 130
    except MessageRejected as exc:
        raise DlqError(
            f"{lines.name}, line {lines.numbers[exc.index]}: {exc.reason}; nothing was sent"
        ) from None
    summary = _summary(result, lines, destination, keys, console.clock() - progress.started)
    console.print(json.dumps(summary, indent=2) if args.json else "\n".join(_render(summary, keys)))
    return 0 if result.ok else 1


def _read(name: str | None, stdin: IO[str]) -> Lines:
    if name in (None, "-"):
        if name is None and stdin.isatty():
            raise DlqError(
                "give a FILE of JSON lines, or pipe them to stdin (`... | idempotent-pipeline send`)"
            )
        stream, shown = stdin, "stdin"
    else:
        try:
            stream, shown = open(name, encoding="utf-8"), name  # noqa: SIM115 - closed below
        except OSError as exc:
            raise DlqError(f"cannot read {name}: {exc.strerror}") from None
    texts, numbers = [], []
    try:
        for number, line in enumerate(stream, 1):
            text = line.strip()
            if text:
                texts.append(text)
                numbers.append(number)
    except UnicodeDecodeError as exc:
        raise DlqError(f"{shown} is not UTF-8 text: {exc.reason} after line {len(numbers)}") from None
    finally:
        if stream is not stdin:
            stream.close()
    return Lines(shown, texts, numbers)


def _keys(pipeline: Any, key_fields: str | None) -> Any:
    from idempotent_runtime.publisher import ConsumerKeys

    if not pipeline.environment:
        raise DlqError(
            f"cannot read the consumer's key settings: pipeline {pipeline.label} has no readable function "
            "environment"
        )
    fields = [field.strip() for field in key_fields.split(",")] if key_fields else None
    try:
        return ConsumerKeys.from_environment(pipeline.environment, key_fields=fields)
    except ValueError as exc:  # ConfigurationError too
        hint = " (--key-fields PATH,...)" if "dedup_id needs key_fields" in str(exc) else ""
        raise DlqError(f"the consumer {pipeline.function}: {exc}{hint}") from None


def _destination(clients: Any, queue_url: str | None, topic_arn: str | None) -> Destination:
    """The topic given, else the one subscribed to the pipeline's queue, else the queue itself."""
    from idempotent_cli.stack import subscriptions

    if topic_arn:
        return Destination(clients("sns"), topic_arn, "topic", topic_arn.endswith(".fifo"))
    if not queue_url:
        raise DlqError("the pipeline's queue is unknown: pass --topic-arn")
    sns = clients("sns")
    topics = sorted({subscription["TopicArn"] for subscription in subscriptions(clients, queue_url)})
    if len(topics) > 1:
        raise DlqError(
            f"{len(topics)} topics deliver to {queue_url} ({', '.join(topics)}): choose one with --topic-arn"
        )
    if topics:
        return Destination(sns, topics[0], "topic", topics[0].endswith(".fifo"))
    return Destination(clients("sqs"), queue_url, "queue", queue_url.endswith(".fifo"))


def _groups(args: argparse.Namespace, keys: Any, destination: Destination) -> Any:
    """Each message's group: --group-id, --group-field, else (FIFO) the consumer's partition key field."""
    from idempotent_runtime.contract import FIELD_KEY_SOURCES, ConfigurationError, field_path
    from idempotent_runtime.keys import field_key
    from idempotent_runtime.message import join_key

    if args.group_id is not None:
        return args.group_id
    path = args.group_field
    if path is None and destination.fifo:
        if keys.key_source not in FIELD_KEY_SOURCES:
            raise DlqError(
                f"the consumer keys by {keys.key_source}, so no body field names a message's group: pass "
                "--group-field PATH (messages with the same value stay in order) or --group-id ID"
            )
        path = keys.key_fields[0]
    if path is None:
        return None
    try:
        field_path(path)
    except ConfigurationError as exc:
        raise DlqError(f"--group-field: {exc}") from None
    # The field's value as the consumer reads a key (canonical numbers); one SNS would refuse as a group id
    # (over 128 characters, not printable ASCII) becomes its SHA-256.
    return lambda data: join_key((field_key(data, path, "group"),))


def _describe(keys: Any) -> str:
    from idempotent_runtime.contract import FIELD_KEY_SOURCES, KeySource

    if keys.key_source in FIELD_KEY_SOURCES:  # "fields a, b" or "field a"
        return f"field{'s' * (len(keys.key_fields) > 1)} {', '.join(keys.key_fields)}"
    if keys.key_source is KeySource.DEDUP_ID:
        return f"dedup_id from {', '.join(keys.key_fields)}"
    return str(keys.key_source)


class _Progress:
    """A line on stderr every ``every`` seconds while messages are sent."""

    def __init__(self, total: int, console: Any, every: float) -> None:
        self.total, self.console, self.every = total, console, every
        self.started = self.shown = console.clock()
        self.published = 0

    def __call__(self, result: Any) -> None:
        from idempotent_runtime.publisher import Status

        self.published = result.counts[Status.PUBLISHED]
        now = self.console.clock()
        if now - self.shown < self.every:
            return
        self.shown = now
        published, failed = result.counts[Status.PUBLISHED], result.counts[Status.FAILED]
        self.console.note(
            f"    {published + failed}/{self.total} sent: {published} published, {failed} failed "
            f"({now - self.started:.0f} s)"
        )


def _summary(
    result: Any, lines: Lines, destination: Destination, keys: Any, seconds: float
) -> dict[str, Any]:
    from idempotent_runtime.publisher import Status

    groups: dict[str | None, dict[str, Any]] = {}
    for index, status in enumerate(result.statuses):
        group = groups.setdefault(
            result.group_ids[index], {"group_id": result.group_ids[index], **{s.value: 0 for s in Status}}
        )
        group[status.value] += 1
    failures = {failure.index: failure for failure in result.failed}
    unpublished = []
    for index in result.unpublished:
        entry: dict[str, Any] = {
            "line": lines.numbers[index],
            "group_id": result.group_ids[index],
            "status": result.statuses[index].value,
        }
        failure = failures.get(index)
        if failure is not None:
            entry.update(code=failure.code, message=failure.message, sender_fault=failure.sender_fault)
        unpublished.append(entry)
    return {
        "input": lines.name,
        "destination": destination.address,
        "fifo": destination.fifo,
        "key_source": str(keys.key_source),
        "messages": len(result.statuses),
        **{status.value: result.counts[status] for status in Status},
        "seconds": round(seconds, 3),
        "groups": list(groups.values()),
        "unpublished": unpublished,
    }


def _render(summary: dict[str, Any], keys: Any) -> list[str]:
    grouped = [g for g in summary["groups"] if g["group_id"] is not None]
    shown = f" in {_count(len(grouped), 'group')}" if grouped else ""
    counts = f"{summary['published']} published"
    if summary["failed"] or summary["not_attempted"]:
        counts += f", {summary['failed']} failed, {summary['not_attempted']} not attempted"
    rendered = [f"{_count(summary['messages'], 'message')}{shown}: {counts} ({summary['seconds']:.1f} s)"]
    if not summary["unpublished"]:
        return rendered
    troubled = [g for g in summary["groups"] if g["failed"] or g["not_attempted"]]
    for group in troubled[:SHOWN_GROUPS]:
        name = f"group {group['group_id']}" if group["group_id"] is not None else "no group"
        rendered.append(
            f"    {name}: {group['published']} published, {group['failed']} failed, "
            f"{group['not_attempted']} not attempted"
        )
        entries = [e for e in summary["unpublished"] if e["group_id"] == group["group_id"]]
        for entry in entries:
            if entry["status"] == "failed":
                fault = "sender" if entry["sender_fault"] else "service"
                error = f"{entry['code']} ({fault} fault): {entry['message']}"
                rendered.append(f"        line {entry['line']}: failed: {error}")
        waiting = [str(e["line"]) for e in entries if e["status"] == "not_attempted"]
        if waiting:
            rendered.append(f"        not attempted: line{'s' if len(waiting) > 1 else ''} {_lines(waiting)}")
    if len(troubled) > SHOWN_GROUPS:
        rendered.append(f"    ... and {len(troubled) - SHOWN_GROUPS} more groups (--json lists them all)")
    rendered.append(_again(keys, summary["fifo"]))
    return rendered


def _again(keys: Any, fifo: bool) -> str:
    """Whether sending the same input again is safe, for this consumer."""
    from idempotent_runtime.contract import KeySource

    if keys.key_source is KeySource.MESSAGE_ID:
        return (
            "Send only the lines not published: with KEY_SOURCE=message_id every delivery is a new key, so a "
            "message sent twice (after FIFO deduplication's 5 minutes) is processed twice."
        )
    if fifo:
        return (
            "Sending the same input again is safe and keeps each group's order: what was published is "
            "dropped as a duplicate (by FIFO deduplication within 5 minutes, by the consumer's key after it)."
        )
    return "Sending the same input again is safe: what was published is absorbed by the consumer's key."


def _lines(numbers: list[str], limit: int = 20) -> str:
    shown = ", ".join(numbers[:limit])
    return shown + (f", ... ({len(numbers)} in all)" if len(numbers) > limit else "")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
