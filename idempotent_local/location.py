"""Which app a command is about, and where that app's emulator keeps its state.

An emulator belongs to one CDK app: its state (``state.json``, logs, the deployed functions' code) lives in
``<app dir>/.local-cloud/``. The app directory is ``--app-dir``, else the nearest directory holding a
``cdk.json``, from the working directory up (as git finds ``.git``), so a command run anywhere inside the
app reaches the same emulator, and a command run outside every app refuses instead of starting a second one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from idempotent_local.errors import LocalCloudError
from idempotent_local.names import DEFAULT_STATE_DIR

STATE_DIR_NAME = DEFAULT_STATE_DIR.name  # .local-cloud
APP_FILE = "cdk.json"


class NoApp(LocalCloudError):
    """No CDK app directory where the command was run; the message says how to name one."""


@dataclass(frozen=True)
class Location:
    app_dir: Path | None  # None only when --state-dir named the state without an app
    state_dir: Path

    def describe(self) -> str:
        return str(self.app_dir) if self.app_dir is not None else str(self.state_dir)


def find_app_dir(start: Path) -> Path | None:
    for directory in [start, *start.parents]:
        if (directory / APP_FILE).is_file():
            return directory
    return None


def _emulators_below(directory: Path) -> list[Path]:
    """App directories one level below ``directory`` whose emulator state file exists."""
    found = []
    try:
        children = sorted(p for p in directory.iterdir() if p.is_dir())
    except OSError:
        return []
    for child in children:
        state = child / STATE_DIR_NAME / "state.json"
        try:
            json.loads(state.read_text())
        except (OSError, ValueError):
            continue
        found.append(child)
    return found


def locate(app_dir: str | None = None, state_dir: str | None = None, *, cwd: Path | None = None) -> Location:
    """The app and state directory of a command (absolute paths); raises :class:`NoApp` if there is none."""
    here = (cwd or Path(os.getcwd())).resolve()
    if app_dir is not None:
        app = Path(app_dir).expanduser().resolve()
        if not (app / APP_FILE).is_file():
            raise NoApp(f"no cdk.json in the app directory: {app}")
    else:
        app = find_app_dir(here)  # type: ignore[assignment]
    if state_dir is not None:
        return Location(app, Path(state_dir).expanduser().resolve())
    if app is None:
        message = (
            f"no CDK app here: neither {here} nor a parent directory holds a cdk.json. Run the command in "
            "your app's directory, or name it with --app-dir DIR."
        )
        below = _emulators_below(here)
        if below:
            names = ", ".join(str(p) for p in below)
            message += f" Emulator state found for: {names} (e.g. --app-dir {below[0].name})."
        raise NoApp(message)
    return Location(app, app / STATE_DIR_NAME)
