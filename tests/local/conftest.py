"""One emulator (a moto server process on loopback) shared by the tests of this directory.

Tests that build their own resources take ``clean_emulator`` (the emulator, reset first); the end-to-end
tests deploy the reference stack into it with the real CDK CLI.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from idempotent_local import emulator as emulators
from idempotent_local.emulator import Emulator


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("local-cloud")
    yield directory
    emulators.stop(directory)


@pytest.fixture
def emulator(state_dir: Path) -> Emulator:
    """The shared emulator, started on first use (or again, after a test stopped it)."""
    running, _ = emulators.start(state_dir)
    return running


@pytest.fixture
def clean_emulator(emulator: Emulator) -> Emulator:
    emulator.reset()
    return emulator


@pytest.fixture(autouse=True)
def plain_moto_afterwards() -> Iterator[None]:
    """A test that patches this process's moto (``patches.apply()`` under ``mock_aws``) leaves it plain for
    the next test of the worker, which may use moto in-process as it is (the runtime's, the benchmarks')."""
    yield
    patches = sys.modules.get("idempotent_local.patches")
    if patches is not None:
        patches.revert()
