"""``idempotent-pipeline local COMMAND``: the local cloud (:mod:`idempotent_local`), which needs the
``local`` extra (moto's server). Without it, every ``local`` command says so and how to install it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

NAME = "idempotent-pipeline"


def invoked_as() -> str:
    """How to call this command again from the user's shell, for the hints the commands print.

    ``idempotent-pipeline`` when that name finds this very script on PATH; else the script's path (e.g.
    ``.venv/bin/idempotent-pipeline`` when ``make`` put it on a PATH of its own).
    """
    script = Path(sys.argv[0])
    if script.name != NAME:
        return NAME
    found = shutil.which(NAME)
    if not os.environ.get("MAKELEVEL") and found and Path(found).resolve() == script.resolve():
        return NAME
    try:
        return str(script.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(script.resolve())


def register(subparsers: Any) -> None:
    from idempotent_cli.command import add_command
    from idempotent_local import cli

    help = "deploy and run your CDK app on this machine, without an AWS account"
    local = add_command(subparsers, "local", help, cli.__doc__)
    commands = local.add_subparsers(dest="local_command", required=True, metavar="COMMAND")
    cli.add_commands(commands, f"{invoked_as()} local")
