"""idempotent-pipeline dlq: the day the dead-letter queue fills.

  list      counts by message group and by reason, oldest first
  show ID   one message: attributes, reason, details, what a redrive would send
  redrive   back to the source queue, in order within each group, with the idempotency key
  purge     delete (all, or what the filters choose), after confirmation

The queues come from a stack (--stack; may be left out when one stack holds pipelines) or from --queue-url.
On a stack of several pipelines, list and show cover every dead-letter queue (each consumer's, each outbox
relay's), saying whose; redrive and purge refuse and name them: --function NAME chooses one (its construct
id or path, its function name, a stack output naming it). --which subscription works on the SNS
subscription's DLQ instead. Without --local the tool uses the default AWS credentials and region; with
--local, the emulator of the app directory. See docs/operations.md.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from idempotent_cli import command
from idempotent_cli.dlq.letters import KINDS, Filters, Which
from idempotent_cli.dlq.queue import DEFAULT_VISIBILITY_SECONDS, DEFAULT_WAIT_SECONDS
from idempotent_cli.errors import DlqError

__all__ = ["DlqError", "add_hold_arguments", "main", "parser", "register", "run"]

# What `--function RELAY` does on an outbox relay's dead-letter queue (idempotent_cli.dlq.relayed); purge
# takes the queue's URL (--queue-url), as for any queue.
RELAY_HANDLERS = ("list", "show", "redrive")
# The filters of list, redrive and purge (Filters' fields, in order).
FILTERS = ("group", "reason", "reason_text")
# The consumer DLQ's options that mean nothing there (its entries are batches and emitted messages, not a
# consumer's messages with a key): refused, never ignored.
NOT_ON_RELAY = (*FILTERS, "messages", "rate")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dlq`` and its commands to an ``add_subparsers()`` object (the CLI's command list)."""
    help = "list, show, redrive or purge a pipeline's dead-letter queue"
    dlq = command.add_command(subparsers, "dlq", help, __doc__)
    dlq.set_defaults(func=run)
    commands = dlq.add_subparsers(dest="dlq_command", required=True, metavar="{list,show,redrive,purge}")
    common, filters = _common_options(), _filter_options()

    listing = commands.add_parser("list", parents=[common, filters], help="counts by group and by reason")
    _flags(listing, messages="also one line per message", json="print JSON")
    show = commands.add_parser("show", parents=[common], help="one message in full")
    show.add_argument(
        "message_id",
        metavar="ID",
        help="any id the message has had: in the DLQ, the original's, or a redriven copy's (the id the "
        "consumer logged)",
    )
    _flags(show, json="print JSON")
    redrive = commands.add_parser(
        "redrive", parents=[common, filters], help="back to the source queue, in order, with the key"
    )
    _flags(
        redrive,
        dry_run="show what the table says about each key; change nothing",
        force="process again messages whose key is done (deletes their idempotency record first), and "
        "redrive those whose key cannot be restored under a new key; on an outbox relay's DLQ, delete a "
        "batch entry once what the table holds of it is published, though it cannot show that it holds all",
        yes="do not ask for confirmation (--force)",
    )
    redrive.add_argument("--rate", type=float, metavar="N", help="at most N messages a second")
    redrive.add_argument("--limit", type=int, metavar="N", help="send at most N messages to the source queue")
    purge = commands.add_parser(
        "purge", parents=[common, filters], help="delete messages, after confirmation"
    )
    _flags(
        purge,
        yes="do not ask for confirmation",
        dry_run="list the dead letters purge would delete; delete nothing",
    )
    return dlq


def _flags(parser: argparse.ArgumentParser, **flags: str) -> None:
    """On/off options: ``dry_run="..."`` is ``--dry-run``, with its help."""
    for name, text in flags.items():
        parser.add_argument(f"--{name.replace('_', '-')}", action="store_true", help=text)


def _common_options() -> argparse.ArgumentParser:
    """Which queue and which cloud: the options of every command."""
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("which queue")
    command.add_pipeline_arguments(where)
    where.add_argument("--queue-url", help="the dead-letter queue's URL, instead of finding it from a stack")
    where.add_argument("--source-queue-url", help="where a redrive sends messages (default: found)")
    where.add_argument(
        "--which",
        choices=[w.value for w in Which],
        default=Which.DLQ.value,
        help="dlq: the queue's DLQ (default); subscription: the SNS subscription's DLQ",
    )
    cloud = common.add_argument_group("which cloud")
    command.add_cloud_arguments(cloud)
    add_hold_arguments(cloud, DEFAULT_VISIBILITY_SECONDS, "the tool holds the messages it reads")
    return common


def add_hold_arguments(parser: Any, default: int, holds: str) -> None:
    """``--visibility-timeout``: how long a command that reads queues ``holds``; and ``--wait-seconds``."""
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        default=default,
        metavar="SECONDS",
        help=f"how long {holds} (default: {default})",
    )
    # Long polling makes an empty answer mean "empty" on every SQS server; tests against an emulator that
    # answers at once use 0.
    parser.add_argument("--wait-seconds", type=int, default=DEFAULT_WAIT_SECONDS, help=argparse.SUPPRESS)


def _filter_options() -> argparse.ArgumentParser:
    """Which dead letters: the filters of list, redrive and purge."""
    filters = argparse.ArgumentParser(add_help=False)
    chosen = filters.add_argument_group("filters")
    chosen.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="GROUP",
        help="only this message group (a shell pattern such as 'order-1*'; repeatable)",
    )
    chosen.add_argument(
        "--reason",
        action="append",
        default=[],
        metavar="KIND",
        help=f"only this kind ({', '.join(KINDS)}), exactly; a value that is not a kind matches reasons "
        "containing it, as --reason-text does (repeatable)",
    )
    chosen.add_argument(
        "--reason-text",
        action="append",
        default=[],
        metavar="TEXT",
        help="only reasons whose text contains this, whatever their kind (case-insensitive; repeatable)",
    )
    return filters


def parser() -> argparse.ArgumentParser:
    """A parser with ``dlq`` as its only command (``python -m idempotent_cli.dlq``)."""
    root = argparse.ArgumentParser(prog="idempotent-pipeline")
    register(root.add_subparsers(dest="command", required=True))
    return root


def run(args: argparse.Namespace, *, console: Any = None, connect: command.Connect | None = None) -> int:
    """Run the parsed ``dlq`` command; returns the exit code (errors are printed, never raised)."""
    interrupted = "interrupted: every message the command held is visible in the DLQ again"
    return command.run(_run, args, console, connect, interrupted=interrupted)


def _run(args: argparse.Namespace, console: Any, connect: command.Connect) -> int:
    from idempotent_cli import stack
    from idempotent_cli.dlq.target import target_of

    if args.visibility_timeout < 1 or args.visibility_timeout > 43200:
        raise DlqError(f"--visibility-timeout must be 1 to 43200 seconds, got {args.visibility_timeout}")
    limit = getattr(args, "limit", None)
    if limit is not None and limit < 1:
        raise DlqError(f"--limit must be at least 1, got {limit}")
    clients = connect(args)
    which, handler = Which(args.which), args.dlq_command
    if args.queue_url:
        function = args.function
        if args.stack and function:  # any name the stack gives the function
            function = stack.find(clients, stack=args.stack, function=function).pipeline().function
        subscription = which is Which.SUBSCRIPTION
        queues = stack.of_queues(
            clients, args.queue_url, args.source_queue_url, function, subscription=subscription
        )
        return _command(args, clients, console, target_of(clients, queues, which))
    found = stack.find(clients, stack=args.stack, function=args.function)
    if isinstance(found.named, stack.Relay) and handler in RELAY_HANDLERS:
        given = [f"--{name.replace('_', '-')}" for name in NOT_ON_RELAY if getattr(args, name, None)]
        if given:
            raise DlqError(
                f"{', '.join(given)}: not an option on an outbox relay's dead-letter queue "
                f"({found.named.function}): its entries are batches and emitted messages, redriven whole "
                "(redrive takes --dry-run, --limit and --force, list and show --json)"
            )
        return _relay_command(args, clients, console, found.named)
    # The filters choose among a consumer's dead letters: a relay's entries have no group or kind of reason.
    filtered = any(getattr(args, name, None) for name in FILTERS)
    relays = [r for r in found.stack.relays if r.dead_letter_queue_url and which is Which.DLQ]
    if relays and filtered and found.named is None and handler == "list":
        console.note(
            f"not listed: the dead-letter queues of {stack.listing(relays)} (the filters are a consumer's)"
        )
    every = [*found.stack.pipelines, *([] if filtered else relays)]
    if found.named is None and handler in ("list", "show") and len(every) > 1:
        return _every(args, clients, console, found.stack.name, every)
    pipeline = found.pipeline()
    if args.source_queue_url:
        pipeline = replace(pipeline, queue_url=args.source_queue_url)
    return _command(args, clients, console, target_of(clients, pipeline, which))


def _command(args: argparse.Namespace, clients: Any, console: Any, target: Any) -> int:
    """The command on one consumer's DLQ."""
    from idempotent_cli.dlq import commands

    context = commands.Context(target, clients, console, args.visibility_timeout, args.wait_seconds)
    filters = Filters(*(tuple(getattr(args, name, None) or ()) for name in FILTERS))
    if args.dlq_command == "list":
        return commands.cmd_list(context, filters=filters, messages=args.messages, as_json=args.json)
    if args.dlq_command == "show":
        return commands.cmd_show(context, message_id=args.message_id, as_json=args.json)
    if args.dlq_command == "redrive":
        return commands.cmd_redrive(
            context,
            filters=filters,
            dry_run=args.dry_run,
            force=args.force,
            yes=args.yes,
            rate=args.rate,
            limit=args.limit,
        )
    return commands.cmd_purge(context, filters=filters, yes=args.yes, dry_run=args.dry_run)


def _relay_command(args: argparse.Namespace, clients: Any, console: Any, relay: Any) -> int:
    """The command on an outbox relay's DLQ."""
    from idempotent_cli.dlq import relayed

    context = relayed.RelayContext(clients, console, relay, args.visibility_timeout, args.wait_seconds)
    if args.dlq_command == "list":
        return relayed.cmd_list(context, as_json=args.json)
    if args.dlq_command == "show":
        return relayed.cmd_show(context, message_id=args.message_id, as_json=args.json)
    return relayed.cmd_redrive(
        context, dry_run=args.dry_run, limit=args.limit, force=args.force, yes=args.yes
    )


def _every(args: argparse.Namespace, clients: Any, console: Any, name: str, every: list[Any]) -> int:
    """``list`` and ``show ID`` without --function on a stack of several pipelines (or a pipeline and its
    relay): every consumer's dead-letter queue (the one --which names) and every relay's, each said whose."""
    from idempotent_cli import stack
    from idempotent_cli.dlq.target import target_of

    # (function, what the command works on, how it runs, its queue's URL)
    found: list[tuple[Any, Any, Callable[..., int], str | None]] = []
    lacking: list[tuple[Any, str]] = []  # (function, why it has no such queue: --which subscription)
    for function in every:
        if isinstance(function, stack.Relay):
            found.append((function, function, _relay_command, function.dead_letter_queue_url))
            continue
        try:
            on = target_of(clients, function, Which(args.which))
        except DlqError as exc:
            lacking.append((function, str(exc)))
            continue
        found.append((function, on, _command, on.dlq_url))
    if not found:
        raise DlqError(f"no pipeline of stack {name} has that queue: " + "; ".join(why for _, why in lacking))
    said = f"stack {name} has {len(found)} dead-letter queues: {stack.listing([f for f, *_ in found])}"
    if args.dlq_command == "list":
        console.note(f"{said}; each is listed under whose it is (--function NAME lists one)")
    documents = [{"pipeline": f.whose, "kind": f.kind, "error": why} for f, why in lacking]
    if args.dlq_command == "list" and not args.json:
        for _, why in lacking:
            console.print(why)
    looked: list[str] = []
    code = 0
    for function, on, run, url in found:
        looked.append(f"{function.whose} ({url})")
        if args.dlq_command == "show":
            try:
                shown = run(args, clients, console, on)
            except DlqError:  # not in this one
                continue
            console.note(f"{said}; {args.message_id} is in the dead-letter queue of {function.whose}")
            return shown
        if args.json:
            out = io.StringIO()
            code = max(code, run(args, clients, replace(console, out=out), on))
            documents.append({"pipeline": function.whose, "kind": function.kind, **_listed(function, out)})
            continue
        spaced = len(looked) + len(lacking) > 1
        console.print(("\n" if spaced else "") + f"{function.kind} {function.describe()}:")
        code = max(code, run(args, clients, console, on))
    if args.dlq_command == "show":
        raise DlqError(
            f"no message {args.message_id} (its id in the DLQ, the original's, or a redriven copy's) in the "
            f"dead-letter queue of any pipeline of stack {name}: {'; '.join(looked) or 'none has one'}; "
            "`dlq list --messages` shows their ids"
        )
    if args.json:
        console.print(json.dumps({"stack": name, "dead_letter_queues": documents}, indent=2))
    return code


def _listed(function: Any, out: io.StringIO) -> dict[str, Any]:
    """A DLQ's ``list --json``, each message (or relay entry) saying whose it is."""
    listed = json.loads(out.getvalue())
    if isinstance(listed, list):  # a relay's entries
        listed = {"function": function.function, "queue": function.dead_letter_queue_url, "entries": listed}
    for entry in listed.get("entries") or listed.get("message_list") or []:
        entry["pipeline"] = function.whose
    return {"function": function.function, **listed}


def main(
    argv: Sequence[str] | None = None, *, console: Any = None, connect: command.Connect | None = None
) -> int:
    args = parser().parse_args(["dlq", *(sys.argv[1:] if argv is None else argv)])
    return run(args, console=console, connect=connect)
