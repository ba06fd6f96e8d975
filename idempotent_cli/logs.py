"""idempotent-pipeline logs: the log lines of a pipeline's consumer, or of any function of the stack.

With --local, the lines the local runner (`idempotent-pipeline local run`) wrote for the function in the app's
emulator state (`.local-cloud/logs/FUNCTION.log`); on AWS, the function's CloudWatch Logs log group (its
LoggingConfig, else /aws/lambda/FUNCTION). The runtime writes one JSON object per line (message_id, group_id,
key, outcome, reason; one summary line per batch): the screen shows each line's time, level, message and
fields; --json prints the lines as written.

  logs --since 10m                  lines of the last 10 minutes (s, m, h, d; or an ISO 8601 time, UTC if
                                    it names no zone); default: the whole local file, the last hour on AWS
  logs --key 'o-1#1'                the lines of one key (as `trace` and the lines show it)
  logs --message-id ID              the lines of one message
  logs --follow                     then new lines as they arrive, until Ctrl-C

The stack is found as the DLQ tool finds it (--stack, or the only one with a pipeline). --function NAME reads
one function of it, any (its construct id or path, its function name or an output naming it); without it,
every consumer of the stack, each line after whose it is (its construct path).
"""

from __future__ import annotations

import argparse
import heapq
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from idempotent_cli import command
from idempotent_cli.command import add_cloud_arguments, add_command, add_pipeline_arguments
from idempotent_cli.dlq.letters import iso_seconds, json_object, utc_text

__all__ = ["register", "run"]

DEFAULT_AWS_SINCE = "1h"  # FilterLogEvents scans the whole time range: an unbounded one can be slow
DEFAULT_POLL_SECONDS = 2.0
# --follow on AWS asks again for this much before the newest line shown: CloudWatch Logs may ingest a line
# after a later one.
LATE_MS = 60_000
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
# Shown first, in this order; the rest of a line's fields follow, `reason` last (it has spaces).
FIRST_FIELDS = ("message_id", "group_id", "key", "outcome", "kind", "mode")
HIDDEN_FIELDS = frozenset({"level", "timestamp", "function", "message", "_aws", "FunctionName"})


def register(subparsers: Any) -> argparse.ArgumentParser:
    help = "a pipeline's log lines, or any function's (the local runner's, or CloudWatch Logs)"
    logs = add_command(subparsers, "logs", help, __doc__)
    which = logs.add_argument_group("which lines")
    which.add_argument("--since", metavar="WHEN", help="10m, 1h, 2d... or an ISO 8601 time")
    which.add_argument("--key", metavar="KEY", help="only the lines of this key (partition#sort, as logged)")
    which.add_argument("--message-id", metavar="ID", help="only the lines of this message")
    which.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until Ctrl-C")
    add_pipeline_arguments(logs.add_argument_group("which pipeline"))
    add_cloud_arguments(logs.add_argument_group("which cloud"))
    logs.add_argument("--json", action="store_true", help="print the lines as the function wrote them")
    logs.add_argument("--poll-seconds", type=float, default=DEFAULT_POLL_SECONDS, help=argparse.SUPPRESS)
    logs.set_defaults(func=run)
    return logs


def run(args: argparse.Namespace, *, console: Any = None, connect: Any = None) -> int:
    """Run ``logs``; returns the exit code (0, also when --follow ends with Ctrl-C; 1 on an error)."""
    return command.run(_logs, args, console, connect)


@dataclass(frozen=True)
class Line:
    """One line of the function's log: its time (epoch seconds, if known), its text, its JSON fields."""

    time: float | None
    text: str
    fields: dict[str, Any] | None

    @classmethod
    def parse(cls, text: str, time: float | None = None) -> Line:
        fields = json_object("the line", text)[0] if text.startswith("{") else None
        if time is None and fields is not None:
            time = _line_time(fields)
        return cls(time, text, fields)


def _line_time(fields: dict[str, Any]) -> float | None:
    stamp = fields.get("timestamp")
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return float(stamp)
    metrics = fields.get("_aws")
    stamp = metrics.get("Timestamp") if isinstance(metrics, dict) else None
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return stamp / 1000
    return None


def parse_since(text: str, now: float) -> float:
    """``--since``: a duration back from ``now`` (``10m``) or an ISO 8601 time (UTC if it names no zone)."""
    match = DURATION.fullmatch(text.strip().lower())
    if match:
        return now - float(match[1]) * UNITS[match[2]]
    from idempotent_cli.errors import DlqError

    since = iso_seconds(text)
    if since is None or since > now:
        raise DlqError(
            f"--since must be a duration such as 30s, 10m, 1h, 2d or an ISO 8601 time such as "
            f"2026-11-23T10:00:00Z; got {text!r}, "
            + ("neither a duration nor an ISO 8601 time" if since is None else "a time in the future")
        )
    return since


class LocalLog:
    """The file the local runner appends the function's output to; ``read()`` returns the complete lines
    written since the last call (from the start again if the file was truncated)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.last_time: float | None = None  # a line without a time of its own is as old as the one before

    def describe(self) -> str:
        return f"lines the local runner wrote to {self.path}"

    def read(self, since: float | None) -> list[Line]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:
            self.offset = 0
        with open(self.path, "rb") as file:
            file.seek(self.offset)
            data = file.read(size - self.offset)
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        lines = []
        for raw in complete.decode("utf-8", "replace").splitlines():
            line = Line.parse(raw)
            if line.time is None:
                line = Line(self.last_time, line.text, line.fields)
            self.last_time = line.time
            if since is None or (line.time is not None and line.time >= since):
                lines.append(line)
        return lines


class CloudWatchLog:
    """The function's log group; ``read()`` returns the events since the last call, each once."""

    def __init__(self, client: Any, group: str) -> None:
        self.client, self.group = client, group
        self.seen: dict[str, int] = {}  # event id -> timestamp (ms), for the events still in the window
        self.newest_ms: int | None = None
        self.missing = False

    def describe(self) -> str:
        return f"log group {self.group}"

    def read(self, since: float | None) -> list[Line]:
        start = int(since * 1000) if since is not None else 0
        if self.newest_ms is not None:
            start = max(start, self.newest_ms - LATE_MS)
        lines = []
        for event in self._events(start):
            if event["eventId"] in self.seen:
                continue
            self.seen[event["eventId"]] = event["timestamp"]
            self.newest_ms = max(self.newest_ms or 0, event["timestamp"])
            lines.append(Line.parse(event["message"].rstrip("\n"), event["timestamp"] / 1000))
        self.seen = {event_id: ms for event_id, ms in self.seen.items() if ms >= start}
        return sorted(lines, key=lambda line: line.time or 0)

    def _events(self, start_ms: int) -> Iterator[dict[str, Any]]:
        from botocore.exceptions import ClientError

        paginator = self.client.get_paginator("filter_log_events")
        try:
            for page in paginator.paginate(logGroupName=self.group, startTime=start_ms):
                self.missing = False
                yield from page.get("events", [])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            self.missing = True

    def retention_days(self) -> int | None:
        """The group's retention (None: kept forever, or not readable: it is only a note)."""
        from botocore.exceptions import ClientError

        try:
            groups = self.client.describe_log_groups(logGroupNamePrefix=self.group).get("logGroups", [])
        except ClientError:
            return None
        for group in groups:
            if group.get("logGroupName") == self.group:
                return group.get("retentionInDays")
        return None


@dataclass(frozen=True)
class Chosen:
    """Which lines are shown: all, or those of one key and/or one message (lines that are not JSON, or
    belong to no record, such as a batch's summary, are then left out)."""

    key: str | None = None
    message_id: str | None = None

    def __call__(self, line: Line) -> bool:
        if self.key is None and self.message_id is None:
            return True
        if line.fields is None:
            return False
        if self.key is not None and line.fields.get("key") != self.key:
            return False
        return self.message_id is None or line.fields.get("message_id") == self.message_id

    def describe(self) -> str:
        parts = [f"key {self.key}"] if self.key is not None else []
        if self.message_id is not None:
            parts.append(f"message {self.message_id}")
        return " and ".join(parts)


def render(line: Line) -> str:
    """A line for the screen: time, level, message, then its fields (``reason`` last)."""
    from idempotent_runtime.contract import Metric

    stamp = _stamp(line.time)
    if line.fields is None:
        return f"{stamp}  {line.text}"
    fields = line.fields
    metrics = {metric.value for metric in Metric}
    shown = [name for name in FIRST_FIELDS if name in fields]
    shown += [
        name
        for name in fields
        if name not in HIDDEN_FIELDS
        and name not in FIRST_FIELDS
        and name != "reason"
        and not (name in metrics and fields[name] == 0)
    ]
    shown += ["reason"] if "reason" in fields else []
    text = " ".join(f"{name}={_value(fields[name])}" for name in shown)
    level = str(fields.get("level") or "-")
    return f"{stamp}  {level:<7}  {fields.get('message', '')}" + (f"  {text}" if text else "")


def _stamp(seconds: float | None) -> str:
    if seconds is None:
        return " " * 23
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _logs(args: argparse.Namespace, console: Any, connect: Any) -> int:
    from idempotent_cli.errors import DlqError
    from idempotent_cli.stack import find

    now = time.time()
    since = parse_since(args.since, now) if args.since else None
    if args.poll_seconds <= 0:
        raise DlqError(f"--poll-seconds must be over 0, got {args.poll_seconds:g}")
    clients = connect(args)
    found = find(clients, stack=args.stack, function=args.function)
    functions = [found.named] if found.named else found.stack.pipelines
    if clients.state_dir is None and since is None:
        since = parse_since(DEFAULT_AWS_SINCE, now)
    logs = [Log(function, _source(clients, function), len(functions) > 1) for function in functions]
    chosen = Chosen(args.key, args.message_id)
    for log in logs:
        _header(console, log, since, chosen)
    shown = _show(console, logs, since, chosen, args.json)
    for log in logs:
        _explain(console, log, shown[log.function.function], chosen, since)
    if not args.follow:
        return 0
    try:
        while True:
            console.sleep(args.poll_seconds)
            _show(console, logs, since, chosen, args.json)
    except KeyboardInterrupt:
        return 0


@dataclass(frozen=True)
class Log:
    """One function's lines: where they are, and whether each says whose (one of several)."""

    function: Any  # idempotent_cli.stack.Function
    source: LocalLog | CloudWatchLog
    several: bool

    def shown(self, line: Line, as_json: bool) -> str:
        if not self.several:
            return line.text if as_json else render(line)
        if as_json:
            return json.dumps({"pipeline": self.function.whose, **(line.fields or {"text": line.text})})
        return f"{self.function.whose}  {render(line)}"


def _source(clients: Any, function: Any) -> LocalLog | CloudWatchLog:
    """The local runner's file of the function, or its CloudWatch Logs log group (its LoggingConfig's, else
    the default one)."""
    if clients.state_dir is not None:
        from idempotent_local.runner import function_log_path

        return LocalLog(function_log_path(clients.state_dir, function.function))
    return CloudWatchLog(clients("logs"), function.log_group or f"/aws/lambda/{function.function}")


def _show(
    console: Any, logs: list[Log], since: float | None, chosen: Chosen, as_json: bool
) -> dict[str, int]:
    """The new lines of every log, each in its order, merged by time; how many of each were shown."""
    lines = heapq.merge(
        *([(line, log) for line in log.source.read(since) if chosen(line)] for log in logs),
        key=lambda pair: pair[0].time or 0,
    )
    shown = {log.function.function: 0 for log in logs}
    for line, log in lines:
        console.print(log.shown(line, as_json))
        shown[log.function.function] += 1
    return shown


def _header(console: Any, log: Log, since: float | None, chosen: Chosen) -> None:
    """What is shown, on stderr (``--json`` output stays the lines)."""
    source = log.source
    what = f"{log.function.whose if log.several else log.function.label}: {source.describe()}"
    what += f", since {utc_text(since)}" if since is not None else ""
    what += f", the lines of {chosen.describe()}" if chosen.describe() else ""
    console.note(what)
    if isinstance(source, CloudWatchLog):
        retention = source.retention_days()
        kept = f"the log group keeps lines {retention} days; " if retention else ""
        console.note(
            f"note: {kept}CloudWatch Logs shows a line some seconds after the function wrote it: the newest "
            "may not be here yet (--follow shows them as they arrive)"
        )


def _explain(console: Any, log: Log, shown: int, chosen: Chosen, since: float | None) -> None:
    """Why nothing was shown, when nothing was."""
    from idempotent_runtime.contract import LOG_LEVEL, LogLevel

    if shown:
        return
    source, environment = log.source, log.function.environment or {}
    whose = f"{log.function.whose}: " if log.several else ""
    if isinstance(source, LocalLog) and not source.path.exists():
        console.note(
            f"{whose}no lines: {source.path} does not exist yet (`idempotent-pipeline local run` writes what "
            "the function prints there)"
        )
        return
    if isinstance(source, CloudWatchLog) and source.missing:
        console.note(f"{whose}no lines: the log group {source.group} does not exist (yet)")
        return
    level = environment.get(LOG_LEVEL.name) or LOG_LEVEL.default
    quiet = chosen.describe() and level != LogLevel.DEBUG
    console.note(
        f"{whose}no lines"
        + (f" of {chosen.describe()}" if chosen.describe() else "")
        + (" in that time" if since is not None else "")
        + (
            f": at LOG_LEVEL={level} the runtime writes a line for a record only when it fails, is "
            "quarantined or conflicts; processed records and duplicates are counted in each batch's summary "
            "line (LOG_LEVEL=DEBUG writes one for every record)"
            if quiet
            else ""
        )
    )
