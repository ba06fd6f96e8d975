"""One JSON log line per record, and one CloudWatch Embedded Metric Format line per batch (no dependency)."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO

_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}
# The four counters of a batch; together they add up to the batch size.
METRICS = ("processed", "duplicates", "failed", "quarantined")


class Log:
    """JSON lines to stdout (Lambda forwards stdout to CloudWatch Logs), one write per line, thread-safe."""

    def __init__(self, level: str, function_name: str, stream: TextIO | None = None) -> None:
        self.threshold = _LEVELS[level]
        self.function_name = function_name
        self._stream = stream
        self._lock = threading.Lock()

    def enabled(self, level: str) -> bool:
        return _LEVELS[level] >= self.threshold

    def emit(self, level: str, message: str, **fields: Any) -> None:
        if _LEVELS[level] < self.threshold:
            return
        line = {
            "level": level,
            "timestamp": round(time.time(), 3),
            "function": self.function_name,
            "message": message,
        }
        line.update(fields)
        self.write(json.dumps(line, default=str, separators=(",", ":")))

    def write(self, line: str) -> None:
        stream = self._stream or sys.stdout
        with self._lock:
            stream.write(line + "\n")

    def flush(self) -> None:
        stream = self._stream or sys.stdout
        with self._lock:
            stream.flush()


def emf_line(
    namespace: str, function_name: str, counts: dict[str, int], timestamp_ms: int | None = None
) -> str:
    """A CloudWatch Embedded Metric Format document with the batch's counters, dimension FunctionName."""
    document: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [["FunctionName"]],
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in METRICS],
                }
            ],
        },
        "FunctionName": function_name,
    }
    for name in METRICS:
        document[name] = counts.get(name, 0)
    return json.dumps(document, separators=(",", ":"))
