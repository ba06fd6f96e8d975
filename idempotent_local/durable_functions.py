"""Lambda durable functions in the emulator, as AWS documents them (moto 5.2.5 has none of it).

- A function keeps its ``DurableConfig`` (``CreateFunction``, CloudFormation's ``AWS::Lambda::Function``)
  and returns it from ``GetFunction`` / ``GetFunctionConfiguration``; its versions have it too.
- ``Invoke`` of a durable function needs a qualified identifier (a version, an alias or ``$LATEST``) and
  starts a **durable execution** - named by ``DurableExecutionName`` (1-64 of ``[A-Za-z0-9_-]``), else by a
  generated id - pinned to the version it resolves to. An execution name is unique per account and region
  (the Developer Guide's "Idempotency" page; its API reference says "within the function": the emulator
  takes the wider scope, and the runtime refuses an execution of another function), and an execution keeps it
  while it exists (AWS: until the function's retention, 1-90 days after it closed, has passed; the emulator
  keeps it until the emulator is reset). The table of that page, row by row: a new name starts an
  execution; the name of a running or closed execution with the identical payload returns that execution
  (asynchronously: 202 and its ARN; synchronously: the run's result, waiting for a running one); another
  payload is ``DurableExecutionAlreadyStartedException`` (409), whatever the execution's state. A ``DryRun``
  invoke only validates (AWS: "validate parameter values and verify that the user or role has permission"):
  it starts nothing, so a later invoke with its name starts the execution.
- The function's handler runs **once per execution**, as the runner runs handlers (``worker.py``: the
  deployed code, the function's environment, one warm process per function version), with the durable
  invocation input (``DurableExecutionArn``, ``CheckpointToken``, ``InitialExecutionState`` whose EXECUTION
  operation holds the ``InputPayload``). Its output decides: ``{"Status": "SUCCEEDED", "Result"}``,
  ``{"Status": "FAILED", "Error"}``; ``PENDING`` (a wait or callback) leaves the execution RUNNING - the
  emulator does not resume it; an exception, a timeout or any other output fails the execution. The
  checkpoint APIs are not modelled: a handler built on the durable execution SDK fails at its first durable
  operation (a step, a wait), so local durable functions read the input themselves.
- ``GetDurableExecution`` (with its input when ``IncludeExecutionData``) and
  ``ListDurableExecutionsByFunction`` read the executions back; the latter, as in AWS, one version at a
  time: the ``Qualifier``'s (an alias: the version it points to), ``$LATEST``'s without one; its name
  filter keeps the names that contain it (filters: name, statuses). ``ListVersionsByFunction`` takes the
  function's ARN as well as its name (moto: a name only).

Installed by the named patch ``lambda-durable-executions`` of :mod:`idempotent_local.patches`.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from moto.awslambda import urls as lambda_urls
from moto.awslambda.exceptions import LambdaClientError
from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.awslambda.responses import LambdaResponse

from idempotent_local.emulator import Emulator
from idempotent_local.functions import Worker, environment, function_log_path, stop_all, unpack
from idempotent_local.names import STATE_DIR_VARIABLE

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
RUNNING, SUCCEEDED, FAILED = "RUNNING", "SUCCEEDED", "FAILED"
# How long a synchronous Invoke waits for a running execution it re-attaches to (Lambda: 15 minutes).
SYNC_WAIT_SECONDS = 900
_API = "2025-12-01"


def _error(error_type: str, status: int) -> Callable[[str], LambdaClientError]:
    """A Lambda error, answered with HTTP ``status`` and its ``error_type``: ``raise Error(message)``."""

    def __init__(self: LambdaClientError, message: str) -> None:
        LambdaClientError.__init__(self, error_type, message)

    return type(error_type, (LambdaClientError,), {"code": status, "__init__": __init__})


InvalidParameterValue = _error("InvalidParameterValueException", 400)
ResourceNotFound = _error("ResourceNotFoundException", 404)
DurableExecutionAlreadyStarted = _error("DurableExecutionAlreadyStartedException", 409)


@dataclass
class Execution:
    """One durable execution, as ``GetDurableExecution`` describes it."""

    arn: str
    name: str
    function_arn: str  # unqualified
    version: str
    payload: str
    started: float = field(default_factory=time.time)
    status: str = RUNNING
    ended: float | None = None
    result: str | None = None
    error: dict[str, Any] | None = None
    closed: threading.Event = field(default_factory=threading.Event)

    def describe(self, with_data: bool) -> dict[str, Any]:
        described: dict[str, Any] = {
            "DurableExecutionArn": self.arn,
            "DurableExecutionName": self.name,
            "FunctionArn": f"{self.function_arn}:{self.version}",
            "Status": self.status,
            "StartTimestamp": self.started,
            "Version": self.version,
            "ExecutionDataIncluded": with_data,
        }
        if self.ended is not None:
            described["EndTimestamp"] = self.ended
        if with_data:
            described["InputPayload"] = self.payload
            if self.result is not None:
                described["Result"] = self.result
            if self.error is not None:
                described["Error"] = self.error
        return described

    def summary(self) -> dict[str, Any]:
        return {
            k: v for k, v in self.describe(False).items() if k not in ("Version", "ExecutionDataIncluded")
        }

    def close(self, status: str, result: str | None = None, error: dict[str, Any] | None = None) -> None:
        self.status, self.result, self.error, self.ended = status, result, error, time.time()
        self.closed.set()


def executions(backend: LambdaBackend) -> dict[str, Execution]:
    """The executions of a Lambda backend (an account and region), by name: a reset backend has none."""
    return vars(backend).setdefault("_durable_executions", {})  # type: ignore[no-any-return]


# --- running handlers ---------------------------------------------------------------------------------


class Executor:
    """Runs each execution's handler once, in a warm worker per function version (one run at a time)."""

    def __init__(self) -> None:
        self.endpoint: str | None = None
        self._workers: dict[str, tuple[str, Worker]] = {}  # by function version: (deployment, worker)
        self._lock = threading.Lock()

    def base(self) -> Path:
        """The emulator's state directory (durable functions' code and logs go where ``local run`` keeps the
        event-source functions'); a temp directory for moto in a test process."""
        state = os.environ.get(STATE_DIR_VARIABLE)
        return Path(state) if state else Path(tempfile.gettempdir()) / "idempotent-local-durable"

    def worker(self, fn: LambdaFunction) -> Worker:
        """The worker of the version an execution is pinned to, with the function's environment as the runner
        gives it; a function deployed again (another code, environment or configuration) gets a new one."""
        version = f"{fn.function_arn}:{fn.version}"
        deployment = json.dumps([fn.code_sha_256, fn.last_modified, fn.environment_vars], sort_keys=True)
        with self._lock:
            known, worker = self._workers.get(version, (None, None))
            if known == deployment and worker is not None:
                return worker
            stop_all([worker] if worker is not None else [])
            base = self.base()
            sha = hashlib.sha256(fn.code_bytes).hexdigest()[:16]
            code_dir = unpack(fn.code_bytes, base / "durable-functions" / f"{fn.function_name}-{sha}")
            port = int(self.endpoint.rsplit(":", 1)[1]) if self.endpoint else 0
            emulator = Emulator(pid=os.getpid(), port=port, state_dir=str(base)) if port else None
            env = environment(emulator, fn.get_configuration(), code_dir, version)
            log = function_log_path(base, fn.function_name)
            worker = Worker(fn.function_name, code_dir, str(fn.handler), env, log)
            self._workers[version] = (deployment, worker)
            return worker

    def run(self, fn: LambdaFunction, execution: Execution) -> None:
        """Invoke the handler with the durable invocation input and close the execution by its output."""
        event = {
            "DurableExecutionArn": execution.arn,
            "CheckpointToken": uuid.uuid4().hex,
            "InitialExecutionState": {
                "Operations": [
                    {
                        "Id": uuid.uuid4().hex,
                        "Type": "EXECUTION",
                        "Status": "STARTED",
                        "StartTimestamp": execution.started,
                        "ExecutionDetails": {"InputPayload": execution.payload},
                    }
                ]
            },
        }
        try:
            worker = self.worker(fn)
            with worker.lock:
                reply = worker.invoke(event, float(fn.timeout or 3))
        except Exception as exc:  # the code cannot start here (a cold start that fails)
            reply = {"error": {"errorType": type(exc).__name__, "errorMessage": str(exc)}}
        _settle(execution, reply)

    def stop(self) -> None:
        with self._lock:
            stop_all([worker for _, worker in self._workers.values()])
            self._workers.clear()


def _settle(execution: Execution, reply: dict[str, Any]) -> None:
    output = reply.get("result")
    status = output.get("Status") if isinstance(output, dict) else None
    if status == SUCCEEDED:
        result = output.get("Result") if isinstance(output, dict) else None
        execution.close(SUCCEEDED, result=result if isinstance(result, str) else None)
    elif status == FAILED:
        error = output.get("Error") if isinstance(output, dict) else None
        execution.close(FAILED, error=error if isinstance(error, dict) else {})
    elif status == "PENDING":
        return  # suspended (a wait, a callback): the emulator does not resume it
    elif "error" in reply:
        error = reply["error"] or {}
        execution.close(
            FAILED,
            error={"ErrorType": error.get("errorType", "Error"), "ErrorMessage": error.get("errorMessage")},
        )
    else:
        why = "timed out" if "timeout" in reply else "exited" if "crash" in reply else "returned"
        execution.close(
            FAILED,
            error={
                "ErrorType": "Sandbox.Timedout" if "timeout" in reply else "InvalidDurableExecutionOutput",
                "ErrorMessage": f"the handler {why}"
                + (f" {json.dumps(output, default=str)[:200]}" if why == "returned" else "")
                + ", not a durable execution output (Status SUCCEEDED, FAILED or PENDING)",
            },
        )


EXECUTOR = Executor()
atexit.register(EXECUTOR.stop)


# --- the API ------------------------------------------------------------------------------------------


def _qualified(response: LambdaResponse, function: str) -> tuple[str, str | None]:
    """``(function name or ARN without a qualifier, qualifier)`` of an Invoke request."""
    qualifier = response.querystring.get("Qualifier", [None])[0]
    parts = function.split(":")
    if parts[0] == "arn" and len(parts) == 8:
        return ":".join(parts[:7]), qualifier or parts[7]
    if parts[0] != "arn" and len(parts) in (2, 4):
        return ":".join(parts[:-1]), qualifier or parts[-1]
    return function, qualifier


def invoke(self: LambdaResponse, original: Callable[[LambdaResponse], Any]) -> Any:
    function = unquote(self.path.rsplit("/", 2)[-2])
    unqualified, qualifier = _qualified(self, function)
    fn = self.backend.get_function(unqualified, qualifier)
    if getattr(fn, "durable_config", None) is None:
        return original(self)
    if qualifier is None:
        raise InvalidParameterValue(
            f"The function {unqualified} is a durable function: invoke it with a qualified identifier (a "
            "version, an alias or $LATEST)"
        )
    name = self.headers.get("X-Amz-Durable-Execution-Name")
    if name is not None and not NAME.fullmatch(name):
        raise InvalidParameterValue(
            f"1 validation error detected: Value '{name}' at 'durableExecutionName' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9-_]+ (length 1-64)"
        )
    kind = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
    if kind == "DryRun":  # AWS: a dry run only validates the parameters (and permissions): nothing starts
        return _answer(204, {"X-Amz-Executed-Version": str(fn.version)}, "")
    payload = self.body.decode("utf-8") if isinstance(self.body, bytes) else (self.body or "")
    execution, new = start(self.backend, fn, name, payload)
    headers = {"X-Amz-Durable-Execution-Arn": execution.arn, "X-Amz-Executed-Version": execution.version}
    if new:
        if kind == "Event":
            threading.Thread(target=EXECUTOR.run, args=(fn, execution), daemon=True).start()
        else:
            EXECUTOR.run(fn, execution)
    if kind == "Event":
        return _answer(202, headers, "")
    execution.closed.wait(SYNC_WAIT_SECONDS)
    if execution.status == FAILED:
        headers["X-Amz-Function-Error"] = "Unhandled"
        return _answer(200, headers, json.dumps(execution.error or {}))
    return _answer(200, headers, execution.result or "")


def _answer(status: int, headers: dict[str, str], body: str) -> tuple[int, dict[str, str], str]:
    return status, {**headers, "status": str(status)}, body  # moto answers with the "status" header's code


def start(
    backend: LambdaBackend, fn: LambdaFunction, name: str | None, payload: str
) -> tuple[Execution, bool]:
    """The execution ``name`` starts, or the one that holds it: ``(execution, started now)``."""
    store = executions(backend)
    with _STORE_LOCK:
        held = store.get(name) if name is not None else None
        if held is not None:
            if held.payload != payload:
                raise DurableExecutionAlreadyStarted(
                    f"A durable execution named {name} has already been started with a different payload."
                )
            return held, False
        name = name or str(uuid.uuid4())
        function_arn, version = _function_arn(fn), str(fn.version)
        store[name] = execution = Execution(
            arn=f"{function_arn}:{version}/durable-execution/{name}/{uuid.uuid4()}",
            name=name,
            function_arn=function_arn,
            version=version,
            payload=payload,
        )
        return execution, True


_STORE_LOCK = threading.Lock()


def _function_arn(fn: LambdaFunction) -> str:
    """The unqualified ARN of a function or of one of its versions."""
    return fn.function_arn.rsplit(":", 1)[0] if fn.function_arn.count(":") > 6 else fn.function_arn


def get_durable_execution(self: LambdaResponse) -> Any:
    arn = unquote(self.path.split("/durable-executions/", 1)[1])
    with_data = self.querystring.get("IncludeExecutionData", ["false"])[0].lower() == "true"
    for execution in executions(self.backend).values():
        if execution.arn == arn:
            return 200, {}, json.dumps(execution.describe(with_data))
    raise ResourceNotFound(f"Durable execution not found: {arn}")


def list_durable_executions_by_function(self: LambdaResponse) -> Any:
    """One version's executions, as AWS lists them: the qualifier's (a version, ``$LATEST`` or an alias,
    read as the version it points to), ``$LATEST``'s without one; the name filter keeps the names that
    contain it."""
    function = unquote(self.path.split("/functions/", 1)[1].rsplit("/durable-executions", 1)[0])
    unqualified, qualifier = _qualified(self, function)
    fn = self.backend.get_function(unqualified, qualifier or "$LATEST")
    function_arn, version = _function_arn(fn), str(fn.version)
    name = self.querystring.get("DurableExecutionName", [None])[0]
    statuses = set(self.querystring.get("Statuses", []))
    found = [
        e.summary()
        for e in executions(self.backend).values()
        if e.function_arn == function_arn
        and e.version == version
        and (name is None or name in e.name)
        and (not statuses or e.status in statuses)
    ]
    found.sort(key=lambda e: e["StartTimestamp"], reverse=True)
    return 200, {}, json.dumps({"DurableExecutions": found})


def list_versions_by_function(self: LambdaResponse) -> Any:
    """``ListVersionsByFunction`` by a function's name or ARN, as AWS takes either (moto: a name; an ARN
    lists no version) - how a dispatcher finds the version whose execution holds a name."""
    function = self.backend.get_function(unquote(self.path.split("/")[-2]))
    versions = self.backend.list_versions_by_function(function.function_name)
    return 200, {}, json.dumps({"Versions": [fn.get_configuration() for fn in versions]})


# --- the function's DurableConfig ---------------------------------------------------------------------


def keep_durable_config(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(
        self: LambdaFunction, account_id: str, spec: dict[str, Any], *args: Any, **kwargs: Any
    ) -> None:
        original(self, account_id, spec, *args, **kwargs)
        vars(self)["durable_config"] = spec.get("DurableConfig") or None

    return __init__


def configuration_with_durable_config(
    original: Callable[..., dict[str, Any]],
) -> Callable[..., dict[str, Any]]:
    def get_configuration(self: LambdaFunction, *args: Any, **kwargs: Any) -> dict[str, Any]:
        configuration = original(self, *args, **kwargs)
        durable = getattr(self, "durable_config", None)
        if durable is not None:
            configuration["DurableConfig"] = durable
        return configuration

    return get_configuration


def created_from_template(original: Any) -> Any:
    """CloudFormation's ``AWS::Lambda::Function``: moto passes a fixed list of properties on, without
    ``DurableConfig``."""
    function = original.__func__

    def create_from_cloudformation_json(
        cls: type, resource_name: str, cloudformation_json: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        fn = function(cls, resource_name, cloudformation_json, *args, **kwargs)
        durable = cloudformation_json.get("Properties", {}).get("DurableConfig")
        fn.durable_config = _numbers(durable) if durable else None
        return fn

    return classmethod(create_from_cloudformation_json)


def _numbers(durable: dict[str, Any]) -> dict[str, Any]:
    """A template's values are text: ExecutionTimeout and RetentionPeriodInDays are integers."""
    return {k: int(v) if k != "KMSKeyArn" and str(v).isdigit() else v for k, v in durable.items()}


def routes() -> None:
    """The durable execution API's paths, served by moto's Lambda responses."""
    for path in (
        rf"{{0}}/{_API}/durable-executions/(?P<durable_execution_arn>.+)$",
        rf"{{0}}/{_API}/functions/(?P<function_name>[^/]+)/durable-executions/?$",
    ):
        lambda_urls.url_paths.setdefault(path, LambdaResponse.dispatch)


def install(endpoint: str | None, replace: Callable[[Any, str, Callable[[Any], Any]], None]) -> None:
    """Teach moto durable functions (``replace`` is the patch registry's: applying again replaces)."""
    EXECUTOR.endpoint = endpoint
    routes()
    replace(LambdaFunction, "__init__", keep_durable_config)
    replace(LambdaFunction, "get_configuration", configuration_with_durable_config)
    replace(LambdaFunction, "create_from_cloudformation_json", created_from_template)
    replace(LambdaResponse, "invoke", lambda original: lambda self: invoke(self, original))
    replace(LambdaResponse, "get_durable_execution", lambda _: get_durable_execution)
    replace(
        LambdaResponse, "list_durable_executions_by_function", lambda _: list_durable_executions_by_function
    )
    replace(LambdaResponse, "list_versions_by_function", lambda _: list_versions_by_function)


__all__ = ["EXECUTOR", "STATE_DIR_VARIABLE", "Execution", "executions", "install"]
