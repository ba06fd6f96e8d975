"""What the commands that talk to a cloud share: their entry in the parser, which pipeline and which cloud
(``--stack``, ``--function``, ``--local``, ``--profile``...), the clients, and errors as exit codes."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

# What makes a command's clients from its arguments (tests give one of their own).
Connect = Callable[[argparse.Namespace], Any]


def add_command(subparsers: Any, name: str, help: str, description: str | None) -> argparse.ArgumentParser:
    """A command of the CLI whose ``--help`` shows ``description`` (its module's docstring) as written."""
    return subparsers.add_parser(  # type: ignore[no-any-return]
        name, help=help, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def add_pipeline_arguments(group: Any) -> None:
    """``--stack`` and ``--function``: which pipeline (``dlq``, ``send``, ``trace``, ``logs``)."""
    group.add_argument("--stack", help="the pipeline's stack (default: the only one with a pipeline)")
    group.add_argument(
        "--function",
        metavar="NAME",
        help="one function of the stack: its construct id or path (Orders, Shop/Orders), its function name "
        "or ARN, a stack output naming it, or its logical id (default: every pipeline, or the only one)",
    )


def add_cloud_arguments(group: Any) -> None:
    """``--local`` (and where the app is) or an account's credentials: which cloud."""
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


def clients_for(args: argparse.Namespace) -> Any:
    """The clients of the cloud the options of :func:`add_cloud_arguments` name."""
    from idempotent_cli import aws

    return aws.connect(
        local=args.local,
        app_dir=args.app_dir,
        state_dir=args.state_dir,
        profile=args.profile,
        region=args.region,
    )


def run(
    work: Callable[..., int], args: argparse.Namespace, console: Any, connect: Connect | None, **how: Any
) -> int:
    """``work(args, console, connect)``: on ``console`` (default: the terminal's), with the clients
    ``connect`` makes (default: :func:`clients_for`), errors reported by :func:`reporting_errors`."""
    from idempotent_cli.console import Console

    console = console or Console()
    return reporting_errors(lambda: work(args, console, connect or clients_for), console.err, **how)


def reporting_errors(call: Callable[[], int], err: Any, *, interrupted: str | None = None) -> int:
    """``call()``, with the tools' errors printed on ``err`` as one ``error:`` line and their exit code (1;
    2 where the operator must choose); ``interrupted``: the line after Ctrl-C, exit code 130 (None lets
    KeyboardInterrupt through)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from idempotent_cli.errors import DlqError

    try:
        return call()
    except DlqError as exc:
        print(f"error: {exc}", file=err, flush=True)
        return exc.exit_code
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
