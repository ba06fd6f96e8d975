"""The invoker: what Lambda does between a poller and a function (and what API Gateway's proxy integration
reaches, ``local request``). It reads each function's configuration and deployed zip back from the emulator,
starts one warm worker per function (:mod:`idempotent_local.functions`) with exactly the function's
environment, a fresh one after a redeploy, and invokes it with the function's timeout."""

from __future__ import annotations

import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from idempotent_local.emulator import Emulator
from idempotent_local.errors import RunnerError
from idempotent_local.functions import Worker, environment, function_log_path, stop_all, unpack
from idempotent_local.wheels import foreign, this_python


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


__all__ = ["Invoker"]
