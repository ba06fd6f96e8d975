"""``idempotent-pipeline init DIR``: a ready CDK app that uses the constructs, as ``cdk init`` makes one.

The files come from ``templates/app/`` (package data); :data:`DESCRIPTION`, what ``init --help`` shows, says
what each is for.
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
    """The lines of requirements.txt that install this idempotent-pipeline with the ``local`` extra.

    Portable: the distribution and its version, never a path of this machine (useless on CI or a colleague's
    machine). The package is not on PyPI, so a comment says where this one came from and how pip finds it
    elsewhere.
    """
    from idempotent_local.extra import DISTRIBUTION, EXTRA, installed_from

    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        version = None
    origin = installed_from()
    if origin and Path(origin).suffix == ".whl":
        source = f"the wheel {Path(origin).name}"
    elif origin:
        source = "a checkout"
    else:
        source = "a package index"
    return (
        f"# {DISTRIBUTION} is not on PyPI: this app was made with {version or 'a version'} installed from "
        f"{source}.\n"
        "# Where it is not installed yet (CI, a colleague), show pip the wheel, e.g.:\n"
        "#   pip install -r requirements.txt --find-links DIR   # DIR holds the .whl, or: PIP_FIND_LINKS\n"
        f'#   pip install "/path/to/{DISTRIBUTION}[{EXTRA}]"   # or from a checkout, before this file\n'
        f"{DISTRIBUTION}[{EXTRA}]" + (f"=={version}" if version else "")
    )


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


# What may already be in the directory init writes into: the virtualenv the README has just created, a
# repository. Anything else may be the user's work: init leaves such a directory alone.
HARMLESS = (".git",)


def _in_the_way(directory: Path, files: dict[str, str]) -> list[str]:
    """What in ``directory`` stops init from writing ``files`` there (empty: nothing)."""
    if not directory.exists():
        return []
    if not directory.is_dir():
        return [directory.name]
    tops = {path.split("/")[0] for path in files}
    found = []
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        harmless = entry.name in HARMLESS or (entry / "pyvenv.cfg").is_file()  # a virtualenv
        if entry.name in tops or not harmless:
            found.append(entry.name + ("/" if entry.is_dir() else ""))
    return found


def create(directory: Path) -> dict[str, str]:
    """Write the app into ``directory`` (new, empty, or holding only a virtualenv or .git); returns what was
    written."""
    directory = directory.expanduser().resolve()
    files = render(directory)
    in_the_way = _in_the_way(directory, files)
    if in_the_way:
        listed = ", ".join(in_the_way[:5]) + (
            f" and {len(in_the_way) - 5} more" if len(in_the_way) > 5 else ""
        )
        raise InitError(
            f"{directory} is not empty: it holds {listed}. init writes into a new directory, or one holding "
            "only a virtualenv or .git: choose another one"
        )
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
    here = resolved == Path.cwd().resolve()
    print(
        "\nnext:\n"
        + ("" if here else f"    cd {args.directory}\n")
        + "    pip install -r requirements.txt      # pytest, for the processor's test\n"
        + "    python -m pytest\n"
        + "    idempotent-pipeline local deploy     # deploy it on this machine (no AWS account needed)\n"
        + "then see README.md: publish a message, `idempotent-pipeline local run`, `... local destroy`."
    )
    return 0


DESCRIPTION = """\
Create a ready CDK app that uses the constructs, as `cdk init` makes one:

  app.py            one IdempotentPipeline and its stack outputs
  cdk.json          the CDK app and the recommended feature flags
  src/orders.py     your processor, with its test in tests/test_orders.py
  requirements.txt  what the app's own environment needs (idempotent-pipeline with the local extra, pytest)
  package.json      pins the CDK CLI for `npx cdk`
  README.md         what each file is for, and the next commands

DIR is a new directory, an empty one, or one holding only a virtualenv (or .git): `init .` in the
directory where you just made your venv works. Then `cd DIR && idempotent-pipeline local deploy`.
Needs neither moto nor Node.
"""


def register(subparsers: Any) -> None:
    from idempotent_cli.command import add_command

    help = "create a CDK app that uses the constructs, ready for `idempotent-pipeline local deploy`"
    parser = add_command(subparsers, "init", help, DESCRIPTION)
    parser.add_argument(
        "directory", metavar="DIR", help="where to create the app (new, empty, or holding only a virtualenv)"
    )
    parser.set_defaults(func=cmd_init)
