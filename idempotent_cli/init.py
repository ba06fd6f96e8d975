"""``idempotent-pipeline init DIR``: a ready CDK app that uses the constructs, as ``cdk init`` makes one.

The files come from ``templates/app/`` (package data): ``app.py`` (one ``IdempotentPipeline`` and its
outputs), ``cdk.json`` (the recommended feature flags), ``src/orders.py`` (a processor) with
``tests/test_orders.py``, ``requirements.txt`` (this installation of idempotent-pipeline, with the ``local``
extra), ``package.json`` (the pinned CDK CLI), ``README.md``. ``cd DIR && idempotent-pipeline local
deploy`` then works. Needs neither moto nor Node.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

TEMPLATE = "templates/app"
SUFFIX = ".tmpl"
RENAMED = {"gitignore": ".gitignore"}  # a file named .gitignore would be left out of the wheel by tools


class InitError(RuntimeError):
    """The app cannot be created where asked; the message says why."""


def stack_name(directory: Path) -> str:
    """A CloudFormation stack name from the directory name: ``my-orders`` -> ``MyOrders``."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", directory.name) if w]
    name = "".join(w[:1].upper() + w[1:] for w in words)
    if not name or not name[0].isalpha():
        name = "App" + name
    return name[:128]


def requirement() -> str:
    """The requirement line that installs this very idempotent-pipeline with the ``local`` extra."""
    from idempotent_local.extra import DISTRIBUTION, EXTRA, installed_from

    origin = installed_from()
    if origin:
        return f"{DISTRIBUTION}[{EXTRA}] @ {Path(origin).resolve().as_uri()}"
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return f"{DISTRIBUTION}[{EXTRA}]" + (f"=={version}" if version else "")


def _files() -> list[tuple[str, str]]:
    """(relative path, text) of every template file."""
    root = resources.files("idempotent_cli").joinpath(TEMPLATE)
    found: list[tuple[str, str]] = []

    def walk(node: Any, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name == "__pycache__":
                continue
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            else:
                found.append((f"{prefix}{child.name}", child.read_text(encoding="utf-8")))

    walk(root, "")
    return found


def render(directory: Path) -> dict[str, str]:
    """The app's files for ``directory``: relative path -> text."""
    from idempotent_local.cdk import CDK_CLI_VERSION

    stack = stack_name(directory)
    values = {
        "__APP_NAME__": directory.name,
        "__STACK_NAME__": stack,
        "__STACK_CLASS__": stack if stack.endswith("Stack") else f"{stack}Stack",
        "__PACKAGE_NAME__": re.sub(r"[^a-z0-9-]+", "-", directory.name.lower()).strip("-") or "app",
        "__CDK_CLI_VERSION__": CDK_CLI_VERSION,
        "__REQUIREMENT__": requirement(),
    }
    rendered = {}
    for path, text in _files():
        if path.endswith(SUFFIX):
            path = path.removesuffix(SUFFIX)
            for token, value in values.items():
                text = text.replace(token, value)
        head, _, name = path.rpartition("/")
        rendered[f"{head}/{RENAMED.get(name, name)}" if head else RENAMED.get(name, name)] = text
    return rendered


def create(directory: Path) -> dict[str, str]:
    """Write the app into ``directory`` (new, or empty); returns what was written."""
    directory = directory.expanduser().resolve()
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise InitError(f"{directory} exists and is not an empty directory: choose a new one")
    files = render(directory)
    for path, text in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (directory / "app.py").chmod(0o755)
    return files


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    try:
        files = create(directory)
    except InitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    resolved = directory.expanduser().resolve()
    print(f"created the CDK app {resolved.name} (stack {stack_name(resolved)}) in {resolved}:")
    for path in sorted(files):
        print(f"    {path}")
    print(
        "\nnext:\n"
        f"    cd {args.directory}\n"
        "    pip install -r requirements.txt      # pytest, for the processor's test\n"
        "    python -m pytest\n"
        "    idempotent-pipeline local deploy     # deploy it on this machine (no AWS account needed)\n"
        "then see README.md: publish a message, `idempotent-pipeline local run`, `... local destroy`."
    )
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "init",
        help="create a CDK app that uses the constructs, ready for `idempotent-pipeline local deploy`",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("directory", metavar="DIR", help="where to create the app (new or empty)")
    parser.set_defaults(func=cmd_init)
