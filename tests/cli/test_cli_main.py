"""The `idempotent-pipeline` command line: its entry points, how it is assembled, and what works without the
`local` extra."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from idempotent_cli import main as cli
from idempotent_local import extra

ROOT = Path(__file__).resolve().parents[2]

# Runs the command line in a fresh interpreter where `import moto` fails, as without the `local` extra.
WITHOUT_MOTO = textwrap.dedent(
    """
    import sys
    sys.modules["moto"] = None  # import moto -> ImportError
    from idempotent_cli.main import main
    code = main(sys.argv[1:])
    loaded = sorted(
        m for m, mod in sys.modules.items()
        if mod is not None and m.startswith(("moto", "idempotent_local.cloudformation"))
    )
    print("LOADED", loaded)
    sys.exit(code)
    """
)


def _without_moto(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_MOTO, *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_the_console_script_and_the_module_alias_are_the_same_command() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"idempotent-pipeline": "idempotent_cli.main:main"}
    result = subprocess.run(
        [sys.executable, "-m", "idempotent_cli", "--help"], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith("usage: idempotent-pipeline [-h] [--version] COMMAND ...")
    assert "init" in result.stdout and "local" in result.stdout


def test_version_prints_the_version_the_runtime_declares(capsys: pytest.CaptureFixture[str]) -> None:
    from idempotent_runtime import __version__

    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])

    assert exited.value.code == 0
    assert capsys.readouterr().out == f"idempotent-pipeline {__version__}\n"
    result = subprocess.run(
        [sys.executable, "-m", "idempotent_cli", "--version"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (0, f"idempotent-pipeline {__version__}\n")


def test_the_parser_is_built_from_the_list_of_command_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool is one more module name in COMMANDS, exposing register(subparsers)."""
    module = type(sys)("extra_tool")

    def register(subparsers: Any) -> None:
        tool = subparsers.add_parser("extra", help="an extra tool")
        tool.add_argument("--times", type=int, default=1)
        tool.set_defaults(func=lambda args: 40 + args.times)

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "extra_tool", module)
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "extra_tool"))

    assert cli.main(["extra", "--times", "2"]) == 42
    assert cli.COMMANDS[:2] == ("idempotent_cli.init", "idempotent_cli.local")


def test_local_commands_are_the_local_tools_with_its_alias() -> None:
    subcommands = next(
        action for action in cli.parser()._actions if isinstance(action, argparse._SubParsersAction)
    )
    local = subcommands.choices["local"]
    (commands,) = [a for a in local._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {
        "deploy",
        "run",
        "demo",
        "diff",
        "status",
        "age",
        "age-streams",
        "age-dedup",
        "request",
        "output",
        "env",
        "destroy",
        "serve",
        "stop",
    }
    alias = subprocess.run(
        [sys.executable, "-m", "idempotent_local", "--help"], capture_output=True, text=True, check=True
    )
    assert alias.stdout.startswith("usage: python -m idempotent_local [-h] COMMAND ...")


def test_local_without_moto_names_the_extra_and_an_install_line_that_works(tmp_path: Path) -> None:
    result = _without_moto("local", "status", cwd=tmp_path)
    assert result.returncode == 1
    assert "the local cloud needs the `local` extra of idempotent-pipeline (moto's server)" in result.stderr
    (line,) = [line.strip() for line in result.stderr.splitlines() if " -m pip install " in line]
    assert line.startswith(f"{sys.executable} -m pip install ")
    assert line.endswith('[local]"') or line.endswith(f'"{extra.MOTO_REQUIREMENT}"')


def test_the_install_line_names_the_wheel_this_was_installed_from(monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = "/downloads/dist/idempotent_pipeline-0.1.0-py3-none-any.whl"
    monkeypatch.setattr(extra, "installed_from", lambda: wheel)
    assert extra.install_line() == f'{sys.executable} -m pip install "{wheel}[local]"'
    monkeypatch.setattr(extra, "installed_from", lambda: None)
    assert extra.install_line() == f'{sys.executable} -m pip install "moto[server]>=5.2,<6"'


def test_init_and_help_work_without_moto(tmp_path: Path) -> None:
    created = _without_moto("init", "shop", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "shop" / "app.py").exists()
    assert "LOADED []" in created.stdout
    helped = _without_moto("local", "deploy", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "--demo" in helped.stdout


def test_the_construct_library_imports_no_emulator_or_tool_code() -> None:
    probe = textwrap.dedent(
        """
        import sys
        import idempotent_pipeline
        from idempotent_pipeline import IdempotentPipeline, IdempotencyTable
        from idempotent_pipeline import consumer, messaging, pipeline, table
        leaked = sorted(
            m for m in sys.modules
            if m.split(".")[0] in ("idempotent_local", "idempotent_cli", "moto", "werkzeug", "flask")
        )
        print(leaked)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_output_cut_short_by_the_reader_ends_quietly(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from idempotent_cli import main as cli
        def chatty(args):
            for n in range(100000):
                print(f"line {n}", flush=True)
            return 0
        def register(subparsers):
            subparsers.add_parser("chatty").set_defaults(func=chatty)
        module = type(sys)("chatty_tool")
        module.register = register
        sys.modules["chatty_tool"] = module
        cli.COMMANDS = (*cli.COMMANDS, "chatty_tool")
        sys.exit(cli.main(["chatty"]))
        """
    )
    result = subprocess.run(
        f"{sys.executable} -c '{script}' | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.stdout == "line 0\n"
    assert result.stderr == ""  # no BrokenPipeError traceback
