"""The emulator's life cycle (its own short-lived instance) and the command line's errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from idempotent_pipeline.local import emulator as emulators
from idempotent_pipeline.local.cli import main


def test_emulator_starts_once_is_reused_and_stops(tmp_path: Path) -> None:
    first, started = emulators.start(tmp_path)
    try:
        assert started
        state = json.loads((tmp_path / "state.json").read_text())
        assert state == {
            "pid": first.pid,
            "port": first.port,
            "state_dir": str(tmp_path),
            "endpoint": f"http://localhost:{first.port}",
        }
        assert first.client("sts").get_caller_identity()["Account"] == emulators.ACCOUNT_ID

        again, started_again = emulators.start(tmp_path)
        assert (again, started_again) == (first, False)
    finally:
        stopped = emulators.stop(tmp_path)
    assert stopped
    assert not (tmp_path / "state.json").exists()
    assert emulators.find(tmp_path) is None
    with pytest.raises(ProcessLookupError):
        os.kill(first.pid, 0)
    assert emulators.stop(tmp_path) is False


def test_client_environment_points_only_at_the_emulator() -> None:
    emulator = emulators.Emulator(pid=1, port=4567, state_dir="/tmp/somewhere")
    env = emulator.client_environment(
        base={"AWS_PROFILE": "production", "AWS_SESSION_TOKEN": "t", "HOME": "/h"}
    )
    assert "AWS_PROFILE" not in env
    assert "AWS_SESSION_TOKEN" not in env
    assert env["AWS_ENDPOINT_URL"] == "http://localhost:4567"
    assert env["AWS_ACCESS_KEY_ID"] == emulators.FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"]
    assert env["AWS_REGION"] == emulators.REGION
    assert env["HOME"] == "/h"


def test_demo_without_a_running_emulator_says_to_deploy_first(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["demo", "--state-dir", str(tmp_path)]) == 1
    assert "no emulator is running" in capsys.readouterr().err


def test_destroy_without_a_running_emulator_has_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["destroy", "--state-dir", str(tmp_path)]) == 0
    assert "nothing to destroy" in capsys.readouterr().out


def test_deploy_of_a_directory_without_cdk_json_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture, state_dir: Path
) -> None:
    assert main(["deploy", "--state-dir", str(state_dir), "--app-dir", str(tmp_path), "--no-demo"]) == 1
    assert f"no cdk.json in the app directory: {tmp_path}" in capsys.readouterr().err
