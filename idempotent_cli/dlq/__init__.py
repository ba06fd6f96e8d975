"""idempotent-pipeline dlq: the day the dead-letter queue fills.

  list      counts by message group and by reason, oldest first
  show ID   one message: attributes, reason, details, what a redrive would send
  redrive   back to the source queue, in order within each group, with the idempotency key
  purge     delete (all, or what the filters choose), after confirmation

The queues come from a stack (--stack; may be left out when exactly one pipeline is deployed) or from
--queue-url. --which subscription works on the SNS subscription's DLQ instead. Without --local the tool uses
the default AWS credentials and region; with --local, the emulator of the app directory. See
docs/operations.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from idempotent_cli.dlq.errors import DlqError
from idempotent_cli.dlq.letters import KINDS, Filters, Which
from idempotent_cli.dlq.queue import DEFAULT_VISIBILITY_SECONDS, DEFAULT_WAIT_SECONDS

__all__ = [
    "DlqError",
    "add_cloud_arguments",
    "add_pipeline_arguments",
    "clients_for",
    "main",
    "parser",
    "register",
    "reporting_errors",
    "run",
]

Connect = Callable[[argparse.Namespace], Any]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dlq`` and its commands to an ``add_subparsers()`` object (the CLI's command list)."""
    dlq = subparsers.add_parser(
        "dlq",
        help="list, show, redrive or purge a pipeline's dead-letter queue",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dlq.set_defaults(func=run)
    commands = dlq.add_subparsers(dest="dlq_command", required=True, metavar="{list,show,redrive,purge}")

    common, filters = _common_options(), _filter_options()

    listing = commands.add_parser("list", parents=[common, filters], help="counts by group and by reason")
    listing.add_argument("--messages", action="store_true", help="also one line per message")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(dlq_handler="list")

    show = commands.add_parser("show", parents=[common], help="one message in full")
    show.add_argument(
        "message_id",
        metavar="ID",
        help="any id the message has had: in the DLQ, the original's, or a redriven copy's (the id the "
        "consumer logged)",
    )
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(dlq_handler="show")

    redrive = commands.add_parser(
        "redrive", parents=[common, filters], help="back to the source queue, in order, with the key"
    )
    redrive.add_argument(
        "--dry-run", action="store_true", help="show what the table says about each key; change nothing"
    )
    redrive.add_argument(
        "--force",
        action="store_true",
        help="process again messages whose key is done (deletes their idempotency record first), and "
        "redrive those whose key cannot be restored under a new key",
    )
    redrive.add_argument("--yes", action="store_true", help="do not ask for confirmation (--force)")
    redrive.add_argument("--rate", type=float, metavar="N", help="at most N messages a second")
    redrive.add_argument("--limit", type=int, metavar="N", help="send at most N messages to the source queue")
    redrive.set_defaults(dlq_handler="redrive")

    purge = commands.add_parser(
        "purge", parents=[common, filters], help="delete messages, after confirmation"
    )
    purge.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    purge.add_argument(
        "--dry-run", action="store_true", help="list the dead letters purge would delete; delete nothing"
    )
    purge.set_defaults(dlq_handler="purge")
    return dlq


def add_pipeline_arguments(group: Any) -> None:
    """``--stack`` and ``--function``: which pipeline (also for ``send``, ``trace`` and ``logs``)."""
    group.add_argument("--stack", help="the pipeline's stack (default: the only pipeline deployed)")
    group.add_argument("--function", help="the consumer function, when a stack has several pipelines")


def add_cloud_arguments(group: Any) -> None:
    """``--local`` (and where the app is) or an account's credentials: which cloud (every command that talks
    to one)."""
    group.add_argument("--local", action="store_true", help="the local emulator of the app")
    group.add_argument(
        "--app-dir",
        help="with --local: the app directory (default: the nearest directory with a cdk.json, upwards)",
    )
    group.add_argument(
        "--state-dir", help="with --local: the emulator's state directory (default: the app's)"
    )
    group.add_argument("--profile", help="AWS profile (default: the default credential chain)")
    group.add_argument("--region", help="AWS region (default: the configured one)")


def add_wait_argument(parser: Any) -> None:
    # Long polling makes an empty answer mean "empty" on every SQS server; tests against an emulator that
    # answers at once use 0.
    parser.add_argument("--wait-seconds", type=int, default=DEFAULT_WAIT_SECONDS, help=argparse.SUPPRESS)


def clients_for(args: argparse.Namespace) -> Any:
    """The clients of the cloud the options of :func:`add_cloud_arguments` name."""
    from idempotent_cli.dlq import aws

    return aws.connect(
        local=args.local,
        app_dir=args.app_dir,
        state_dir=args.state_dir,
        profile=args.profile,
        region=args.region,
    )


def reporting_errors(call: Callable[[], int], err: Any, *, interrupted: str | None = None) -> int:
    """``call()``, with the tools' errors printed on ``err`` as one ``error:`` line and exit code 1
    (``interrupted``: the line after Ctrl-C, exit code 130; None lets KeyboardInterrupt through)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except DlqError as exc:
        print(f"error: {exc}", file=err, flush=True)
        return 1
    except ClientError as exc:
        error = exc.response.get("Error", {})
        print(
            f"error: AWS refused {exc.operation_name}: {error.get('Code')}: {error.get('Message')}",
            file=err,
            flush=True,
        )
        return 1
    except BotoCoreError as exc:
        print(f"error: {exc}", file=err, flush=True)
        return 1
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        print(f"\n{interrupted}", file=err)
        return 130


def _common_options() -> argparse.ArgumentParser:
    """Which queue and which cloud: the options of every command."""
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("which queue")
    add_pipeline_arguments(where)
    where.add_argument("--queue-url", help="the dead-letter queue's URL, instead of finding it from a stack")
    where.add_argument("--source-queue-url", help="where a redrive sends messages (default: found)")
    where.add_argument(
        "--which",
        choices=[w.value for w in Which],
        default=Which.DLQ.value,
        help="dlq: the queue's DLQ (default); subscription: the SNS subscription's DLQ",
    )
    cloud = common.add_argument_group("which cloud")
    add_cloud_arguments(cloud)
    cloud.add_argument(
        "--visibility-timeout",
        type=int,
        default=DEFAULT_VISIBILITY_SECONDS,
        metavar="SECONDS",
        help=f"how long the tool holds the messages it reads (default: {DEFAULT_VISIBILITY_SECONDS})",
    )
    add_wait_argument(cloud)
    return common


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


def run(args: argparse.Namespace, *, console: Any = None, connect: Connect | None = None) -> int:
    """Run the parsed ``dlq`` command; returns the exit code (errors are printed, never raised)."""
    from idempotent_cli.dlq.console import Console

    console = console or Console()
    return reporting_errors(
        lambda: _run(args, console, connect),
        console.err,
        interrupted="interrupted: every message the command held is visible in the DLQ again",
    )


def _run(args: argparse.Namespace, console: Any, connect: Connect | None) -> int:
    from idempotent_cli.dlq import commands, locate

    if args.visibility_timeout < 1 or args.visibility_timeout > 43200:
        raise DlqError(f"--visibility-timeout must be 1 to 43200 seconds, got {args.visibility_timeout}")
    limit = getattr(args, "limit", None)
    if limit is not None and limit < 1:
        raise DlqError(f"--limit must be at least 1, got {limit}")
    clients = (connect or clients_for)(args)
    handler = args.dlq_handler
    if args.function and not args.queue_url and handler in RELAY_HANDLERS:
        relay = locate.relay_named(clients, stack=args.stack, function=args.function)
        if relay is not None:
            return _relay_command(args, clients, console, relay)
    if handler == "show" and not (args.function or args.queue_url):
        pipelines = locate.one_stack(locate.candidates(clients, stack=args.stack, function=None))
        if len(pipelines) > 1:
            return _show_in_any(args, clients, console, pipelines)
    target = locate.resolve(
        clients,
        which=Which(args.which),
        stack=args.stack,
        function=args.function,
        queue_url=args.queue_url,
        source_queue_url=args.source_queue_url,
        use=locate.Use.LOOK if handler == "list" else locate.Use.CHANGE,
    )
    if target.note:
        console.note(target.note)
    context = _context(args, clients, console, target)
    filters = Filters(
        tuple(getattr(args, "group", []) or ()),
        tuple(getattr(args, "reason", []) or ()),
        tuple(getattr(args, "reason_text", []) or ()),
    )
    if handler == "list":
        return commands.cmd_list(context, filters=filters, messages=args.messages, as_json=args.json)
    if handler == "show":
        return commands.cmd_show(context, message_id=args.message_id, as_json=args.json)
    if handler == "redrive":
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


# What `--function RELAY` does on an outbox relay's dead-letter queue (idempotent_cli.dlq.relayed); purge
# takes the queue's URL (--queue-url), as for any queue.
RELAY_HANDLERS = ("list", "show", "redrive")
# The consumer DLQ's options that mean nothing there (its entries are batches and emitted messages, not a
# consumer's messages with a key): refused, never ignored.
NOT_ON_RELAY = ("group", "reason", "reason_text", "messages", "force", "rate")


def _relay_command(args: argparse.Namespace, clients: Any, console: Any, relay: Any) -> int:
    from idempotent_cli.dlq import relayed

    given = [f"--{name.replace('_', '-')}" for name in NOT_ON_RELAY if getattr(args, name, None)]
    if given:
        raise DlqError(
            f"{', '.join(given)}: not an option on an outbox relay's dead-letter queue ({relay.function}): "
            "its entries are batches and emitted messages, redriven whole (redrive takes --dry-run and "
            "--limit, list and show --json)"
        )
    context = relayed.RelayContext(clients, console, relay, args.visibility_timeout, args.wait_seconds)
    if args.dlq_handler == "list":
        return relayed.cmd_list(context, as_json=args.json)
    if args.dlq_handler == "show":
        return relayed.cmd_show(context, message_id=args.message_id, as_json=args.json)
    return relayed.cmd_redrive(context, dry_run=args.dry_run, limit=args.limit)


def _context(args: argparse.Namespace, clients: Any, console: Any, target: Any) -> Any:
    from idempotent_cli.dlq import commands

    return commands.Context(
        target=target,
        clients=clients,
        console=console,
        visibility_seconds=args.visibility_timeout,
        wait_seconds=args.wait_seconds,
    )


def _show_in_any(args: argparse.Namespace, clients: Any, console: Any, pipelines: list[Any]) -> int:
    """``show ID`` on a stack of several consumers, without --function: in the DLQ of each until one holds
    the message, saying which."""
    from idempotent_cli.dlq import commands, locate

    looked = []
    for pipeline in pipelines:
        try:
            target = locate.target_of(clients, pipeline, Which(args.which))
        except DlqError:  # no such DLQ (--which subscription): none of its messages to show
            continue
        context = _context(args, clients, console, target)
        looked.append(f"{pipeline.function} ({target.dlq_url})")
        try:
            found = commands.find(context, args.message_id)
        except commands.NotFound:
            continue
        console.note(
            f"stack {pipeline.stack} has {len(pipelines)} consumers: {locate.listing(pipelines)}; "
            f"{args.message_id} is in the dead-letter queue of {pipeline.function}"
        )
        return commands.cmd_show(context, message_id=args.message_id, as_json=args.json, found=found)
    raise DlqError(
        f"no message {args.message_id} (its id in the DLQ, the original's, or a redriven copy's) in the "
        f"dead-letter queue of any consumer of stack {pipelines[0].stack}: "
        f"{'; '.join(looked) or 'none has one'}; `dlq list --messages --function NAME` shows their ids"
    )


def main(argv: Sequence[str] | None = None, *, console: Any = None, connect: Connect | None = None) -> int:
    args = parser().parse_args(["dlq", *(sys.argv[1:] if argv is None else argv)])
    return run(args, console=console, connect=connect)
