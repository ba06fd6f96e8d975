"""An emulator belongs to one app: its state lives in <app dir>/.local-cloud/, found from anywhere inside the
app, and a command run outside every app refuses instead of starting a second emulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from idempotent_cli.main import main
from idempotent_local import emulator as emulators
from idempotent_local.cdk import Cdk
from idempotent_local.location import NoApp, locate


@pytest.fixture
def app(tmp_path: Path) -> Path:
    directory = tmp_path / "shop"
    (directory / "src" / "deep").mkdir(parents=True)
    (directory / "cdk.json").write_text('{"app": "python3 app.py"}')
    return directory


@pytest.fixture
def running(app: Path) -> Iterator[emulators.Emulator]:
    emulator, started = emulators.start(app / ".local-cloud")
    assert started
    yield emulator
    emulators.stop(app / ".local-cloud")


def test_the_state_lives_in_the_app_found_from_any_directory_inside_it(app: Path) -> None:
    for here in (app, app / "src", app / "src" / "deep"):
        location = locate(cwd=here)
        assert (location.app_dir, location.state_dir) == (app, app / ".local-cloud")
    assert locate(app_dir=str(app), cwd=Path("/")).state_dir == app / ".local-cloud"


def test_outside_every_app_the_command_refuses_and_names_the_emulators_below(
    app: Path, running: emulators.Emulator
) -> None:
    with pytest.raises(NoApp) as refused:
        locate(cwd=app.parent)
    message = str(refused.value)
    assert f"neither {app.parent} nor a parent directory holds a cdk.json" in message
    assert "--app-dir DIR" in message
    assert f"Emulator state found for: {app} (e.g. --app-dir shop)" in message


def test_status_from_a_subdirectory_reaches_the_apps_emulator(
    app: Path, running: emulators.Emulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(app / "src" / "deep")
    assert main(["local", "status"]) == 0
    out = capsys.readouterr().out
    assert f"emulator: {running.endpoint} (pid {running.pid}) for {app}" in out
    assert f"state:    {app / '.local-cloud'}/" in out

    monkeypatch.chdir(app.parent)
    assert main(["local", "status"]) == 1
    assert "no CDK app here" in capsys.readouterr().err
    assert main(["local", "status", "--app-dir", "shop"]) == 0


def test_deploy_from_elsewhere_in_the_app_reuses_its_emulator(
    app: Path, running: emulators.Emulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(Cdk, "is_bootstrapped", lambda self: True)
    monkeypatch.setattr(Cdk, "deploy", lambda self, *args: "")
    monkeypatch.chdir(app / "src")
    assert main(["local", "deploy"]) == 0
    out = capsys.readouterr().out
    assert f"reused on {running.endpoint}, pid {running.pid}, state in {app / '.local-cloud'}/" in out
    assert not (app / "src" / ".local-cloud").exists()
    # An own app is pointed at the command line, never at make targets.
    assert "make" not in out
    assert "idempotent-pipeline local run" in out and "idempotent-pipeline local destroy" in out


def test_a_second_emulator_for_the_same_app_is_refused(
    app: Path, running: emulators.Emulator, capsys: pytest.CaptureFixture
) -> None:
    assert main(["local", "serve", "--app-dir", str(app)]) == 1
    assert f"an emulator is already running for {app}: {running.endpoint}" in capsys.readouterr().err
    assert emulators.find(app / ".local-cloud") == running


def test_run_by_make_the_hints_are_the_apps_make_targets(
    app: Path, running: emulators.Emulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(Cdk, "is_bootstrapped", lambda self: True)
    monkeypatch.setattr(Cdk, "deploy", lambda self, *args: "")
    monkeypatch.setenv("MAKELEVEL", "1")
    (app / "Makefile").write_text("deploy:\n\ttrue\ndestroy:\n\ttrue\n")
    assert main(["local", "deploy", "--app-dir", str(app)]) == 0
    out = capsys.readouterr().out
    assert "    make destroy" in out
    assert "make run" not in out  # not a target of this Makefile: the command line instead
