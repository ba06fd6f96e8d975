"""One execution environment of a deployed function: a Python process that imports the handler once.

Started by the runner as ``python worker.py CODE_DIR HANDLER`` with the function's environment (the
configuration read back from the emulator, plus Lambda's reserved variables and the emulator endpoint).
The code directory comes first on ``sys.path``, like ``/var/task`` in Lambda, so the deployed copy of the
code is what runs. Requests arrive as JSON lines on stdin (``{"event": ..., "timeout_ms": ...,
"request_id": ...}``);
replies leave as JSON lines on the original stdout (``{"result": ...}`` or ``{"error": ...}``), while
everything the function prints goes to stderr: the function's log, like CloudWatch Logs.

This file imports nothing from the project: it runs beside the function's code, not the package's.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
import traceback
import uuid
from typing import TextIO


class Context:
    """The parts of Lambda's context object handlers use."""

    def __init__(self, timeout_ms: int, request_id: str = "") -> None:
        self._deadline = time.monotonic() + timeout_ms / 1000
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = os.environ.get("LOCAL_CLOUD_FUNCTION_ARN", "")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.aws_request_id = request_id or str(uuid.uuid4())
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class _Tee:
    """The function's ``sys.stdout``: writes through, and keeps the JSON lines the runner counts."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._partial = ""
        self.kept: list[dict[str, object]] = []

    def write(self, text: str) -> int:
        self._stream.write(text)
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            if line.startswith("{") and ('"_aws"' in line or '"outcome"' in line):
                try:
                    document = json.loads(line)
                except ValueError:
                    continue
                if isinstance(document, dict):
                    self.kept.append(document)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def take(self) -> list[dict[str, object]]:
        kept, self.kept = self.kept, []
        return kept

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _error(exc: BaseException) -> dict[str, object]:
    return {
        "errorType": type(exc).__name__,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_exception(type(exc), exc, exc.__traceback__),
    }


def main(code_dir: str, handler_name: str) -> int:
    # Ctrl-C in the terminal reaches the whole process group: the runner decides when its workers stop
    # (an invocation finishes, then the worker is terminated), not the keyboard.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the function's prints and logs go to stderr
    stdout = _Tee(os.fdopen(1, "w", buffering=1, closefd=False))
    sys.stdout = stdout  # type: ignore[assignment]
    sys.path[0] = code_dir  # replaces this file's directory
    os.chdir(code_dir)
    module_name, _, function_name = handler_name.rpartition(".")
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
    except BaseException as exc:  # the cold start failed: report it and stop, as Lambda does
        replies.write(json.dumps({"init_error": _error(exc)}) + "\n")
        return 1
    replies.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            context = Context(int(request["timeout_ms"]), str(request.get("request_id") or ""))
            result = handler(request["event"], context)
            reply: dict[str, object] = {"result": result}
        except Exception as exc:
            reply = {"error": _error(exc)}
        sys.stdout.flush()
        reply["logs"] = stdout.take()
        replies.write(json.dumps(reply, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
