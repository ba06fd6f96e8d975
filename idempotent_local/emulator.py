"""The local cloud's core: the emulator's lifecycle, a moto server on loopback, and what a client needs to
reach it. It knows none of its services.

One emulator runs per state directory (default ``.local-cloud/`` in the working directory). It listens on
``127.0.0.1`` on a free port; clients use ``http://localhost:PORT`` (the CDK CLI and moto disagree about a
numeric host in a CloudFormation template URL). Its state file (``state.json``: pid, port, endpoint) exists
exactly while it runs, so ``deploy``, ``demo`` and ``destroy`` find and reuse it.

What the emulator does beyond plain moto comes from its services (the taught CloudFormation types, the named
patches, the control API: :mod:`idempotent_local.server` lists them). Each is a :class:`Service` that the
process serving the emulator hands to :func:`serve`, which installs them into moto (:func:`install`) before
the first request and again once the port is known. Names and fixed values are in
:mod:`idempotent_local.names`, the clock every service keeps time by in :mod:`idempotent_local.clock`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from idempotent_local.clock import CLOCK
from idempotent_local.errors import LocalCloudError
from idempotent_local.names import (
    ACCOUNT_ID,
    DEFAULT_STATE_DIR,
    FAKE_CREDENTIALS,
    LOG_FILE,
    OWNER_VARIABLE,
    REGION,
    STATE_DIR_VARIABLE,
    STATE_FILE,
)


class EmulatorError(LocalCloudError):
    """The emulator could not be started, reached or stopped."""


@dataclass(frozen=True)
class Emulator:
    """A running emulator, as recorded in its state file."""

    pid: int
    port: int
    state_dir: str

    @property
    def endpoint(self) -> str:
        return f"http://localhost:{self.port}"

    def client_environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a process that must talk to this emulator and nothing else."""
        env = dict(os.environ if base is None else base)
        for name in list(env):
            # A profile, session token or SSO setting would send the SDKs to a real account.
            if name.startswith("AWS_") and name not in ("AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE",):
                del env[name]
        missing = str(Path(self.state_dir, "no-aws-config").resolve())
        env.update(
            {
                **FAKE_CREDENTIALS,
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_CONFIG_FILE": missing,
                "AWS_SHARED_CREDENTIALS_FILE": missing,
                "AWS_EC2_METADATA_DISABLED": "true",
            }
        )
        return env

    def client(self, service: str) -> Any:
        """A boto3 client of ``service`` aimed at this emulator: one per service and endpoint in a process
        (a client is thread-safe; making one reads the service's model, about 0.1 s)."""
        return _client(self.endpoint, service)

    @property
    def control(self) -> Any:
        """The emulator's control API (:class:`idempotent_local.control.Control`): its inventory, and the
        clock a test moves ahead."""
        from idempotent_local.control import Control

        return Control(self.endpoint)

    def reset(self) -> None:
        """Forget every resource (``POST /moto-api/reset``); the server keeps running."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=10):
            pass


_CLIENTS: dict[tuple[str, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(endpoint: str, service: str) -> Any:
    """botocore's client (what boto3 returns, without importing boto3 and s3transfer: 0.1 s of a command
    that should answer within a second)."""
    with _CLIENTS_LOCK:  # a botocore session is not thread-safe; the clients it makes are
        if (endpoint, service) not in _CLIENTS:
            import botocore.session

            session = _CLIENTS.get(("", "session"))
            if session is None:
                session = _CLIENTS["", "session"] = botocore.session.get_session()
            _CLIENTS[endpoint, service] = session.create_client(
                service,
                region_name=REGION,
                endpoint_url=endpoint,
                aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            )
        return _CLIENTS[endpoint, service]


def _state_path(state_dir: Path | str) -> Path:
    return Path(state_dir) / STATE_FILE


def _recorded(state_dir: Path | str) -> dict[str, Any]:
    """What the state file says (pid, port); empty when there is none, or none that can be read."""
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(_state_path(state_dir).read_text())
        return found if isinstance(found, dict) else {}
    return {}


def _forget(state_dir: Path | str, pid: int) -> None:
    """Remove the state file if it still names ``pid`` (an emulator started since keeps its own)."""
    if _recorded(state_dir).get("pid") == pid:
        _state_path(state_dir).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of this process counts as gone.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def _responds(endpoint: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/config", timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def find(state_dir: Path | str = DEFAULT_STATE_DIR) -> Emulator | None:
    """The emulator recorded in ``state_dir`` if it is running and answering, else None."""
    data = _recorded(state_dir)
    if "pid" not in data or "port" not in data:
        return None
    emulator = Emulator(pid=int(data["pid"]), port=int(data["port"]), state_dir=str(Path(state_dir)))
    if _alive(emulator.pid) and _responds(emulator.endpoint):
        return emulator
    return None


def start(
    state_dir: Path | str = DEFAULT_STATE_DIR, *, timeout: float = 60.0, owner: int | None = None
) -> tuple[Emulator, bool]:
    """Start the emulator in the background, or reuse the one already running.

    Returns the emulator and whether this call started it. The process is detached (its own session), so it
    outlives the caller until :func:`stop` — or, with ``owner`` (else :data:`OWNER_VARIABLE` of the
    environment), until the process ``owner`` ends; its output goes to ``emulator.log`` in ``state_dir``.
    """
    state_dir = Path(state_dir)
    running = find(state_dir)
    if running is not None:
        return running, False
    state_dir.mkdir(parents=True, exist_ok=True)
    _state_path(state_dir).unlink(missing_ok=True)
    with open(state_dir / LOG_FILE, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "idempotent_local", "serve", "--state-dir", str(state_dir)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={
                **os.environ,
                "MOTO_ACCOUNT_ID": ACCOUNT_ID,
                **({OWNER_VARIABLE: str(owner)} if owner is not None else {}),
            },
        )
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise EmulatorError(
                    f"the emulator exited with code {process.returncode} at start; see {state_dir / LOG_FILE}"
                )
            emulator = find(state_dir)
            if emulator is not None and emulator.pid == process.pid:
                return emulator, True
            time.sleep(0.2)
        raise EmulatorError(f"the emulator did not answer within {timeout:.0f} s; see {state_dir / LOG_FILE}")
    except BaseException:
        # Ctrl-C (or a timeout) while waiting: the detached process would outlive the caller; end it here.
        end_process(process, 10)
        _forget(state_dir, process.pid)
        raise


def end_process(process: subprocess.Popen[Any], timeout: float) -> None:
    """Terminate ``process`` if it still runs, kill it after ``timeout`` seconds, and reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class Owner:
    """The process an emulator belongs to (:data:`OWNER_VARIABLE`), known by its pid and, where /proc
    says, its start time: a pid the system gives to another process later is not the owner."""

    pid: int
    started: str | None

    @staticmethod
    def _stat(pid: int) -> list[str] | None:
        """``/proc/PID/stat`` after the command name (state first), or None where there is none."""
        with contextlib.suppress(OSError, IndexError):
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None

    def alive(self) -> bool:
        if not _alive(self.pid):
            return False
        stat = self._stat(self.pid)
        if stat is None:  # no /proc: the pid answers
            return self.started is None
        return stat[0] != "Z" and stat[19] == self.started  # a zombie has ended; a new start time is another


def _owner() -> Owner | None:
    """This process's owner, from :data:`OWNER_VARIABLE` (None when unset); an owner already gone at start
    is one that ended."""
    try:
        pid = int(os.environ.get(OWNER_VARIABLE, ""))
    except ValueError:
        return None
    stat = Owner._stat(pid)
    return Owner(pid, stat[19] if stat else None)


def _command_line(pid: int) -> str | None:
    """The process's command line, or None where it cannot be read."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run(
            ["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        )
        return found.stdout if found.returncode == 0 else ""
    return None


def _serves(pid: int, port: int | None) -> bool:
    """Whether ``pid`` is an emulator (``... serve``), not a process that reused a stale state file's pid."""
    command = _command_line(pid)
    if command is None:  # no /proc and no ps: an emulator answers on its port
        return port is not None and _responds(f"http://localhost:{port}")
    return " serve" in command and ("idempotent_local" in command or "idempotent-pipeline" in command)


def stop(state_dir: Path | str = DEFAULT_STATE_DIR, *, timeout: float = 15.0) -> bool:
    """Stop the emulator recorded in ``state_dir``. Returns whether one was running.

    A state file left behind (a killed emulator, a reboot) may name a pid that another process has since
    taken: that process is left alone and the state file removed."""
    path, data = _state_path(state_dir), _recorded(state_dir)
    try:
        pid, port = int(data["pid"]), data.get("port")
    except (KeyError, ValueError, TypeError):
        return False
    if not _alive(pid) or not _serves(pid, port):
        path.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    path.unlink(missing_ok=True)
    return True


@dataclass(frozen=True)
class Service:
    """A part of the emulator that runs in its process: ``install(endpoint)`` changes this process's moto
    (called before the server serves its first request with None, and again with ``http://localhost:PORT``
    once the port is known: installing again replaces, never stacks). ``ages``: what moving the emulator's
    clock makes older for it, said by the command that moves it."""

    name: str
    install: Callable[[str | None], object]
    ages: tuple[str, ...] = ()


def install(services: Sequence[Service], endpoint: str | None = None) -> None:
    """Install ``services`` in order into this process's moto; the clock learns what they say it ages."""
    for service in services:
        service.install(endpoint)
    CLOCK.ages = tuple(aged for service in services for aged in service.ages)


def serve(
    state_dir: Path | str, services: Sequence[Service], *, port: int = 0, announce: bool = True
) -> None:
    """Run the emulator with ``services`` in this process until SIGTERM or Ctrl-C (the body of ``local
    serve``)."""
    from idempotent_local.extra import require_moto

    require_moto()
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("MOTO_ACCOUNT_ID", ACCOUNT_ID)
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    # Where the code that runs in this process's own workers lives (durable functions' handlers).
    os.environ[STATE_DIR_VARIABLE] = str(state_dir.resolve())
    install(services)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    _, bound_port = server.get_host_and_port()
    emulator = Emulator(pid=os.getpid(), port=int(bound_port), state_dir=str(state_dir))
    install(services, emulator.endpoint)

    stopping = threading.Event()
    owner = _owner()

    def _stop(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    path = _state_path(state_dir)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({**asdict(emulator), "endpoint": emulator.endpoint}))
    temporary.replace(path)
    if announce:
        print(f"emulator listening on {emulator.endpoint} (pid {emulator.pid}); Ctrl-C stops it", flush=True)
    try:
        while not stopping.wait(0.5):
            if owner is not None and not owner.alive():
                if announce:
                    print(f"the process {owner.pid} that owned the emulator ended", flush=True)
                break
    finally:
        _forget(state_dir, emulator.pid)
        server.stop()
        if announce:
            print("emulator stopped", flush=True)
