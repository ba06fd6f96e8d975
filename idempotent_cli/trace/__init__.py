"""idempotent-pipeline trace KEY: where is my message?

One screen (or --json) on one idempotency key of a deployed pipeline:

  table          the key's record, read as the consumer reads it: absent, stored / completed, in progress
                 (owner and lease expiry), a conflict (with --body), expired; its fingerprint and expiry
  dead letters   every dead letter of the key in the queue's DLQ and in the SNS subscription's DLQ, with
                 its reason (read without removing or reordering anything)
  in flight      the source queue's counts, and with --peek the visible messages that carry the key

The key is given as the consumer keys messages (its function's environment says how: KEY_SOURCE,
PARTITION_KEY_FIELD, SORT_KEY_FIELD, KEY_PREFIX, the mode's record location):

  trace o-1 1                  the values of the two key fields (KEY_SOURCE=fields)
  trace --message-id ID        KEY_SOURCE=message_id      trace --dedup-id ID   KEY_SOURCE=dedup_id
  trace --body '{...}'         a message body, keyed as the consumer keys it and compared with the stored
                               record (with KEY_SOURCE=message_id or dedup_id, give the id too)

The pipeline is found as the DLQ tool finds it (--stack, or the only one deployed; --function NAME: one
consumer, by its construct id or path, function name or an output naming it); on a stack of several, the
key is looked for in each consumer that can key it. --local for the app's emulator, default AWS credentials
otherwise. See docs/operations.md, "Where is my message?".
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from idempotent_cli import command
from idempotent_cli.dlq import add_hold_arguments

__all__ = ["register", "run"]

# How long the trace holds each dead letter it reads; every one is made visible again when it ends.
DEFAULT_VISIBILITY_SECONDS = 30


def register(subparsers: Any) -> argparse.ArgumentParser:
    help = "where is my message: a key's record, its dead letters, what is in flight"
    trace = command.add_command(subparsers, "trace", help, __doc__)
    trace.add_argument(
        "parts",
        nargs="*",
        metavar="KEY",
        help="the key: the values of the consumer's two key fields (KEY_SOURCE=fields), or the message id / "
        "deduplication id its KEY_SOURCE keys by",
    )
    key = trace.add_argument_group("the key, by name")
    key.add_argument(
        "--partition", metavar="VALUE", help="the partition key field's value (KEY_SOURCE=fields)"
    )
    key.add_argument("--sort", metavar="VALUE", help="the sort key field's value (KEY_SOURCE=fields)")
    key.add_argument("--message-id", metavar="ID", help="the message's SQS id (KEY_SOURCE=message_id)")
    key.add_argument("--dedup-id", metavar="ID", help="its deduplication id (KEY_SOURCE=dedup_id)")
    key.add_argument(
        "--body",
        metavar="JSON",
        help="a message body: keyed as the consumer keys it, and compared with the stored record (conflict)",
    )
    where = trace.add_argument_group("which pipeline")
    command.add_pipeline_arguments(where)
    command.add_cloud_arguments(trace.add_argument_group("which cloud"))
    trace.add_argument(
        "--peek",
        action="store_true",
        help="read the source queue's visible messages for the key (each read counts as a receive)",
    )
    add_hold_arguments(trace, DEFAULT_VISIBILITY_SECONDS, "the trace holds each dead letter it reads")
    trace.add_argument(
        "--next-stack",
        action="append",
        default=[],
        metavar="NAME",
        help="a stack whose consumers read what the key emitted (repeatable; the key's own stack is always "
        "looked at): each emitted message is followed there, hop by hop",
    )
    trace.add_argument("--json", action="store_true", help="print JSON")
    trace.set_defaults(func=run)
    return trace


def run(args: argparse.Namespace, *, console: Any = None, connect: Any = None) -> int:
    """Run ``trace``; returns the exit code: 0 when the key was traced (whatever its state), 1 on an error."""
    interrupted = "interrupted: every message the trace held is visible again"
    return command.run(_trace, args, console, connect, interrupted=interrupted)


def _trace(args: argparse.Namespace, console: Any, connect: Any) -> int:
    from idempotent_cli import stack
    from idempotent_cli.errors import DlqError
    from idempotent_cli.trace import screen

    if not 1 <= args.visibility_timeout <= 43200:
        raise DlqError(f"--visibility-timeout must be 1 to 43200 seconds, got {args.visibility_timeout}")
    clients = connect(args)
    pipelines = stack.find(clients, stack=args.stack, function=args.function).pipelines()
    looks = [_look(args, clients, console, pipeline, alone=len(pipelines) == 1) for pipeline in pipelines]
    traced = [found for found in looks if isinstance(found, screen.Traced)]
    if not traced:
        raise DlqError(
            f"none of the {len(pipelines)} consumers of stack {pipelines[0].stack} can key "
            f"{_given(args)}: "
            + "; ".join(f"{pipeline.whose}: {why}" for pipeline, why in zip(pipelines, looks, strict=True))
        )
    alone = len(pipelines) == 1
    if args.json:
        shown = screen.document(traced[0]) if alone else screen.several_document(pipelines, looks)
        console.print(json.dumps(shown, indent=2))
        return 0
    for line in screen.lines(traced[0], args) if alone else screen.several_lines(pipelines, looks, args):
        console.print(line)
    return 0


def _look(args: argparse.Namespace, clients: Any, console: Any, pipeline: Any, *, alone: bool) -> Any:
    """The trace of the key in one consumer; with several consumers, why this one cannot key it (text)
    instead of an error."""
    from idempotent_cli.dlq.commands import Context
    from idempotent_cli.errors import DlqError
    from idempotent_cli.trace import hops, look, screen, wanted

    try:
        options = (args.visibility_timeout, args.wait_seconds)
        context, keys = Context.of_consumer(clients, pipeline, console, *options)
        given = wanted.from_args(args, keys.config)
        record = look.table(keys, given)
    except DlqError as exc:
        if alone:
            raise
        return str(exc)
    return screen.Traced(
        context,
        keys,
        given,
        table=record,
        dead_letters=look.dead_letters(context, keys, record.key),
        queue=look.in_flight(context, keys, record.key, peek=args.peek),
        emitted=hops.Follower(context, args.next_stack).follow(keys, record.item, (pipeline.label,))
        if record.item and keys.config.emit_target_arn
        else [],
    )


def _given(args: argparse.Namespace) -> str:
    """What the command line gave as the key, in words."""
    from idempotent_cli.trace.wanted import options

    named = [f"{option} {value!r}" for option, value in options(args).items() if value is not None]
    shown = [repr(part) for part in args.parts or []] + named + (["--body"] if args.body is not None else [])
    return " ".join(shown) or "nothing"
