"""logs: the consumer function's lines - the local runner's file with --local, CloudWatch Logs on AWS - with
--since, --key / --message-id filters over the runtime's JSON lines, --json as written, and --follow. The
lines are the bundled handler's own output, written where the runner writes it or put into the function's
log group in the test process's moto server."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from dlq_helpers import Terminal, client, command, consume, consumer, deploy_pipeline, hooked, publish

from idempotent_local.runner import function_log_path

pytestmark = pytest.mark.usefixtures("cloud")

ORDERS = {"PARTITION_KEY_FIELD": "order_id", "SORT_KEY_FIELD": "line_id"}
TEA = json.dumps({"order_id": "o-1", "line_id": "1", "sku": "tea"})
COCOA = json.dumps({"order_id": "o-1", "line_id": "1", "sku": "cocoa"})


def _run_consumer(**environment: str) -> tuple[Any, list[str], str]:
    """A pipeline whose consumer processed TEA and then quarantined COCOA (same key, other content);
    returns the pipeline, the lines the function wrote, and the conflict's message id."""
    pipeline = deploy_pipeline(environment={**ORDERS, **environment})
    publish(pipeline, TEA, group="o-1")
    conflict = publish(pipeline, COCOA, group="o-1")
    output = io.StringIO()
    with contextlib.redirect_stdout(output):  # the runtime writes its lines to stdout, as in Lambda
        consume(pipeline, consumer(pipeline), batch=1)
    return pipeline, output.getvalue().splitlines(), conflict


def _local_log(app: Path, pipeline: Any, lines: list[str]) -> Path:
    """The lines, where `local run` writes what the function prints."""
    path = function_log_path(app / ".local-cloud", pipeline.function)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _cloudwatch(pipeline: Any, lines: list[str], group: str | None = None) -> str:
    """The lines in the function's log group, as Lambda sends its stdout there."""
    logs = client("logs")
    group = group or f"/aws/lambda/{pipeline.function}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="2026/11/26/[$LATEST]abc")
    _put(group, lines)
    return group


def _put(group: str, lines: list[str]) -> None:
    now = int(time.time() * 1000)
    client("logs").put_log_events(
        logGroupName=group,
        logStreamName="2026/11/26/[$LATEST]abc",
        logEvents=[{"timestamp": now, "message": line + "\n"} for line in lines],
    )


def test_local_logs_show_the_runners_lines_and_filter_by_key_and_message(local_app):
    pipeline, lines, conflict = _run_consumer()
    path = _local_log(local_app, pipeline, lines)
    where = ("--local", "--app-dir", str(local_app))

    code, everything = command("logs", *where)
    assert code == 0, everything.error
    assert f"{pipeline.stack}/{pipeline.function}: lines the local runner wrote to {path}" in everything.error
    # Two batches: a summary line each, and the conflict's WARNING line.
    assert len(everything.lines) == len(lines) == 3
    assert sum("  -        batch  " in line for line in everything.lines) == 2

    code, keyed = command("logs", *where, "--key", "o-1#1")
    assert code == 0, keyed.error
    [line] = keyed.lines
    assert "  WARNING  record quarantined  " in line
    assert (
        f"message_id={conflict} group_id=o-1 key=o-1#1 outcome=quarantined kind=conflict mode=document"
        in line
    )
    assert (
        line.split("  ")[0].endswith("Z")
        and "reason=" in line
        and line.index("reason=") > line.index("kind=")
    )
    assert "the lines of key o-1#1" in keyed.error

    code, by_message = command("logs", *where, "--message-id", conflict, "--json")
    assert code == 0
    [raw] = by_message.out.getvalue().splitlines()
    assert raw in lines and json.loads(raw)["outcome"] == "quarantined"


def test_since_leaves_out_older_lines_and_lines_without_a_time_go_with_the_line_before(local_app):
    pipeline, lines, _ = _run_consumer()
    old = json.dumps({"level": "WARNING", "timestamp": time.time() - 7200, "message": "old", "key": "o-1#1"})
    _local_log(local_app, pipeline, [old, "Traceback (most recent call last): from the old line", *lines])

    code, terminal = command("logs", "--local", "--app-dir", str(local_app), "--since", "10m", "--json")

    assert code == 0, terminal.error
    assert terminal.out.getvalue().splitlines() == lines


def test_follow_prints_the_lines_written_after_it_started_until_ctrl_c(local_app):
    pipeline, lines, _ = _run_consumer()
    path = _local_log(local_app, pipeline, lines[:1])
    later = json.dumps(
        {"level": "WARNING", "timestamp": time.time(), "message": "record failed", "key": "k#1"}
    )
    terminal = Terminal()
    sleeps = iter(
        [
            lambda: path.write_text(path.read_text() + later + "\n" + '{"partial'),  # a line half written
            lambda: None,
        ]
    )

    def sleep(seconds: float) -> None:
        step = next(sleeps, None)
        if step is None:
            raise KeyboardInterrupt
        step()

    terminal.sleep = sleep  # type: ignore[method-assign]
    code, _ = command("logs", "--local", "--app-dir", str(local_app), "--follow", "--json", terminal=terminal)

    assert code == 0
    assert terminal.out.getvalue().splitlines() == [lines[0], later]


def test_aws_logs_read_the_functions_log_group_with_filters(cloud):
    pipeline, lines, conflict = _run_consumer()
    _cloudwatch(pipeline, [*lines, "END RequestId: 8f5f1c2a"])

    code, terminal = command("logs", "--stack", pipeline.stack)
    assert code == 0, terminal.error
    assert f"log group /aws/lambda/{pipeline.function}, since " in terminal.error
    assert "CloudWatch Logs shows a line some seconds after the function wrote it" in terminal.error
    assert len(terminal.lines) == 4 and terminal.lines[-1].endswith("Z  END RequestId: 8f5f1c2a")

    code, terminal = command("logs", "--message-id", conflict, "--since", "5m", "--json")
    assert code == 0, terminal.error
    assert [json.loads(line)["message_id"] for line in terminal.out.getvalue().splitlines()] == [conflict]


def test_aws_logs_use_the_log_group_the_function_is_configured_with(cloud):
    pipeline, lines, _ = _run_consumer()
    group = _cloudwatch(pipeline, lines, group="/orders/consumer")
    _cloudwatch(pipeline, ["a line in the default group, which the function does not use"])

    def configured(parsed: dict[str, Any], **_: Any) -> None:
        # What Lambda answers for a function with an explicit log group (moto 5.2 keeps no LoggingConfig).
        parsed["LoggingConfig"] = {"LogFormat": "Text", "LogGroup": group}

    connect = hooked("after-call.lambda.GetFunctionConfiguration", configured)
    code, terminal = command("logs", "--json", connect=connect)

    assert code == 0, terminal.error
    assert "log group /orders/consumer" in terminal.error
    assert terminal.out.getvalue().splitlines() == lines


def test_aws_follow_shows_each_new_event_once(cloud):
    pipeline, lines, _ = _run_consumer()
    group = _cloudwatch(pipeline, lines[:1])
    terminal = Terminal()
    steps = iter([lambda: _put(group, lines[1:]), lambda: None])

    def sleep(seconds: float) -> None:
        step = next(steps, None)
        if step is None:
            raise KeyboardInterrupt
        step()

    terminal.sleep = sleep  # type: ignore[method-assign]
    code, _ = command("logs", "--follow", "--json", terminal=terminal)

    assert code == 0, terminal.error
    assert terminal.out.getvalue().splitlines() == lines


def test_a_log_group_that_does_not_exist_is_said_so(cloud):
    pipeline = deploy_pipeline(environment=ORDERS)

    code, terminal = command("logs", "--stack", pipeline.stack)

    assert code == 0 and terminal.lines == []
    assert f"no lines: the log group /aws/lambda/{pipeline.function} does not exist (yet)" in terminal.error


def test_no_line_for_a_processed_key_says_why_at_the_default_log_level(local_app):
    pipeline, lines, _ = _run_consumer()
    _local_log(local_app, pipeline, lines)

    code, terminal = command("logs", "--local", "--app-dir", str(local_app), "--key", "o-9#1")

    assert code == 0 and terminal.lines == []
    assert (
        "no lines of key o-9#1: at LOG_LEVEL=INFO the runtime writes a line for a record only when it "
        "fails, is quarantined or conflicts; processed records and duplicates are counted in each batch's "
        "summary line (LOG_LEVEL=DEBUG writes one for every record)"
    ) in terminal.error


def test_a_debug_consumer_logs_every_record(local_app):
    pipeline, lines, _ = _run_consumer(LOG_LEVEL="DEBUG")
    _local_log(local_app, pipeline, lines)

    code, terminal = command("logs", "--local", "--app-dir", str(local_app), "--key", "o-1#1")

    assert code == 0
    assert [re.search(r"  (record \w+)  ", line)[1] for line in terminal.lines] == [
        "record processed",
        "record quarantined",
    ]


def test_before_the_runner_wrote_anything_logs_says_where_it_will(local_app):
    pipeline = deploy_pipeline(environment=ORDERS)

    code, terminal = command("logs", "--local", "--app-dir", str(local_app))

    assert code == 0 and terminal.lines == []
    path = function_log_path(local_app / ".local-cloud", pipeline.function)
    assert f"no lines: {path} does not exist yet (`idempotent-pipeline local run` writes" in terminal.error


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--since", "yesterday"], "--since must be a duration such as 30s, 10m, 1h, 2d or an ISO 8601 time"),
        (["--since", "2999-01-01T00:00:00Z"], "got '2999-01-01T00:00:00Z', a time in the future"),
        (["--function", "nope"], "no function nope"),
    ],
)
def test_bad_options_are_refused_naming_them(cloud, argv, error):
    deploy_pipeline(environment=ORDERS)

    code, terminal = command("logs", *argv)

    assert code == 1 and terminal.error.startswith("error: ") and error in terminal.error, terminal.error
