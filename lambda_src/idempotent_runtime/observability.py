"""JSON log lines and one CloudWatch Embedded Metric Format line per batch - also its summary (no
dependency). What each level writes: docs/runtime.md, "Logs and metrics".
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO, TypeVar

from idempotent_runtime.contract import METRICS_DIMENSION, ConfigurationError, LogLevel, Metric

T = TypeVar("T")

_LEVELS = {LogLevel.DEBUG: 10, LogLevel.INFO: 20, LogLevel.WARNING: 30, LogLevel.ERROR: 40}
_METRIC_NAMES = tuple(metric.value for metric in Metric)


class Log:
    """JSON lines to stdout (Lambda forwards stdout to CloudWatch Logs), one write per line, thread-safe."""

    def __init__(self, level: LogLevel | str, function_name: str, stream: TextIO | None = None) -> None:
        self.threshold = _LEVELS[LogLevel(level)]
        self.function_name = function_name
        self._stream = stream
        self._lock = threading.Lock()

    def enabled(self, level: LogLevel) -> bool:
        return _LEVELS[level] >= self.threshold

    def emit(self, level: LogLevel, message: str, **fields: Any) -> None:
        if _LEVELS[level] < self.threshold:
            return
        line = {
            "level": level.value,
            "timestamp": round(time.time(), 3),
            "function": self.function_name,
            "message": message,
        }
        line.update(fields)
        self.write(json.dumps(line, default=str, separators=(",", ":")))

    def warn(self, message: str, **fields: Any) -> None:
        self.emit(LogLevel.WARNING, message, **fields)

    def write(self, line: str) -> None:
        stream = self._stream or sys.stdout
        with self._lock:
            stream.write(line + "\n")

    def flush(self) -> None:
        stream = self._stream or sys.stdout
        with self._lock:
            stream.flush()


def cold_start_error(message: str, **fields: Any) -> None:
    """One ERROR line, written at once, by a function that has no configuration yet to name it by."""
    log = Log(LogLevel.ERROR, os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or "local")
    log.emit(LogLevel.ERROR, message, **fields)
    log.flush()


def configured(build: Callable[[], T], refused: str) -> T:
    """``build()``, a handler from its configuration; a configuration that cannot work is said first, in one
    ERROR line (``refused``), and raised: the batches come back until it is fixed."""
    try:
        return build()
    except ConfigurationError as error:
        cold_start_error(f"{refused}: batches are retried until it is fixed", error=str(error))
        raise


def emf_line(
    namespace: str,
    function_name: str,
    counts: Mapping[str, int],
    names: Sequence[str] = _METRIC_NAMES,
    timestamp_ms: int | None = None,
    **summary: Any,
) -> str:
    """A CloudWatch Embedded Metric Format document with the batch's counters ``names`` (default: every
    :class:`Metric`; a consumer writes its mode's, ``contract.metrics_of``; the relay its
    :class:`RelayMetric`), dimension FunctionName; ``summary`` fields (records, groups, duration_ms) ride
    along as log fields."""
    document: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [[METRICS_DIMENSION]],
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in names],
                }
            ],
        },
        METRICS_DIMENSION: function_name,
        "message": "batch",
    }
    for name in names:
        document[name] = counts.get(name, 0)
    document.update(summary)
    return json.dumps(document, separators=(",", ":"), default=str)
