"""A deployed function's execution environment, as Lambda gives one: its code unpacked in a directory, the
function's environment with Lambda's reserved variables, and a warm worker process (``worker.py``) that
imported the code once and runs one invocation at a time, writing the function's log. Durable functions
(:mod:`idempotent_local.durable_functions`) run handlers through it, and so does the :class:`Invoker`: what
Lambda does between an event source mapping's poller and a function (and what API Gateway's proxy
integration reaches, ``local request``), reading each function's configuration and deployed zip back from
the emulator, one warm worker per function, a fresh one after a redeploy."""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
import zipfile
from pathlib import Path
from typing import Any

from idempotent_local.emulator import Emulator, end_process
from idempotent_local.errors import RunnerError
from idempotent_local.node import quiet_environment
from idempotent_local.wheels import foreign, this_python

WORKER = Path(__file__).with_name("worker.py")


def function_log_path(state_dir: str | Path, function: str) -> Path:
    """Where the runner appends what ``function`` prints: its log, as CloudWatch Logs would hold it."""
    return Path(state_dir).resolve() / "logs" / f"{function}.log"


def unpack(code: bytes, code_dir: Path) -> Path:
    """The deployed zip ``code`` in ``code_dir`` (kept once there: a directory is only ever complete)."""
    if not code_dir.exists():
        staging = code_dir.with_name(f"{code_dir.name}.{uuid.uuid4().hex}.partial")
        with zipfile.ZipFile(io.BytesIO(code)) as archive:
            archive.extractall(staging)
        staging.replace(code_dir)
    return code_dir


def environment(
    emulator: Emulator | None, configuration: dict[str, Any], code_dir: Path, function_arn: str
) -> dict[str, str]:
    """A worker's environment: the emulator's endpoint and fake credentials (none without ``emulator``), the
    function's own variables, and Lambda's reserved ones, from ``configuration`` as
    ``GetFunctionConfiguration`` gives it."""
    path = os.environ.get("PATH", "")
    base = {"PATH": path, "LANG": "C.UTF-8"}
    env = emulator.client_environment(base=base) if emulator is not None else base
    env.update(quiet_environment(path))
    env.update((configuration.get("Environment") or {}).get("Variables") or {})
    name = configuration["FunctionName"]
    env.update(
        {
            "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_VERSION": str(configuration.get("Version", "$LATEST")),
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(configuration.get("MemorySize", 128)),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "local-cloud",
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{configuration.get('Runtime') or 'python'}",
            "LAMBDA_TASK_ROOT": str(code_dir),
            "_HANDLER": str(configuration["Handler"]),
            "LOCAL_CLOUD_FUNCTION_ARN": function_arn,
            "LOCAL_CLOUD_CODE_SHA256": str(configuration.get("CodeSha256", "")),
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


class Worker:
    """A warm execution environment of one function (a subprocess, see ``worker.py``). One invocation at a
    time: a second mapping of the same function waits for the first, as a function with one environment
    would."""

    def __init__(self, name: str, code_dir: Path, handler: str, env: dict[str, str], log_path: Path) -> None:
        self.name, self.code_dir, self.handler, self.env = name, code_dir, handler, env
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None
        self.lock = threading.Lock()
        self._log_thread: threading.Thread | None = None

    def _pump_log(self, stream: io.TextIOBase) -> None:
        with open(self.log_path, "a") as log:
            for line in stream:
                log.write(line)
                log.flush()

    def start(self, abandon: threading.Event | None = None) -> None:
        """Start the worker and wait for its cold start (60 s at most, or until ``abandon`` is set)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(self.code_dir), self.handler],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.code_dir,
        )
        assert self.process.stderr is not None
        self._log_thread = threading.Thread(target=self._pump_log, args=(self.process.stderr,), daemon=True)
        self._log_thread.start()
        reply = self._read(timeout=60, abandon=abandon)
        if reply is None or "init_error" in reply:
            error = (reply or {}).get("init_error", {"errorMessage": "no answer within 60 s"})
            self.stop()
            raise RunnerError(
                f"function {self.name} failed its cold start: {error.get('errorType', 'Error')}: "
                f"{error.get('errorMessage')} (log: {self.log_path})"
            )

    def _read(self, timeout: float, abandon: threading.Event | None = None) -> dict[str, Any] | None:
        """The worker's next reply; None after ``timeout`` seconds, at its exit, or once ``abandon`` is
        set."""
        assert self.process is not None and self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (abandon is not None and abandon.is_set()):
                return None
            ready, _, _ = select.select([self.process.stdout], [], [], min(left, 0.2))
            if ready:
                break
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def invoke(self, event: dict[str, Any], timeout_s: float, request_id: str = "") -> dict[str, Any]:
        """``{"result": ...}``, ``{"error": ...}`` or ``{"timeout": True}`` / ``{"crash": ...}``; a reply of
        the worker also has ``"logs"`` (the EMF and outcome lines the function wrote meanwhile).
        ``request_id`` is the context's ``aws_request_id`` (a new one when empty)."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        assert self.process is not None and self.process.stdin is not None
        request = {"event": event, "timeout_ms": int(timeout_s * 1000), "request_id": request_id}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = self._read(timeout=timeout_s + 1)
        if reply is None:
            crashed = self.process.poll() is not None
            self.stop()
            return {"crash": "the worker exited"} if crashed else {"timeout": True}
        return reply

    def stop(self) -> None:
        if self.process is not None:
            end_process(self.process, 5)
            for stream in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()  # type: ignore[union-attr]
            self.process = None
        if self._log_thread is not None:
            self._log_thread.join(5)
            self._log_thread = None


def stop_all(workers: list[Worker]) -> None:
    """Stop each worker once its invocation in flight (if any) has finished."""
    for worker in workers:
        with worker.lock:
            worker.stop()


class Invoker:
    """The warm workers of the emulator's functions, by function ARN; code unpacked under ``work_dir``."""

    def __init__(self, emulator: Emulator, work_dir: Path) -> None:
        self.emulator, self.work_dir = emulator, work_dir
        self.workers: dict[str, Worker] = {}
        self._timeouts: dict[str, float] = {}
        self._lock = threading.Lock()

    def _download(self, location: str) -> bytes:
        parsed = urllib.parse.urlparse(location)
        served = f"{parsed.scheme}://{parsed.netloc}" == self.emulator.endpoint
        if served and not parsed.path.startswith("/moto-api/"):  # a bucket's object, not the control API's
            bucket, _, key = parsed.path.lstrip("/").partition("/")
            s3 = self.emulator.client("s3")
            return bytes(s3.get_object(Bucket=bucket, Key=urllib.parse.unquote(key))["Body"].read())
        with urllib.request.urlopen(location, timeout=30) as response:
            return bytes(response.read())

    def _prepared(self, function_arn: str) -> Worker:
        """The function's worker, a new one when its code changed (under the lock)."""
        lambda_ = self.emulator.client("lambda")
        worker = self.workers.get(function_arn)
        configuration = lambda_.get_function_configuration(FunctionName=function_arn)
        sha = configuration.get("CodeSha256", "")
        if worker is not None and worker.env.get("LOCAL_CLOUD_CODE_SHA256") == sha:
            return worker
        if worker is not None:
            stop_all([worker])
        name = configuration["FunctionName"]
        code_dir = self.work_dir / f"{name}-{sha.replace('/', '_').replace('+', '-')[:16]}"
        if not code_dir.exists():
            location = lambda_.get_function(FunctionName=function_arn).get("Code", {})
            if not location.get("Location"):
                raise RunnerError(f"function {name} has no downloadable code: {location}")
            unpack(self._download(location["Location"]), code_dir)
        mismatched = foreign(code_dir)
        if mismatched:
            raise RunnerError(
                f"function {name} cannot run on this machine: its code holds {'; '.join(mismatched)}, "
                f"which {this_python()} (the Python `local run` uses) cannot import: its requirements were "
                "installed for the function's runtime in AWS. Redeploy with `idempotent-pipeline local "
                "deploy`, which installs them for this Python; the function's messages wait in the queue "
                "until then"
            )
        env = environment(self.emulator, configuration, code_dir, function_arn)
        log = function_log_path(self.emulator.state_dir, name)
        worker = self.workers[function_arn] = Worker(name, code_dir, configuration["Handler"], env, log)
        self._timeouts[function_arn] = float(configuration.get("Timeout", 3))
        return worker

    def worker(self, function_arn: str, abandon: threading.Event | None = None) -> Worker:
        """The function's worker, started: a function that cannot start here (code bundled for another
        Python, a failing cold start) raises :class:`RunnerError`, and so does a cold start abandoned once
        ``abandon`` is set."""
        with self._lock:
            worker = self._prepared(function_arn)
        with worker.lock:
            if worker.process is None:
                worker.start(abandon)
        return worker

    def invoke(
        self, worker: Worker, function_arn: str, event: dict[str, Any], request_id: str = ""
    ) -> tuple[dict[str, Any], RunnerError | None]:
        """The worker's reply, and the error of a worker that died and could not start again (its reply
        then says so: the batch failed)."""
        try:
            with worker.lock:
                return worker.invoke(event, self._timeouts[function_arn], request_id), None
        except RunnerError as exc:
            return {"cold_start": str(exc)}, exc

    def close(self) -> None:
        """Stop every worker (an invocation in flight finishes first, within the function's timeout)."""
        with self._lock:
            stop_all(list(self.workers.values()))
            self.workers.clear()


__all__ = ["WORKER", "Invoker", "Worker", "environment", "function_log_path", "stop_all", "unpack"]
