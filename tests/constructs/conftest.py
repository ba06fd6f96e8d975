"""Shared fixtures for the construct tests: one jsii process, templates synthesized once per session."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# isort: off
# constructs_helpers first: it sets the variables jsii reads when aws_cdk starts it.
from constructs_helpers import REPO, cdk_env, new_stack, template_of
import aws_cdk as cdk
from aws_cdk import assertions
# isort: on


@pytest.fixture(scope="session")
def user_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's processing-code directory: a module with a processor and a helper package."""
    directory = tmp_path_factory.mktemp("user_code")
    (directory / "orders.py").write_text("def handle(message, table):\n    return None\n")
    (directory / "helpers").mkdir()
    (directory / "helpers" / "__init__.py").write_text("VALUE = 1\n")
    (directory / "__pycache__").mkdir()
    (directory / "__pycache__" / "orders.cpython-311.pyc").write_bytes(b"\0")
    return directory


@pytest.fixture(scope="session")
def synth() -> Callable[[Callable[[cdk.Stack], Any]], assertions.Template]:
    """Build a stack with ``build(stack)`` and return its template."""

    def _synth(build: Callable[[cdk.Stack], Any], name: str = "TestStack") -> assertions.Template:
        stack = new_stack(name)
        build(stack)
        return template_of(stack)

    return _synth


@pytest.fixture(scope="session")
def cli_synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The real `npx cdk synth` of app.py (the command README users run), into a temporary cloud assembly."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    npx = shutil.which("npx", path=cdk_env()["PATH"])
    assert npx is not None, "npx is needed to run the pinned CDK CLI"
    result = subprocess.run(
        [npx, "--no-install", "cdk", "synth", "--quiet", "--output", str(outdir)],
        cwd=REPO,
        env=cdk_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"npx cdk synth failed:\n{result.stdout}\n{result.stderr}"
    yield outdir
