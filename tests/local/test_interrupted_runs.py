"""A test run that is interrupted leaves no emulator behind: a pytest process is killed (SIGKILL, as a timeout
does; SIGTERM; SIGINT, Ctrl-C) while its test holds two emulators — one it started itself, one a command it
ran started (as `local deploy` does, detached) — and both stop on their own, also when the test runs in an
xdist worker whose parent is killed (the suite runs on two workers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from idempotent_local import emulator as emulators
from idempotent_local.emulator import OWNER_VARIABLE

ROOT = Path(__file__).resolve().parents[2]

# A test that starts its two emulators, says so, and waits to be interrupted.
HELD = textwrap.dedent(
    """
    import subprocess
    import sys
    import time
    from pathlib import Path

    from idempotent_local import emulator as emulators

    STATE = Path({state!r})


    def test_holds_two_emulators():
        emulators.start(STATE / "direct")
        started = "from idempotent_local import emulator as e; e.start({detached!r})"
        subprocess.run([sys.executable, "-c", started], check=True)  # its own process, gone at once
        (STATE / "ready").write_text("ready")
        time.sleep(600)
    """
)


def _wait_for(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize(
    ("signum", "workers"),
    [(signal.SIGKILL, "0"), (signal.SIGTERM, "0"), (signal.SIGINT, "0"), (signal.SIGKILL, "2")],
    ids=["SIGKILL", "SIGTERM", "SIGINT", "SIGKILL-xdist"],  # xdist: the suite's workers, their parent killed
)
def test_the_emulators_of_an_interrupted_test_run_stop(
    tmp_path: Path, signum: signal.Signals, workers: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "test_held.py").write_text(HELD.format(state=str(state), detached=str(state / "detached")))
    env = {k: v for k, v in os.environ.items() if k != OWNER_VARIABLE}  # the inner run names itself
    # The suite's conftest as a plugin (the test file lies outside tests/): what every test process loads.
    inner = ["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "tests.conftest", "-n", workers]
    run = subprocess.Popen(
        [sys.executable, *inner, str(tmp_path / "test_held.py")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert _wait_for(lambda: (state / "ready").exists(), 120), "the inner test run did not start"
        held = [emulators.find(state / name) for name in ("direct", "detached")]
        assert all(held), held
        run.send_signal(signum)
        run.wait(60)  # reaped, as the shell or `timeout` that ran it would

        assert _wait_for(lambda: not any(emulators._alive(e.pid) for e in held if e), 30), (
            f"emulators still running after the test run (-n {workers}) got {signum.name}: {held}"
        )
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for name in ("direct", "detached"):
            emulators.stop(state / name)
