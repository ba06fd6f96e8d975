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

from tests.wheelhouse import this_python_tag, write_wheel
import aws_cdk as cdk
from aws_cdk import assertions
# isort: on


def pytest_report_header() -> str:
    """Which aws-cdk-lib the construct tests run against (make test runs them on the newest and the floor)."""
    import importlib.metadata

    versions = []
    for name in ("aws-cdk-lib", "constructs", "cdk-nag"):
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} not installed")
    return ", ".join(versions)


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


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local package index for pip (PIP_FIND_LINKS): no network in the tests.

    - ``tinyutil``: a pure-Python wheel;
    - ``armonly``: a binary wheel for CPython 3.14 on manylinux aarch64 only;
    - ``sourceonly``: an sdist, no wheel at all;
    - ``shadow``: a wheel that would install a package named idempotent_runtime;
    - ``nativeonly``: binary wheels for CPython 3.14 on manylinux aarch64 and for the Python running the
      tests.
    """
    directory = tmp_path_factory.mktemp("wheelhouse")
    for tag, built_for in (("cp314-cp314-manylinux2014_aarch64", "lambda"), (this_python_tag(), "here")):
        write_wheel(
            directory, "nativeonly", "1.0", tag, {"nativeonly/__init__.py": f"BUILT_FOR = {built_for!r}\n"}
        )
    write_wheel(directory, "tinyutil", "1.0", "py3-none-any", {"tinyutil/__init__.py": "VALUE = 42\n"})
    write_wheel(
        directory,
        "armonly",
        "1.0",
        "cp314-cp314-manylinux2014_aarch64",
        {"armonly/__init__.py": "NATIVE = True\n"},
    )
    write_wheel(directory, "shadow", "1.0", "py3-none-any", {"idempotent_runtime/__init__.py": ""})
    (directory / "sourceonly-1.0.tar.gz").write_bytes(b"not a real sdist: pip never gets to read it")
    return directory


@pytest.fixture
def offline_pip(wheelhouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip reads only the wheelhouse; installed requirements are cached under a fresh directory (returned)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("IDEMPOTENT_PIPELINE_CACHE", str(cache))
    return cache
