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


# Under `make test` pytest inherits MAKELEVEL: a make it starts is a sub-make, which prints "Entering
# directory '<checkout>'" unless told not to.
SUB_MAKE = {
    **{k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")},
    "MAKELEVEL": "1",
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Makefile in a directory named as the default clone: no test may depend on the checkout's name."""
    directory = tmp_path_factory.mktemp("clone") / "idempotent-pipeline"
    directory.mkdir()
    shutil.copy(ROOT / "Makefile", directory / "Makefile")
    return directory


def dry_run(checkout: Path, *args: str) -> list[str]:
    """The commands `make -n` would run for the deploy/destroy recipe (setup prerequisites left out), as
    `make test` would see them."""
    make = ["make", "--no-print-directory", "-n", "-o", ".venv/.installed", "-o", "node_modules/.installed"]
    result = subprocess.run(
        [*make, *args], cwd=checkout, capture_output=True, text=True, check=True, env=SUB_MAKE
    )
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def test_make_deploy_goes_to_the_local_emulator_by_default_and_asks_for_the_demo(checkout: Path):
    commands = dry_run(checkout, "deploy")
    assert ".venv/bin/idempotent-pipeline local deploy --demo" in commands
    assert not any("cdk deploy" in line for line in commands)


def test_make_wheel_builds_with_pip_alone_without_the_dev_environment(checkout: Path):
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "wheel"],
        cwd=checkout,
        capture_output=True,
        text=True,
        env=SUB_MAKE,
    )
    commands = [line.strip() for line in result.stdout.splitlines()]
    assert (
        result.returncode == 0 and commands[0] == "python3 -m pip wheel --no-deps --quiet --wheel-dir dist ."
    )
    assert not any(".venv" in line or "npm" in line for line in commands)  # no `make setup`


def test_make_demo_runs_the_demo_through_the_command_line(checkout: Path):
    assert ".venv/bin/idempotent-pipeline local demo" in dry_run(checkout, "demo")


@pytest.mark.parametrize("switch", ["AWS_PROFILE=my-profile", "TARGET=aws"])
def test_make_deploy_with_a_profile_or_target_aws_uses_the_plain_cdk_cli(checkout: Path, switch):
    commands = dry_run(checkout, "deploy", switch)
    assert "npx cdk deploy --all" in commands
    assert not any("idempotent-pipeline local" in line for line in commands)  # no local emulator


def test_make_destroy_follows_the_same_switch(checkout: Path):
    assert ".venv/bin/idempotent-pipeline local destroy" in dry_run(checkout, "destroy")
    commands = dry_run(checkout, "destroy", "AWS_PROFILE=my-profile")
    assert "npx cdk destroy --all" in commands
    assert not any("idempotent-pipeline local" in line for line in commands)


# A stand-in for `python3`: `-m venv DIR` creates DIR/bin/python, whose "pip install" takes a few seconds and
# says what it collects, then installs for a while without a word, as pip does.
FAKE_PIP = """#!/usr/bin/env bash
case "$*" in *--upgrade*) exit 0;; esac  # pip upgrading itself
echo "Collecting aws-cdk-lib>=2.275.0"
sleep 2
echo "Installing collected packages: aws-cdk-lib"
sleep 8
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
    progress = [line.split(" s: ", 1)[1] for line in lines if line.startswith("    ") and " s: " in line]
    assert progress, result.stdout  # not silence while pip runs
    assert "Installing collected packages: aws-cdk-lib" in progress, result.stdout
    # A step that lasts is said once, then that it goes on (every 6 intervals), not the same line each time.
    said = [text for text in progress if not text.startswith("still the step above")]
    assert len(said) == len(set(said)), result.stdout
    assert len(progress) - len(said) <= 1, result.stdout
    assert (venv / ".installed").exists()
