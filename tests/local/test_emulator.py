"""The emulator's life cycle (its own short-lived instance) and the command line's errors."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from idempotent_local import emulator as emulators
from idempotent_local.cdk import Cdk
from idempotent_local.cli import main
from idempotent_local.emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]  # holds cdk.json: the reference app


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


def test_stop_leaves_alone_a_process_that_took_a_stale_state_files_pid(tmp_path: Path) -> None:
    # An emulator killed (or a reboot) leaves its state file; its pid may belong to another process now.
    other = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "state.json").write_text(
            json.dumps({"pid": other.pid, "port": 9, "state_dir": str(tmp_path)})
        )
        assert emulators.find(tmp_path) is None
        assert main(["stop", "--state-dir", str(tmp_path), "--app-dir", str(ROOT)]) == 0
        assert other.poll() is None  # still running
        assert not (tmp_path / "state.json").exists()
    finally:
        other.kill()
        other.wait()


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


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _interrupt(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt


def test_ctrl_c_while_waiting_for_the_emulator_ends_the_process_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def recording_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    lookups = iter([None])  # the first lookup (is one running already?) finds none; Ctrl-C comes next

    def find(state_dir: Path | str = emulators.DEFAULT_STATE_DIR) -> Emulator | None:
        for found in lookups:
            return found
        raise KeyboardInterrupt

    monkeypatch.setattr(emulators.subprocess, "Popen", recording_popen)
    monkeypatch.setattr(emulators, "find", find)
    with pytest.raises(KeyboardInterrupt):
        emulators.start(tmp_path)
    (process,) = started
    assert process.returncode is not None  # ended and reaped, not left running detached
    assert _gone(process.pid)
    assert not (tmp_path / emulators.STATE_FILE).exists()


def test_ctrl_c_during_deploy_stops_the_emulator_that_deploy_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(Cdk, "is_bootstrapped", lambda self: True)
    monkeypatch.setattr(Cdk, "deploy", _interrupt)
    status = main(["deploy", "--state-dir", str(tmp_path), "--app-dir", str(ROOT), "--no-demo"])
    out, err = capsys.readouterr()
    assert status == 130
    assert "interrupted: the emulator this command started is stopped" in err
    (pid,) = re.findall(r"started on http://localhost:\d+, pid (\d+)", out)
    assert emulators.find(tmp_path) is None
    assert not (tmp_path / emulators.STATE_FILE).exists()
    assert _gone(int(pid))


def test_ctrl_c_during_deploy_leaves_a_reused_emulator_running(
    emulator: Emulator, state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(Cdk, "is_bootstrapped", lambda self: True)
    monkeypatch.setattr(Cdk, "deploy", _interrupt)
    status = main(["deploy", "--state-dir", str(state_dir), "--app-dir", str(ROOT), "--no-demo"])
    assert status == 130
    assert f"reused on {emulator.endpoint}" in capsys.readouterr().out
    assert emulators.find(state_dir) == emulator


def test_destroy_with_keep_emulator_leaves_the_emulator_running(
    emulator: Emulator, state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    destroyed: list[Emulator] = []
    monkeypatch.setattr(Cdk, "destroy", lambda self, *args: destroyed.append(self.emulator))
    args = ["destroy", "--state-dir", str(state_dir), "--app-dir", str(ROOT), "--keep-emulator"]
    assert main(args) == 0
    assert destroyed == [emulator]
    assert "stopping the emulator" not in capsys.readouterr().out
    assert emulators.find(state_dir) == emulator


def _non_loopback_ipv4() -> list[str]:
    found = set()
    try:
        words = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    except OSError:
        words = []
    with contextlib.suppress(OSError):
        words.append(socket.gethostbyname(socket.gethostname()))
    for word in words:
        try:
            address = ipaddress.ip_address(word)
        except ValueError:
            continue
        if address.version == 4 and not address.is_loopback and not address.is_unspecified:
            found.add(word)
    return sorted(found)


def _listening(port: int) -> list[str]:
    """Local addresses of the sockets listening on ``port`` (from /proc/net/tcp and tcp6, as `ss -ltn`)."""
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, _, state = line.split()[1:4]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                addresses.append(address)
    return addresses


def test_emulator_listens_on_loopback_only(emulator: Emulator) -> None:
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5):
        pass  # reachable on loopback
    if Path("/proc/net/tcp").exists():
        assert _listening(emulator.port) == ["0100007F"]  # 127.0.0.1, IPv4 only
    addresses = _non_loopback_ipv4()
    if not addresses:
        pytest.skip("this machine has no non-loopback IPv4 address to try")
    for address in addresses:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address, emulator.port), timeout=5).close()
