"""Run the real CDK CLI against the emulator: bootstrap, deploy, destroy."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from idempotent_local.emulator import ACCOUNT_ID, REGION, Emulator

BOOTSTRAP_STACK = "CDKToolkit"
QUIET = {
    # The SDK inside the CLI prints a Node version warning of its own (jsii's: see quiet_environment).
    "AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE": "1",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
}


class CdkError(RuntimeError):
    """A CDK CLI command failed; the message names the command and where its output is."""


def find_cdk(app_dir: Path) -> list[str]:
    """The pinned CLI: ``node_modules/.bin/cdk`` in the app directory or a parent, else ``npx cdk``."""
    for directory in [app_dir, *app_dir.parents]:
        candidate = directory / "node_modules" / ".bin" / "cdk"
        if candidate.exists():
            return [str(candidate)]
    on_path = shutil.which("cdk")
    if on_path:
        return [on_path]
    return ["npx", "--no-install", "cdk"]


def _node_major() -> str:
    node = shutil.which("node")
    if not node:
        return ""
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().lstrip("v").split(".")[0]


def quiet_environment() -> dict[str, str]:
    """Variables that keep the CLI's output to what it says about the stack.

    Node 20 is end-of-life: jsii prints a banner on every start unless these name the running major version.
    """
    major = _node_major()
    return {
        **QUIET,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": major,
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": major,
    }


def cdk_environment(emulator: Emulator) -> dict[str, str]:
    env = emulator.client_environment()
    env.update(quiet_environment())
    # The app runs as `python3 app.py` (or similar): make it this interpreter, which has aws-cdk-lib.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
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
    ) -> None:
        self.emulator = emulator
        self.app_dir = Path(app_dir).resolve()
        if not (self.app_dir / "cdk.json").exists():
            raise CdkError(f"no cdk.json in the app directory: {self.app_dir}")
        self.output = Path(output).resolve() if output else None
        self.log_dir = Path(log_dir if log_dir is not None else emulator.state_dir).resolve()
        self.stream = stream
        self.command = find_cdk(self.app_dir)

    def _run(self, name: str, args: Sequence[str]) -> str:
        command = [*self.command, *args, "--no-notices"]
        if self.output is not None:
            command += ["--output", str(self.output)]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"cdk-{name}.log"
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
            tail = "".join(lines[-25:])
            raise CdkError(
                f"`cdk {' '.join(args)}` failed with exit code {process.returncode}; "
                f"full output in {log_path}\n"
                f"{tail}"
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

    def destroy(self, stacks: Sequence[str] = (), extra: Sequence[str] = ()) -> str:
        return self._run("destroy", ["destroy", *(stacks or ["--all"]), "--force", *extra])
