"""``idempotent-pipeline COMMAND``: one command line for the project's tools.

The parser is built from :data:`COMMANDS`, a list of modules that each expose ``register(subparsers)``:
``register`` adds its command (and its own subcommands) and sets ``func`` on the parsed arguments, a
callable that takes them and returns the exit code. Adding a tool is one line here. A command module
imports what it needs when it runs, not when the parser is built, so ``--help`` and ``init`` stay fast and
work without the ``local`` extra.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

PROG = "idempotent-pipeline"

# Each module exposes register(subparsers).
COMMANDS: tuple[str, ...] = (
    "idempotent_cli.init",
    "idempotent_cli.local",
    "idempotent_cli.dlq",
    "idempotent_cli.send",
    "idempotent_cli.trace",
    "idempotent_cli.logs",
)


def parser() -> argparse.ArgumentParser:
    from idempotent_runtime import __version__

    root = argparse.ArgumentParser(
        prog=PROG,
        description="AWS CDK constructs and Lambda runtime for exactly-once effects from SNS/SQS: the tools.",
    )
    root.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
