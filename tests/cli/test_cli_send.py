"""`idempotent-pipeline send`: JSON lines through the publisher helper to a pipeline found as the DLQ tool
finds it, keyed as its consumer's environment says; order, deduplication ids and the summary checked on
what reached the queue of the emulator's moto server."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from dlq_helpers import Pipeline, client, deploy_pipeline, drain, queue_arn, unique
from idempotent_runtime.publisher import ConsumerKeys, dedup_id_for

from idempotent_cli.main import parser
from idempotent_cli.send import run

ORDERS = {"PARTITION_KEY_FIELD": "order_id", "SORT_KEY_FIELD": "line_id"}
KEYS = ConsumerKeys(("order_id", "line_id"))

LINES = [
    '{"order_id": "o-1", "line_id": "1", "sku": "tea", "quantity": 2}',
    '{"order_id": "o-2", "line_id": "1", "sku": "tea", "quantity": 1}',
    '{"order_id": "o-1", "line_id": "2", "sku": "coffee", "quantity": 1}',
    '{"order_id": "o-1", "line_id": "3", "sku": "cocoa", "quantity": 1.50}',
]


def with_topic(pipeline: Pipeline, *, fifo: bool = True) -> str:
    """A topic delivering to the pipeline's queue with raw delivery, as the constructs subscribe it."""
    sns = client("sns")
    name = unique("topic") + (".fifo" if fifo else "")
    topic = sns.create_topic(Name=name, Attributes={"FifoTopic": "true"} if fifo else {})["TopicArn"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn(pipeline.queue_url),
        Attributes={"RawMessageDelivery": "true"},
    )
    return topic


def write(tmp_path: Path, lines: list[str], name: str = "orders.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def send(*argv: str, stdin: str | None = None, connect: Any = None) -> tuple[int, str, str]:
    """Run ``idempotent-pipeline send ARGV``: (exit code, stdout, stderr). Progress on every request."""
    args = parser().parse_args(["send", *argv, "--progress-seconds", "0"])
    out, err = io.StringIO(), io.StringIO()
    code = run(args, stdin=io.StringIO(stdin or ""), out=out, err=err, connect=connect)
    return code, out.getvalue(), err.getvalue()


def refusing(refused: str) -> Any:
    """``connect`` for :func:`send`: the default clients, whose SNS refuses (once) each entry containing
    ``refused`` and publishes the rest of its request."""
    from botocore.awsrequest import AWSResponse

    from idempotent_cli import aws

    seen: set[str] = set()

    def connect(args: Any) -> Any:
        clients = aws.connect(local=False)
        sns = clients("sns")
        sent: list[dict[str, Any]] = []

        def call(**_: Any) -> Any:
            entries = sent[-1]["PublishBatchRequestEntries"]
            bad = [e for e in entries if refused in e["Message"] and e["Message"] not in seen]
            seen.update(e["Message"] for e in bad)
            good = [e for e in entries if e not in bad]
            topic = sent[-1]["TopicArn"]
            parsed = (
                client("sns").publish_batch(TopicArn=topic, PublishBatchRequestEntries=good) if good else {}
            )
            parsed.setdefault("Successful", [])
            parsed["Failed"] = [
                {"Id": e["Id"], "Code": "InternalError", "Message": "try later", "SenderFault": False}
                for e in bad
            ]
            return AWSResponse("https://sns.invalid", 200, {}, None), parsed

        sns.meta.events.register(
            "before-parameter-build.sns.PublishBatch", lambda params, **_: sent.append(params)
        )
        sns.meta.events.register("before-call.sns.PublishBatch", call)
        return clients

    return connect


def by_group(messages: list[dict[str, Any]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for message in messages:
        groups.setdefault(message["Attributes"].get("MessageGroupId", "-"), []).append(message["Body"])
    return groups


def test_send_publishes_each_line_as_written_keyed_and_grouped_as_the_consumer_reads_it(cloud, tmp_path):
    pipeline = deploy_pipeline(environment=ORDERS)
    topic = with_topic(pipeline)
    code, out, err = send(write(tmp_path, LINES), "--stack", pipeline.stack)
    assert code == 0, out + err
    received = drain(pipeline.queue_url)
    assert by_group(received) == {"o-1": [LINES[0], LINES[2], LINES[3]], "o-2": [LINES[1]]}
    assert sorted(m["Attributes"]["MessageDeduplicationId"] for m in received) == sorted(
        dedup_id_for(line, KEYS) for line in LINES
    )
    assert err.splitlines()[0] == (
        f"sending 4 messages from {tmp_path / 'orders.jsonl'} to the topic {topic} (FIFO; keys as the "
        f"consumer {pipeline.function} reads them: fields order_id, line_id)"
    )
    assert "    4/4 sent: 4 published, 0 failed (" in err
    assert out.startswith("4 messages in 2 groups: 4 published (")


def test_a_line_the_consumer_would_reject_is_named_and_nothing_is_sent(cloud, tmp_path):
    pipeline = deploy_pipeline(environment=ORDERS)
    with_topic(pipeline)
    path = write(tmp_path, [LINES[0], "", '{"order_id": "o-3", "sku": "tea"}', LINES[1]])
    code, out, err = send(path, "--stack", pipeline.stack)
    assert code == 1 and out == ""
    assert err.strip().splitlines()[-1] == (
        f"error: {path}, line 3: sort key field 'line_id' is missing from the body (fields: 'order_id', "
        "'sku'); nothing was sent"
    )
    assert drain(pipeline.queue_url) == []


def test_a_refused_line_stops_its_group_and_sending_the_same_file_again_keeps_the_order(cloud, tmp_path):
    pipeline = deploy_pipeline(environment=ORDERS)
    with_topic(pipeline)
    path = write(tmp_path, LINES)
    refused = refusing('"line_id": "2"')  # once: sent again, it is accepted
    code, out, _ = send(path, "--stack", pipeline.stack, connect=refused)
    assert code == 1
    assert out.splitlines()[1:4] == [
        "    group o-1: 1 published, 1 failed, 1 not attempted",
        "        line 3: failed: InternalError (service fault): try later",
        "        not attempted: line 4",
    ]
    assert out.startswith("4 messages in 2 groups: 2 published, 1 failed, 1 not attempted (")
    assert "Sending the same input again is safe and keeps each group's order" in out
    assert by_group(drain(pipeline.queue_url)) == {"o-1": [LINES[0]], "o-2": [LINES[1]]}
    code, out, _ = send(path, "--stack", pipeline.stack, connect=refused)
    assert code == 0, out
    # Lines 1 and 2 again: dropped by FIFO deduplication; o-1 goes on from line 3, in order.
    assert by_group(drain(pipeline.queue_url)) == {"o-1": [LINES[2], LINES[3]]}


def test_json_summary_lists_each_unpublished_line_with_its_group_and_error(cloud, tmp_path):
    pipeline = deploy_pipeline(environment=ORDERS)
    with_topic(pipeline)
    code, out, _ = send(write(tmp_path, LINES), "--json", connect=refusing('"line_id": "2"'))
    assert code == 1
    summary = json.loads(out)
    assert (summary["messages"], summary["published"], summary["failed"], summary["not_attempted"]) == (
        4,
        2,
        1,
        1,
    )
    assert summary["groups"] == [
        {"group_id": "o-1", "published": 1, "failed": 1, "not_attempted": 1},
        {"group_id": "o-2", "published": 1, "failed": 0, "not_attempted": 0},
    ]
    assert summary["unpublished"] == [
        {
            "line": 3,
            "group_id": "o-1",
            "status": "failed",
            "code": "InternalError",
            "message": "try later",
            "sender_fault": False,
        },
        {"line": 4, "group_id": "o-1", "status": "not_attempted"},
    ]


def test_without_a_topic_send_goes_to_the_queue_with_groups_and_dedup_ids(cloud, tmp_path):
    pipeline = deploy_pipeline(environment=ORDERS)
    code, out, err = send("--group-field", "sku", stdin="\n".join(LINES[:2]) + "\n")
    assert code == 0, out + err
    queue = pipeline.queue_url.rsplit("/", 1)[1]
    assert "from stdin to the queue https://" in err and f"/{queue} (FIFO;" in err
    received = drain(pipeline.queue_url)
    assert by_group(received) == {"tea": LINES[:2]}
    assert [m["Attributes"]["MessageDeduplicationId"] for m in received] == [
        dedup_id_for(line, KEYS) for line in LINES[:2]
    ]


def test_a_standard_pipeline_gets_no_deduplication_ids_and_no_groups(cloud, tmp_path):
    pipeline = deploy_pipeline(environment={**ORDERS, "QUEUE_TYPE": "standard"}, fifo=False)
    topic = with_topic(pipeline, fifo=False)
    code, out, err = send(write(tmp_path, LINES))
    assert code == 0, out + err
    assert f"to the topic {topic} (standard;" in err
    assert out.startswith("4 messages: 4 published (")
    received = drain(pipeline.queue_url)
    assert sorted(m["Body"] for m in received) == sorted(LINES)
    assert not any("MessageDeduplicationId" in m["Attributes"] for m in received)


def test_send_of_a_single_field_key_groups_by_the_field_and_dedups_as_the_consumer_keys(cloud, tmp_path):
    pipeline = deploy_pipeline(environment={"KEY_SOURCE": "field", "PARTITION_KEY_FIELD": "customer_id"})
    topic = with_topic(pipeline)
    customers = [
        '{"customer_id": "c-1", "plan": "gold"}',
        '{"customer_id": "c-2", "plan": "tea"}',
        '{"customer_id": "c-1", "plan": "silver"}',
    ]
    code, out, err = send(write(tmp_path, customers), "--stack", pipeline.stack)
    assert code == 0, out + err
    assert err.splitlines()[0].endswith(
        f"{topic} (FIFO; keys as the consumer {pipeline.function} reads them: field customer_id)"
    )
    received = drain(pipeline.queue_url)
    assert by_group(received) == {"c-1": [customers[0], customers[2]], "c-2": [customers[1]]}
    keys = ConsumerKeys(("customer_id",), key_source="field")
    dedup_ids = sorted(m["Attributes"]["MessageDeduplicationId"] for m in received)
    assert dedup_ids == sorted(dedup_id_for(line, keys) for line in customers)
    # The key (the field's value and its path) and the content's fingerprint: a resend of the same
    # customer is dropped, the same customer with a new plan reaches the consumer.
    assert [dedup_id.rsplit("#", 1)[0] for dedup_id in dedup_ids] == ["c-1#customer_id"] * 2 + [
        "c-2#customer_id"
    ]


def test_a_consumer_keyed_by_dedup_id_needs_the_key_fields_and_a_group(cloud, tmp_path):
    pipeline = deploy_pipeline(environment={"KEY_SOURCE": "dedup_id"})
    with_topic(pipeline)
    path = write(tmp_path, LINES[:1])
    code, _, err = send(path)
    assert code == 1 and "key_source dedup_id needs key_fields" in err and "(--key-fields PATH,...)" in err
    code, _, err = send(path, "--key-fields", "order_id,line_id")
    assert code == 1 and "pass --group-field PATH (messages with the same value stay in order)" in err
    code, out, err = send(path, "--key-fields", "order_id,line_id", "--group-field", "order_id")
    assert code == 0, out + err
    (received,) = drain(pipeline.queue_url)
    assert (received["Attributes"]["MessageDeduplicationId"], received["Attributes"]["MessageGroupId"]) == (
        "o-1#1",
        "o-1",
    )


@pytest.mark.parametrize(
    ("argv", "stdin", "error"),
    [
        (["/nonexistent/orders.jsonl"], None, "error: cannot read /nonexistent/orders.jsonl: No such file"),
        (["--group-field", "a..b"], "{}", "error: --group-field: field path 'a..b' has an empty segment"),
    ],
)
def test_input_and_options_that_cannot_work_are_named(cloud, argv, stdin, error):
    pipeline = deploy_pipeline(environment=ORDERS)
    with_topic(pipeline)
    code, _, err = send(*argv, stdin=stdin)
    assert code == 1 and err.startswith(error), err


def test_without_a_file_a_terminal_is_not_read(cloud):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    args = parser().parse_args(["send"])
    err = io.StringIO()
    assert run(args, stdin=Terminal(), out=io.StringIO(), err=err) == 1
    assert "give a FILE of JSON lines, or pipe them to stdin" in err.getvalue()


@pytest.mark.parametrize("document", ["README.md", "docs/local-cloud.md", "docs/runtime.md"])
def test_every_documented_command_line_is_one_the_cli_accepts(document):
    """The own-app path and its walkthrough run as written: each `idempotent-pipeline ...` in a bash block
    parses (the wheel test runs the path itself)."""
    import re
    import shlex

    text = (Path(__file__).resolve().parents[2] / document).read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = list(shlex.shlex(line, posix=True, punctuation_chars=True))  # without comments
            while "idempotent-pipeline" in words:
                words = words[words.index("idempotent-pipeline") + 1 :]
                end = next((i for i, w in enumerate(words) if w in ("|", ">", "&&", ";", "||")), len(words))
                commands.append(words[:end])
    assert any(command[:1] == ["send"] for command in commands), (
        document if document != "docs/runtime.md" else ""
    )
    for command in commands:
        try:
            parser().parse_args(command)
        except SystemExit:
            pytest.fail(f"{document}: `idempotent-pipeline {' '.join(command)}` does not parse")


def test_ctrl_c_says_what_was_published_and_that_sending_again_is_safe(cloud, tmp_path):
    pipeline = deploy_pipeline(environment=ORDERS)
    with_topic(pipeline)
    lines = [json.dumps({"order_id": f"o-{i}", "line_id": "1"}) for i in range(12)]

    def connect(args: Any) -> Any:
        from idempotent_cli import aws

        clients = aws.connect(local=False)
        calls: list[int] = []

        def interrupt(**_: Any) -> None:
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt

        clients("sns").meta.events.register("before-call.sns.PublishBatch", interrupt)
        return clients

    code, out, err = send(write(tmp_path, lines), connect=connect)
    assert code == 130 and out == ""
    assert "interrupted: 10 of 12 published before the last request, which may or may not have been." in err
    assert "Sending the same input again is safe and keeps each group's order" in err
    assert len(drain(pipeline.queue_url)) == 10
