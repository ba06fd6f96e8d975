"""The README's commands: where `make deploy` and `make destroy` go (dry runs, nothing is executed)."""

from __future__ import annotations

import shutil
import subprocess
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


def test_make_deploy_goes_to_the_local_emulator_by_default():
    commands = dry_run("deploy")
    assert any(line.endswith("-m idempotent_local deploy") for line in commands)
    assert not any("cdk deploy" in line for line in commands)


@pytest.mark.parametrize("switch", ["AWS_PROFILE=my-profile", "TARGET=aws"])
def test_make_deploy_with_a_profile_or_target_aws_uses_the_plain_cdk_cli(switch):
    commands = dry_run("deploy", switch)
    assert "npx cdk deploy --all" in commands
    assert not any("idempotent_local" in line for line in commands)


def test_make_destroy_follows_the_same_switch():
    assert any(line.endswith("-m idempotent_local destroy") for line in dry_run("destroy"))
    assert "npx cdk destroy --all" in dry_run("destroy", "AWS_PROFILE=my-profile")
