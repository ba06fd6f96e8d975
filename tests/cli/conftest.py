"""Fixtures of the command line's tests, on the helpers of ``dlq_helpers.py`` (one moto server per test
process, taught by the local cloud)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from dlq_helpers import REGION, Deduplication, endpoint, reset


@contextlib.contextmanager
def emulated() -> Iterator[None]:
    """The server behaves like the emulator (moto taught and patched) while a test uses it; after, moto is
    plain again: the patches are process-wide, and later tests of this process (benchmarks, the runtime's)
    use moto in-process as it is."""
    from idempotent_local import patches, server

    server.install(endpoint=endpoint())
    try:
        yield
    finally:
        patches.revert()


@pytest.fixture
def cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The moto server, emptied, and the environment of a machine whose default credentials point at it:
    the tool's real-account path (boto3's default chain, AWS_ENDPOINT_URL) with fake values."""
    reset()
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "fake")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint())
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with emulated():
        yield endpoint()


@pytest.fixture
def aws_deduplication(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deduplication]:
    """FIFO deduplication as AWS does it, on a clock the test moves (see :class:`Deduplication`)."""
    from idempotent_local import clock as emulator_clock

    clock = Deduplication()
    monkeypatch.setattr(emulator_clock, "time", clock)
    with emulated():
        yield clock


@pytest.fixture
def local_app(cloud: str, tmp_path: Path) -> Path:
    """An app directory whose emulator, as ``--local`` finds it (``.local-cloud/state.json`` naming a live
    process and a port that answers), is this process's moto server."""
    from idempotent_local import emulator as emulators

    app = tmp_path / "app"
    state_dir = app / emulators.DEFAULT_STATE_DIR
    state_dir.mkdir(parents=True)
    (app / "cdk.json").write_text('{"app": "python3 app.py"}')
    running = emulators.Emulator(pid=os.getpid(), port=int(cloud.rsplit(":", 1)[1]), state_dir=str(state_dir))
    (state_dir / emulators.STATE_FILE).write_text(json.dumps({"pid": running.pid, "port": running.port}))
    assert emulators.find(state_dir) == running
    return app
