"""Run the pinned CDK CLI against the emulator: bootstrap, deploy, diff, destroy.

The npm ``latest`` of the CDK CLI (3.x) cannot read the cloud assembly of aws-cdk-lib 2.x, so the tool runs
exactly :data:`CDK_CLI_VERSION` (the one ``package.json`` pins). It is found, in order:

1. in the app's own ``node_modules/.bin/cdk`` (or a parent directory's): the app pins its CLI;
2. in the tool's cache, ``$IDEMPOTENT_PIPELINE_CACHE_DIR`` or ``~/.cache/idempotent-pipeline``
   (``$XDG_CACHE_HOME`` respected), as ``cdk-<version>/node_modules/.bin/cdk``;
3. installed there on first use (``npm install --prefix``, non-interactive);
4. else ``npx --yes aws-cdk@<version>``, if that runs.

When none works, :class:`CdkError` names the command that fixes it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from idempotent_local.emulator import Emulator
from idempotent_local.errors import LocalCloudError
from idempotent_local.names import ACCOUNT_ID, REGION
from idempotent_local.node import quiet_environment

# The CDK CLI the tool runs; package.json (the reference app's) and the init template pin the same.
CDK_CLI_VERSION = "2.1148.1"
CDK_CLI_PACKAGE = f"aws-cdk@{CDK_CLI_VERSION}"
CACHE_ENV = "IDEMPOTENT_PIPELINE_CACHE_DIR"
BOOTSTRAP_STACK = "CDKToolkit"
# The variable idempotent_pipeline._asset reads: a local deploy installs the function's requirements for the
# Python that `local run` runs it with (this one), not for the function's runtime in AWS.
LOCAL_PYTHON_VARIABLE = "IDEMPOTENT_PIPELINE_LOCAL_PYTHON"


class CdkError(LocalCloudError):
    """A CDK CLI command failed, or the CLI cannot be found; the message says what to do."""


def cache_dir() -> Path:
    """Where the tool keeps what it installs for itself (the pinned CDK CLI)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "idempotent-pipeline"


def cached_cli_dir() -> Path:
    return cache_dir() / f"cdk-{CDK_CLI_VERSION}"


def install_command(prefix: Path | None = None) -> list[str]:
    """The npm command that installs the pinned CLI into the cache (or ``prefix``)."""
    target = prefix if prefix is not None else cached_cli_dir()
    return [
        "npm",
        "install",
        "--prefix",
        str(target),
        "--no-audit",
        "--no-fund",
        "--no-save",
        "--loglevel=error",
        CDK_CLI_PACKAGE,
    ]


def _run_quietly(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **quiet_environment()}
    return subprocess.run(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )


def _install_into_cache(announce: Callable[[str], None]) -> tuple[Path | None, str]:
    """Install the pinned CLI into the cache; returns its ``cdk`` (None on failure) and npm's complaint."""
    npm = shutil.which("npm")
    if npm is None:
        return None, "npm is not on PATH"
    target = cached_cli_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    announce(f"installing the CDK CLI {CDK_CLI_PACKAGE} into {target} (first use only)")
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    try:
        result = _run_quietly([npm, *install_command(staging)[1:]])
        installed = staging / "node_modules" / ".bin" / "cdk"
        if result.returncode != 0 or not installed.exists():
            complaint = (result.stderr or result.stdout).strip()[-2000:]
            return None, complaint or f"npm exit code {result.returncode}"
        try:
            staging.rename(target)
        except OSError:
            if not (target / "node_modules" / ".bin" / "cdk").exists():  # another process won the race
                raise
        return target / "node_modules" / ".bin" / "cdk", ""
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def find_cdk(app_dir: Path, announce: Callable[[str], None] = lambda text: None) -> list[str]:
    """The command that runs the pinned CDK CLI for ``app_dir`` (see the module docstring for the order)."""
    for directory in [app_dir, *app_dir.parents]:
        if (own := directory / "node_modules" / ".bin" / "cdk").exists():
            return [str(own)]
    cached = cached_cli_dir() / "node_modules" / ".bin" / "cdk"
    if cached.exists():
        return [str(cached)]
    if shutil.which("node") is None:
        raise CdkError(
            "the CDK CLI needs Node.js (18 or newer), and `node` is not on PATH. Install Node.js, then run:\n"
            f"    {' '.join(install_command())}"
        )
    installed, complaint = _install_into_cache(announce)
    if installed is not None:
        return [str(installed)]
    npx = shutil.which("npx")
    if npx is not None:
        check = _run_quietly([npx, "--yes", CDK_CLI_PACKAGE, "--version"], cwd=app_dir)
        if check.returncode == 0 and check.stdout.strip().startswith(CDK_CLI_VERSION):
            return [npx, "--yes", CDK_CLI_PACKAGE]
    raise CdkError(
        f"cannot install the CDK CLI {CDK_CLI_PACKAGE} into {cached_cli_dir()} ({complaint}). "
        "With access to the npm registry, either of these fixes it:\n"
        f"    {' '.join(install_command())}\n"
        f"    cd {app_dir} && npm install          # if the app's package.json pins aws-cdk"
    )


# The last line of a Python traceback: `package.module.ConfigurationError: the message`.
_RAISED = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception)): (.+)$")


def _failure(command: str, code: int, lines: list[str], log_path: Path, streamed: bool) -> str:
    """What a failed CDK command says: the app's own error first when its synth raised one (the message of a
    ConfigurationError names the option and the value), the traceback only in the log (or with -v)."""
    raised = [match for line in lines if (match := _RAISED.match(line.rstrip()))]
    if raised:
        name, message = raised[-1].groups()
        where = "above" if streamed else f"in {log_path} (or run again with -v)"
        return (
            f"the app failed in `{command}`: {name}: {message}\nthe traceback and the CLI's output: {where}"
        )
    tail = "" if streamed else "".join(lines[-25:])
    return f"`{command}` failed with exit code {code}; full output in {log_path}\n{tail}"


# A warning of the app's synth, as CDK CLIs print it: `[Warning at /PATH] MESSAGE` (the classic line), or a
# validation report's `WARNING MESSAGE (Construct Annotations)` followed by the construct's path and how to
# acknowledge it, indented.
_CLASSIC_WARNING = re.compile(r"^\[Warning at /?(?P<path>[^\]]*)\] (?P<message>.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def synth_warnings(output: str) -> list[str]:
    """The synth's warnings in a CDK command's output, each once, as ``PATH: MESSAGE``."""
    lines = [_ANSI.sub("", line).rstrip() for line in output.splitlines()]
    found = []
    for at, line in enumerate(lines):
        classic = _CLASSIC_WARNING.match(line)
        if classic:
            found.append(f"{classic['path']}: {classic['message']}")
        elif line.startswith("WARNING "):
            details = []
            for detail in lines[at + 1 :]:
                if not detail.startswith("   "):
                    break
                details.append(detail.strip())
            message = line.removeprefix("WARNING ").removesuffix(" (Construct Annotations)")
            how = [d[0].lower() + d[1:] for d in details[1:] if d.startswith("Acknowledge")]
            found.append(f"{details[0] if details else '?'}: {message}" + "".join(f" ({h})" for h in how))
    return list(dict.fromkeys(found))


def cdk_environment(emulator: Emulator) -> dict[str, str]:
    env = emulator.client_environment()
    # The app runs as `python3 app.py` (or similar): make it this interpreter, which has aws-cdk-lib.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env[LOCAL_PYTHON_VARIABLE] = sys.executable
    env.update(quiet_environment(env["PATH"]))
    return env


class Cdk:
    """The CDK CLI for one app directory (the one holding ``cdk.json``), aimed at one emulator."""

    def __init__(
        self,
        emulator: Emulator,
        app_dir: Path | str = ".",
        *,
        output: Path | str | None = None,
        log_dir: Path | str | None = None,
        stream: bool = False,
        announce: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.emulator = emulator
        self.app_dir = Path(app_dir).resolve()
        if not (self.app_dir / "cdk.json").exists():
            raise CdkError(f"no cdk.json in the app directory: {self.app_dir}")
        self.output = Path(output).resolve() if output else None
        self.log_dir = Path(log_dir if log_dir is not None else emulator.state_dir).resolve()
        self.stream = stream
        self.announce = announce
        self._command: list[str] | None = None

    @property
    def command(self) -> list[str]:
        if self._command is None:
            self._command = find_cdk(self.app_dir, self.announce)
        return self._command

    def log_path(self, name: str) -> Path:
        """Where the CLI's output of the command ``name`` (``deploy``, ``diff``, ...) is kept."""
        return self.log_dir / f"cdk-{name}.log"

    def _run(self, name: str, args: Sequence[str]) -> str:
        command = [*self.command, *args, "--no-notices"]
        if self.output is not None:
            command += ["--output", str(self.output)]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_path(name)
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                command,
                cwd=self.app_dir,
                env=cdk_environment(self.emulator),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert process.stdout is not None
            lines = []
            try:
                for line in process.stdout:
                    log.write(line)
                    lines.append(line)
                    if self.stream:
                        sys.stdout.write("    " + line)
                process.wait()
            except BaseException:
                process.terminate()
                process.wait()
                raise
        output = "".join(lines)
        if process.returncode == -signal.SIGINT:
            raise KeyboardInterrupt  # Ctrl-C reached the CLI first (same process group)
        if process.returncode != 0:
            raise CdkError(
                _failure(f"cdk {' '.join(args)}", process.returncode, lines, log_path, self.stream)
            )
        return output

    def is_bootstrapped(self) -> bool:
        cloudformation = self.emulator.client("cloudformation")
        try:
            stacks = cloudformation.describe_stacks(StackName=BOOTSTRAP_STACK)["Stacks"]
        except cloudformation.exceptions.ClientError:
            return False
        return any(
            s["StackStatus"].endswith("_COMPLETE") and "DELETE" not in s["StackStatus"] for s in stacks
        )

    def bootstrap(self) -> str:
        return self._run("bootstrap", ["bootstrap", f"aws://{ACCOUNT_ID}/{REGION}"])

    def deploy(self, stacks: Sequence[str] = (), extra: Sequence[str] = ()) -> str:
        return self._run("deploy", ["deploy", *(stacks or ["--all"]), "--require-approval", "never", *extra])

    def diff(self, stacks: Sequence[str] = (), extra: Sequence[str] = ()) -> str:
        """``cdk diff`` against what is deployed in the emulator. Differences are its output, not a failure
        (``--fail-on never``), so any other exit code (a synth that fails) raises :class:`CdkError`."""
        return self._run("diff", ["diff", *stacks, "--fail-on", "never", *extra])

    def destroy(self, stacks: Sequence[str] = (), extra: Sequence[str] = ()) -> str:
        return self._run("destroy", ["destroy", *(stacks or ["--all"]), "--force", *extra])
