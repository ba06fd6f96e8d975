"""Metrics (EMF, one line per batch) and the per-record JSON log lines."""

from __future__ import annotations

import json

from idempotent_runtime import TransientError
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from runtime_helpers import event, log_lines, metrics, record, record_logs


def test_one_emf_line_per_batch_with_the_counts(make_handler, dlq_url):
    def processor(message):
        if message.data.get("fail"):
            raise TransientError("busy")
        return None

    handler, stream = make_handler(fn=processor, dlq_url=dlq_url)
    handler(event(record({"x": "seen", "y": "1"}, group="d")), None)
    stream.truncate(0)
    stream.seek(0)
    batch = [
        record({"x": "new1", "y": "1"}, group="a"),
        record({"x": "new2", "y": "1"}, group="b"),
        record({"x": "seen", "y": "1"}, group="d"),  # duplicate
        record("{broken", group="e"),  # quarantined
        record({"x": "f1", "y": "1", "fail": True}, group="f"),  # failed
        record({"x": "f2", "y": "1"}, group="f"),  # failed: after a failure in its group
    ]
    handler(event(*batch), None)
    (line,) = metrics(stream)
    assert line["processed"] == 2
    assert line["duplicates"] == 1
    assert line["quarantined"] == 1
    assert line["failed"] == 2
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "IdempotentPipeline"
    assert directive["Dimensions"] == [["FunctionName"]]
    assert {m["Name"] for m in directive["Metrics"]} == {
        "processed",
        "duplicates",
        "failed",
        "quarantined",
        "conflicts",
        "misconfigured",
    }
    assert (line["conflicts"], line["misconfigured"]) == (0, 0)
    assert (line["records"], line["groups"]) == (len(batch), 5)
    assert all(m["Unit"] == "Count" for m in directive["Metrics"])
    assert line["FunctionName"] == "local"
    assert isinstance(line["_aws"]["Timestamp"], int)
    assert len(record_logs(stream)) == len(batch)


def test_metrics_carry_the_lambda_function_name_and_namespace(table, dynamodb, capsys):
    config = Config.from_env(
        {"TABLE_NAME": table, "AWS_LAMBDA_FUNCTION_NAME": "orders-consumer", "METRICS_NAMESPACE": "Shop"}
    )
    handler = build_handler(config, dynamodb_client=dynamodb)
    handler(event(record({"x": "a", "y": "b"})), None)
    lines = [json.loads(raw) for raw in capsys.readouterr().out.splitlines()]
    (emf,) = [line for line in lines if "_aws" in line]
    assert emf["FunctionName"] == "orders-consumer"
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Shop"
    assert emf["processed"] == 1
    # At the default level (INFO) a processed record writes no line of its own: the EMF line is the summary.
    assert lines == [emf]


def test_log_level_warning_keeps_failures_and_drops_successes(make_handler):
    handler, stream = make_handler(log_level="WARNING")
    handler(event(record({"x": "a", "y": "b"}), record("{bad")), None)
    outcomes = [line["outcome"] for line in record_logs(stream)]
    assert outcomes == ["failed"]
    assert len(metrics(stream)) == 1
    assert all(line["level"] in ("WARNING", "ERROR") for line in log_lines(stream) if "level" in line)


def test_default_logs_are_one_summary_line_per_batch_for_a_healthy_batch(make_handler):
    handler, stream = make_handler(log_level="INFO")
    batch = [record({"x": f"k{i}", "y": "1"}, group=f"g{i % 3}") for i in range(10)]
    handler(event(*batch), None)
    handler(event(*batch), None)  # all duplicates
    lines = log_lines(stream)
    assert len(lines) == 2  # on main: one line per record plus the metrics line
    for summary, processed in zip(lines, (10, 0), strict=True):
        assert summary["message"] == "batch"
        assert (summary["records"], summary["groups"], summary["processed"]) == (10, 3, processed)
        assert summary["duration_ms"] >= 0 and summary["mode"] == "document"
        assert "_aws" in summary  # the summary is the EMF line itself


def test_default_logs_name_each_record_that_needs_a_look(make_handler, dlq_url):
    def processor(message):
        if message.data.get("fail"):
            raise TransientError("busy")

    handler, stream = make_handler(fn=processor, dlq_url=dlq_url, log_level="INFO")
    handler(event(record({"x": "ok", "y": "1"}, group="a"), record("{bad", group="b"),
                  record({"x": "f", "y": "1", "fail": True}, group="c")), None)  # fmt: skip
    records = record_logs(stream)
    assert sorted((line["level"], line["outcome"]) for line in records) == [
        ("WARNING", "failed"),
        ("WARNING", "quarantined"),
    ]
    (quarantined,) = [line for line in records if line["outcome"] == "quarantined"]
    assert quarantined["kind"] == "invalid" and quarantined["reason"].startswith("body is not valid json")


def test_debug_logs_every_record(make_handler):
    handler, stream = make_handler(log_level="DEBUG")
    handler(event(*[record({"x": f"k{i}", "y": "1"}) for i in range(3)]), None)
    assert [(line["level"], line["outcome"]) for line in record_logs(stream)] == [("DEBUG", "processed")] * 3


def test_a_healthy_record_costs_a_few_bytes_of_log(make_handler):
    handler, stream = make_handler(log_level="INFO")
    batch = [record({"x": f"k{i}", "y": "1"}, group=f"g{i}") for i in range(10)]
    handler(event(*batch), None)
    assert len(stream.getvalue().encode()) / len(batch) < 100  # one ~700-byte line for 10 records


def test_metrics_are_written_whatever_the_log_level(make_handler):
    handler, stream = make_handler(log_level="ERROR")
    handler(event(record({"x": "a", "y": "b"})), None)
    assert log_lines(stream) == metrics(stream)
    assert metrics(stream)[0]["processed"] == 1
