"""What every test process shares: an emulator a test starts, itself or through the command line (`local
deploy` in a subprocess), stops when the test run ends, however it ends (killed by a timeout, SIGTERM,
Ctrl-C): each test process names itself the owner of the emulators it starts (``OWNER_VARIABLE``)."""

from __future__ import annotations

import os

import pytest

from idempotent_local.emulator import OWNER_VARIABLE


def pytest_configure(config: pytest.Config) -> None:
    os.environ[OWNER_VARIABLE] = str(os.getpid())  # each xdist worker: itself
