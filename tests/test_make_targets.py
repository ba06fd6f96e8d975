"""The README's commands: where `make deploy` and `make destroy` go (dry runs, nothing is executed), and what
`make` shows while it installs."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(*args: str) -> list[str]:
    """The commands `make -n` would run for the deploy/destroy recipe (setup prerequisites left out)."""
    result = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "-o", "node_modules/.installed", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def test_make_deploy_goes_to_the_local_emulator_by_default_and_asks_for_the_demo():
    commands = dry_run("deploy")
    assert ".venv/bin/idempotent-pipeline local deploy --demo" in commands
    assert not any("cdk deploy" in line for line in commands)


def test_make_demo_runs_the_demo_through_the_command_line():
    assert ".venv/bin/idempotent-pipeline local demo" in dry_run("demo")


@pytest.mark.parametrize("switch", ["AWS_PROFILE=my-profile", "TARGET=aws"])
def test_make_deploy_with_a_profile_or_target_aws_uses_the_plain_cdk_cli(switch):
    commands = dry_run("deploy", switch)
    assert "npx cdk deploy --all" in commands
    assert not any("idempotent-pipeline" in line for line in commands)


def test_make_destroy_follows_the_same_switch():
    assert ".venv/bin/idempotent-pipeline local destroy" in dry_run("destroy")
    assert "npx cdk destroy --all" in dry_run("destroy", "AWS_PROFILE=my-profile")


# A stand-in for `python3`: `-m venv DIR` creates DIR/bin/python, whose "pip install" takes a few seconds and
# says what it collects, as pip does.
FAKE_PIP = """#!/usr/bin/env bash
echo "Collecting aws-cdk-lib>=2.275.0"
sleep 3
echo "Successfully installed"
"""
FAKE_PYTHON = textwrap.dedent(
    """\
    #!/usr/bin/env bash
    if [ "$1 $2" = "-m venv" ]; then
        mkdir -p "$3/bin"
        cp "$(dirname "$0")/fake-pip" "$3/bin/python"
    fi
    """
)


def test_make_shows_progress_while_it_installs_the_python_environment(tmp_path):
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON)
    (tmp_path / "fake-pip").write_text(FAKE_PIP)
    for script in (python, tmp_path / "fake-pip"):
        script.chmod(0o755)
    venv = tmp_path / "venv"
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            f"VENV={venv}",
            f"PYTHON={python}",
            "PROGRESS_SECONDS=1",
            f"{venv}/.installed",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"==> creating the Python environment in {venv}/")
    progress = [line for line in lines if line.startswith("    ") and " s: " in line]
    assert progress, result.stdout  # not silence while pip runs
    assert "Collecting aws-cdk-lib>=2.275.0" in progress[-1]
    assert (venv / ".installed").exists()
