"""The event-source runner against functions created in the emulator (code in its S3, as CDK puts it)."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from idempotent_local.emulator import Emulator
from idempotent_local.runner import EventSourceRunner, Mapping, RunnerError, lambda_sqs_event
from idempotent_local.wheels import this_python

PROBE = textwrap.dedent(
    """
    import json
    import os

    import boto3

    _dynamodb = boto3.client("dynamodb")
    TABLE = os.environ["TABLE_NAME"]


    def handler(event, context):
        records = event["Records"]
        _dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "batch"}, "sk": {"S": context.aws_request_id},
                                                  "size": {"N": str(len(records))}})
        failures = []
        for record in records:
            if record["body"] == "raise":
                raise RuntimeError("the whole batch fails")
            if record["body"].startswith("fail"):
                failures.append({"itemIdentifier": record["messageId"]})
                continue
            _dynamodb.put_item(TableName=TABLE, Item={
                "pk": {"S": "record"}, "sk": {"S": record["body"]},
                "marker": {"S": os.environ["MARKER"]}, "record": {"S": json.dumps(record)}})
        return {"batchItemFailures": failures}
    """
)


@dataclass
class Deployed:
    emulator: Emulator
    queue_url: str
    queue_arn: str
    dlq_url: str
    table: str

    def send(self, *bodies: str, group: str = "g") -> None:
        sqs = self.emulator.client("sqs")
        for body in bodies:
            sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=body,
                MessageGroupId=group,
                MessageDeduplicationId=uuid.uuid4().hex,
                MessageAttributes={"source": {"DataType": "String", "StringValue": "test"}},
            )

    def items(self, kind: str) -> list[dict]:
        response = self.emulator.client("dynamodb").scan(TableName=self.table)
        return [item for item in response["Items"] if item["pk"]["S"] == kind]

    def runner(self, **kwargs: object) -> EventSourceRunner:
        return EventSourceRunner(self.emulator, work_dir=None, **kwargs)  # type: ignore[arg-type]


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _deploy(
    emulator: Emulator,
    *,
    code: dict[str, str] | None = None,
    handler: str = "probe.handler",
    batch_size: int = 10,
    visibility_timeout: int = 30,
    max_receive_count: int = 2,
    inline: bool = False,
) -> Deployed:
    """The queue, its DLQ, the table and the function mapped to the queue; its code from a bucket, or
    ``inline`` (``Code.ZipFile``, as a template's inline code is deployed)."""
    sqs, dynamodb, s3 = emulator.client("sqs"), emulator.client("dynamodb"), emulator.client("s3")
    iam, lambda_ = emulator.client("iam"), emulator.client("lambda")
    dlq = sqs.create_queue(QueueName="dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(
        QueueName="queue.fifo",
        Attributes={
            "FifoQueue": "true",
            "VisibilityTimeout": str(visibility_timeout),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count}
            ),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    dynamodb.create_table(
        TableName="items",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
    )
    package = _zip(code or {"probe.py": PROBE})
    s3.create_bucket(Bucket="assets")
    s3.put_object(Bucket="assets", Key="code.zip", Body=package)
    role = iam.create_role(RoleName="consumer", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lambda_.create_function(
        FunctionName="consumer",
        Runtime="python3.12",
        Role=role,
        Handler=handler,
        Timeout=10,
        Code={"ZipFile": package} if inline else {"S3Bucket": "assets", "S3Key": "code.zip"},
        Environment={"Variables": {"TABLE_NAME": "items", "MARKER": "from-the-emulator"}},
    )
    lambda_.create_event_source_mapping(
        EventSourceArn=queue_arn,
        FunctionName="consumer",
        BatchSize=batch_size,
        FunctionResponseTypes=["ReportBatchItemFailures"],
    )
    return Deployed(emulator, queue, queue_arn, dlq, "items")


def test_lambda_sqs_event_has_the_shape_lambda_delivers() -> None:
    message = {
        "MessageId": "m-1",
        "ReceiptHandle": "rh",
        "MD5OfBody": "md5",
        "Body": '{"x": 1}',
        "MD5OfMessageAttributes": "md5a",
        "Attributes": {
            "ApproximateReceiveCount": "2",
            "SentTimestamp": "1",
            "SenderId": "s",
            "ApproximateFirstReceiveTimestamp": "2",
            "SequenceNumber": "18",
            "MessageGroupId": "g",
            "MessageDeduplicationId": "d",
        },
        "MessageAttributes": {
            "text": {"DataType": "String", "StringValue": "v"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        },
    }
    (record,) = lambda_sqs_event([message], "arn:aws:sqs:eu-west-1:1:q.fifo", "eu-west-1")["Records"]
    assert record == {
        "messageId": "m-1",
        "receiptHandle": "rh",
        "body": '{"x": 1}',
        "attributes": message["Attributes"],
        "messageAttributes": {
            "text": {
                "stringValue": "v",
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "String",
            },
            "blob": {
                "binaryValue": base64.b64encode(b"\x00\x01").decode(),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "Binary",
            },
        },
        "md5OfMessageAttributes": "md5a",
        "md5OfBody": "md5",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:eu-west-1:1:q.fifo",
        "awsRegion": "eu-west-1",
    }


def test_mappings_are_read_back_from_the_emulator(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator, batch_size=4)
    with deployed.runner() as runner:
        (mapping,) = runner.mappings()
    assert mapping == Mapping(
        uuid=mapping.uuid,
        function_arn=mapping.function_arn,
        queue_arn=deployed.queue_arn,
        queue_url=deployed.queue_url,
        batch_size=4,
        report_batch_item_failures=True,
        enabled=True,
        max_receive_count=2,
    )
    assert mapping.function_name == "consumer"


def test_deployed_code_runs_with_the_functions_environment_and_succeeded_records_are_deleted(
    clean_emulator: Emulator,
) -> None:
    deployed = _deploy(clean_emulator)
    deployed.send("a", "b", "c")
    with deployed.runner() as runner:
        stats = runner.drain(timeout=60)
    items = deployed.items("record")
    assert sorted(item["sk"]["S"] for item in items) == ["a", "b", "c"]
    assert {item["marker"]["S"] for item in items} == {"from-the-emulator"}
    record = json.loads(items[0]["record"]["S"])
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == deployed.queue_arn
    assert record["attributes"]["MessageGroupId"] == "g"
    assert record["messageAttributes"]["source"]["stringValue"] == "test"
    assert (stats.delivered, stats.succeeded, stats.failed) == (3, 3, 0)
    assert runner.backlog(runner.mappings()[0]) == 0


def test_batches_never_exceed_the_mappings_batch_size(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator, batch_size=2)
    deployed.send(*[f"m{n}" for n in range(5)])
    with deployed.runner() as runner:
        runner.drain(timeout=60)
    sizes = [int(item["size"]["N"]) for item in deployed.items("batch")]
    assert max(sizes) == 2
    assert sum(sizes) == 5


def test_reported_failures_come_back_and_reach_the_dead_letter_queue_after_max_receive_count(
    clean_emulator: Emulator,
) -> None:
    deployed = _deploy(clean_emulator, max_receive_count=2)
    deployed.send("ok-1", group="g1")
    deployed.send("fail-1", group="g2")
    with deployed.runner(retry_delay=0) as runner:
        stats = runner.drain(timeout=60)
    assert [item["sk"]["S"] for item in deployed.items("record")] == ["ok-1"]
    dead = clean_emulator.client("sqs").receive_message(QueueUrl=deployed.dlq_url, AttributeNames=["All"])
    assert [m["Body"] for m in dead["Messages"]] == ["fail-1"]
    assert stats.failed == 2  # received twice (maxReceiveCount), failed twice, then redriven
    assert stats.delivered == 2


def test_without_a_retry_delay_a_failed_record_waits_for_the_visibility_timeout(
    clean_emulator: Emulator,
) -> None:
    deployed = _deploy(clean_emulator, visibility_timeout=600)
    deployed.send("fail-1")
    with deployed.runner() as runner:
        (mapping,) = runner.mappings()
        assert runner.poll(mapping, wait_seconds=0) == 1
        assert runner.poll(mapping, wait_seconds=0) == 0  # still invisible: in flight until the timeout
        assert runner.backlog(mapping) == 1
    assert runner.stats.failed == 1


def test_an_exception_fails_the_whole_batch(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator, visibility_timeout=600)
    deployed.send("raise", "b")
    with deployed.runner() as runner:
        (mapping,) = runner.mappings()
        runner.poll(mapping, wait_seconds=0)
        assert runner.stats.whole_batch_failures == 1
        assert runner.stats.failed == 2
        assert runner.backlog(mapping) == 2  # nothing deleted
    assert deployed.items("record") == []


def test_a_function_that_fails_its_cold_start_is_reported_with_the_error(clean_emulator: Emulator) -> None:
    broken = {"probe.py": 'raise RuntimeError("TABLE_NAME is required; got nothing")\n'}
    deployed = _deploy(clean_emulator, code=broken)
    deployed.send("a")
    with (
        deployed.runner() as runner,
        pytest.raises(RunnerError, match="cold start: RuntimeError: TABLE_NAME"),
    ):
        runner.drain(timeout=30)


def test_run_long_polls_for_the_mappings_batch_size_until_stopped(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator, batch_size=3)
    deployed.send("a", "b")
    stop = threading.Event()
    receives: list[dict] = []
    with deployed.runner() as runner:  # the runner's own default wait, as `local run` uses it
        runner.emulator.client("sqs").meta.events.register(
            "provide-client-params.sqs.ReceiveMessage",
            lambda params, **kwargs: receives.append(dict(params)),
        )
        thread = threading.Thread(target=runner.run, args=(stop,))
        thread.start()
        deadline = time.monotonic() + 60
        while len(deployed.items("record")) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert sorted(item["sk"]["S"] for item in deployed.items("record")) == ["a", "b"]
    assert runner.stats.succeeded == 2
    # Long polling (as Lambda's poller does), never a busy loop of short polls, for up to BatchSize records.
    assert receives
    assert {r["QueueUrl"] for r in receives} == {deployed.queue_url}
    assert min(r["WaitTimeSeconds"] for r in receives) >= 1
    assert {r["MaxNumberOfMessages"] for r in receives} == {3}


def test_redeployed_code_replaces_the_warm_worker(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator)
    with deployed.runner() as runner:
        deployed.send("before")
        runner.drain(timeout=60)
        s3, lambda_ = clean_emulator.client("s3"), clean_emulator.client("lambda")
        s3.put_object(
            Bucket="assets",
            Key="code-2.zip",
            Body=_zip({"probe.py": PROBE.replace('os.environ["MARKER"]', '"second version"')}),
        )
        lambda_.update_function_code(FunctionName="consumer", S3Bucket="assets", S3Key="code-2.zip")
        deployed.send("after")
        runner.drain(timeout=60)
    markers = {item["sk"]["S"]: item["marker"]["S"] for item in deployed.items("record")}
    assert markers == {"before": "from-the-emulator", "after": "second version"}


def test_a_function_whose_code_is_inline_runs_and_its_new_inline_code_replaces_the_worker(
    clean_emulator: Emulator,
) -> None:
    deployed = _deploy(clean_emulator, inline=True)  # moto keeps inline code in no bucket
    with deployed.runner() as runner:
        deployed.send("before")
        runner.drain(timeout=60)
        second = _zip({"probe.py": PROBE.replace('os.environ["MARKER"]', '"second version"')})
        clean_emulator.client("lambda").update_function_code(FunctionName="consumer", ZipFile=second)
        deployed.send("after")
        stats = runner.drain(timeout=60)
    markers = {item["sk"]["S"]: item["marker"]["S"] for item in deployed.items("record")}
    assert markers == {"before": "from-the-emulator", "after": "second version"}
    assert (stats.delivered, stats.succeeded, stats.unable) == (2, 2, {})


# A function that reports as the runtime does: one Embedded Metric Format line per batch, and a log line
# naming the outcome of each record that is not processed or a duplicate.
REPORTING = textwrap.dedent(
    """
    import json
    import os

    import boto3

    _dynamodb = boto3.client("dynamodb")
    TABLE = os.environ["TABLE_NAME"]


    def _first_attempt(body):
        try:
            _dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "attempt"}, "sk": {"S": body}},
                               ConditionExpression="attribute_not_exists(pk)")
            return True
        except _dynamodb.exceptions.ConditionalCheckFailedException:
            return False


    def handler(event, context):
        counts = {"processed": 0, "duplicates": 0, "quarantined": 0, "failed": 0}
        failures = []
        for record in event["Records"]:
            body = record["body"]
            if body.startswith("poison"):
                outcome = "quarantined"
            elif body.startswith("fail") or (body.startswith("flaky") and _first_attempt(body)):
                outcome = "failed"
                failures.append({"itemIdentifier": record["messageId"]})
            elif body.startswith("again"):
                outcome = "duplicate"
            else:
                outcome = "processed"
            counts["duplicates" if outcome == "duplicate" else outcome] += 1
            if outcome in ("quarantined", "failed"):
                print(json.dumps({"level": "WARNING", "message_id": record["messageId"], "outcome": outcome}))
        metrics = [{"Name": name, "Unit": "Count"} for name in counts]
        directive = {"Namespace": "Test", "Dimensions": [["FunctionName"]], "Metrics": metrics}
        emf = {"_aws": {"Timestamp": 0, "CloudWatchMetrics": [directive]}, "FunctionName": "consumer"}
        print(json.dumps({**emf, **counts}))
        return {"batchItemFailures": failures}
    """
)


def test_each_batch_is_reported_with_its_groups_outcomes_and_the_running_totals(
    clean_emulator: Emulator,
) -> None:
    deployed = _deploy(clean_emulator, code={"probe.py": REPORTING})
    deployed.send("new-1", "again-1", group="g1")
    deployed.send("poison-1", group="g2")
    lines: list[str] = []
    with deployed.runner(report=lines.append) as runner:
        (mapping,) = runner.mappings()
        assert runner.poll(mapping, wait_seconds=0) == 3
        deployed.send("new-2", group="g3")
        assert runner.poll(mapping, wait_seconds=0) == 1
    assert lines == [
        "consumer: 3 records (groups g1, g2) -> 1 processed, 1 duplicate, 1 quarantined"
        " | run total, every function: 3 messages: 1 processed, 1 duplicate, 1 quarantined, 0 failed",
        "consumer: 1 record (group g3) -> 1 processed"
        " | run total, every function: 4 messages: 2 processed, 1 duplicate, 1 quarantined, 0 failed",
    ]
    assert runner.stats.metrics == {"processed": 2, "duplicates": 1, "quarantined": 1, "failed": 0}


def test_the_summary_counts_each_message_once_by_its_last_outcome(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator, code={"probe.py": REPORTING}, max_receive_count=2)
    deployed.send("flaky-1", group="g1")  # fails once, then is processed
    deployed.send("fail-1", group="g2")  # fails on both receives: SQS moves it to the DLQ
    deployed.send("new-1", group="g3")
    with deployed.runner(retry_delay=0) as runner:
        stats = runner.drain(timeout=60)
    assert stats.records == 5  # deliveries: flaky twice, fail twice, new once
    assert stats.totals() == {"processed": 2, "duplicate": 0, "quarantined": 0, "failed": 1, "succeeded": 0}
    assert stats.summary() == (
        "3 messages: 2 processed, 0 duplicate, 0 quarantined, 1 failed; 5 deliveries in "
        f"{stats.invocations} invocations; of the 1 failed, 1 reached the queue's maxReceiveCount (SQS moves "
        "them to the dead-letter queue) and 0 will be delivered again"
    )


def test_a_failed_batch_is_reported_with_the_functions_error(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator, visibility_timeout=600)
    deployed.send("raise")
    lines: list[str] = []
    with deployed.runner(report=lines.append) as runner:
        runner.poll(runner.mappings()[0], wait_seconds=0)
    assert lines == [
        "consumer: 1 record (group g) -> 1 failed: the function raised RuntimeError: the whole batch fails"
        " | run total, every function: 1 message: 0 processed, 0 duplicate, 0 quarantined, 1 failed"
    ]


def _visible(emulator: Emulator, url: str) -> int:
    attributes = emulator.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def _receives(emulator: Emulator, url: str) -> list[str]:
    """The receive counts of the messages in the queue, after this very receive (which counts)."""
    sqs = emulator.client("sqs")
    messages = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"], VisibilityTimeout=0
    ).get("Messages", [])
    return [m["Attributes"]["ApproximateReceiveCount"] for m in messages]


def test_a_function_that_fails_its_cold_start_leaves_its_messages_unreceived(
    clean_emulator: Emulator,
) -> None:
    """A cold start that fails every time would otherwise use up the messages' receives, and the queue would
    move them to the dead-letter queue without a reason."""
    broken = {"probe.py": 'raise RuntimeError("TABLE_NAME is required; got nothing")\n'}
    deployed = _deploy(clean_emulator, code=broken, visibility_timeout=600)
    deployed.send("a")
    with deployed.runner(retry_delay=0) as runner:
        (mapping,) = runner.mappings()
        for _ in range(3):
            with pytest.raises(RunnerError, match="cold start: RuntimeError: TABLE_NAME"):
                runner.poll(mapping, wait_seconds=0)
    assert _receives(clean_emulator, deployed.queue_url) == ["1"]  # this receive is the first
    assert runner.stats.totals()["failed"] == 0 and runner.stats.invocations == 0


# What pip leaves of a compiled dependency installed for the function's runtime in AWS (CPython 3.14, arm64):
# an extension module this Python does not even look for, and the wheel's tag.
FOREIGN = {
    "probe.py": "import native\n" + PROBE,
    "native/__init__.py": "from native._speedups import speed\n",
    "native/_speedups.cpython-314-aarch64-linux-gnu.so": "\x7fELF (built for aarch64)",
    "native-2.1.dist-info/WHEEL": (
        "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp314-cp314-manylinux_2_17_aarch64\n"
    ),
    "pure-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}


def test_code_bundled_for_another_python_is_named_before_anything_is_received(
    clean_emulator: Emulator,
) -> None:
    deployed = _deploy(clean_emulator, code=FOREIGN, visibility_timeout=600)
    deployed.send("a")
    with deployed.runner(retry_delay=0) as runner, pytest.raises(RunnerError) as raised:
        runner.poll(runner.mappings()[0], wait_seconds=0)
    assert str(raised.value).startswith(
        "function consumer cannot run on this machine: its code holds native 2.1 "
        f"(cp314-cp314-manylinux_2_17_aarch64), which {this_python()} (the Python `local run` uses) cannot "
        "import: its requirements were installed for the function's runtime in AWS. Redeploy with "
        "`idempotent-pipeline local deploy`"
    )
    assert "pure 1.0" not in str(raised.value)
    assert _receives(clean_emulator, deployed.queue_url) == ["1"]


def test_run_says_once_that_a_function_cannot_run_and_sums_it_up(
    clean_emulator: Emulator, capsys: pytest.CaptureFixture
) -> None:
    deployed = _deploy(clean_emulator, code=FOREIGN, visibility_timeout=600)
    deployed.send("a")
    stop = threading.Event()
    attempts: list[str] = []
    with deployed.runner(retry_delay=0) as runner:
        runner.emulator.client("lambda").meta.events.register(
            "provide-client-params.lambda.GetFunctionConfiguration",
            lambda params, **kwargs: attempts.append(params["FunctionName"]),
        )
        thread = threading.Thread(target=runner.run, args=(stop,))
        thread.start()
        deadline = time.monotonic() + 120
        while len(attempts) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        thread.join(60)
    assert len(attempts) >= 3  # tried again and again (a redeploy would fix it) ...
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("runner: consumer: ")]
    assert len(said) == 1 and "cannot run on this machine" in said[0]  # ... and said it once
    assert "\nconsumer could not run, its messages wait in the queue: function consumer cannot run" in (
        runner.stats.summary()
    )
    assert _receives(clean_emulator, deployed.queue_url) == ["1"]


def test_stopping_abandons_a_cold_start_in_progress(clean_emulator: Emulator) -> None:
    """Ctrl-C during a slow cold start: the runner stops at once, it does not wait for the import."""
    slow = {"probe.py": "import time\ntime.sleep(300)\n"}
    deployed = _deploy(clean_emulator, code=slow)
    stop = threading.Event()
    runner = deployed.runner()
    thread = threading.Thread(target=runner.run, args=(stop,))
    thread.start()
    deadline = time.monotonic() + 60
    while not any(w.process is not None for w in list(runner.invoker.workers.values())):
        assert time.monotonic() < deadline, "the worker never started"
        time.sleep(0.1)
    started = time.monotonic()
    stop.set()
    thread.join(120)
    runner.close()
    # The cold start's own limit is 60 s: stopping does not wait for it.
    assert not thread.is_alive() and time.monotonic() - started < 30


def _local_run(emulator: Emulator, *args: str, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    """`local run` in its own process group; ``ignore_sigint``: as a script's shell starts a background job
    (`idempotent-pipeline local run &`), with SIGINT ignored."""
    return subprocess.Popen(
        [sys.executable, "-m", "idempotent_local", "run", "--state-dir", emulator.state_dir, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None,
    )


@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["foreground", "background-of-a-script"])
def test_local_run_stops_on_ctrl_c(clean_emulator: Emulator, ignore_sigint: bool) -> None:
    _deploy(clean_emulator)
    runner = _local_run(clean_emulator, "--wait", "1", ignore_sigint=ignore_sigint)
    assert runner.stdout is not None
    assert runner.stdout.readline().startswith("polling 1 event source mapping(s)")  # it is running
    os.killpg(runner.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group
    try:
        out, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
    assert runner.returncode == 0, out + err
    assert out.strip().splitlines()[-1].startswith("0 messages: ")
    log = Path(clean_emulator.state_dir) / "logs" / "consumer.log"
    assert "KeyboardInterrupt" not in (log.read_text() if log.exists() else "")  # the runner stops them


def test_local_run_drain_processes_everything_then_exits_with_a_summary(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator, max_receive_count=2)
    deployed.send("ok-1", "ok-2")
    drained = _local_run(clean_emulator, "--drain", "--retry-delay", "0")
    out, err = drained.communicate(timeout=300)
    assert drained.returncode == 0, out + err
    assert "until every queue is empty" in out.splitlines()[0]
    assert out.strip().splitlines()[-1] == (
        "2 messages: 0 processed, 0 duplicate, 0 quarantined, 0 failed, 2 succeeded; 2 deliveries in "
        "1 invocation"
    )
    assert sorted(item["sk"]["S"] for item in deployed.items("record")) == ["ok-1", "ok-2"]
    deployed.send("fail-1")  # fails on both receives: SQS moves it to the DLQ
    failing = _local_run(clean_emulator, "--drain", "--retry-delay", "0")
    out, err = failing.communicate(timeout=300)
    assert failing.returncode == 1, out + err
    assert "1 failed" in out.strip().splitlines()[-1]


def test_local_run_drain_lists_a_disabled_mapping_as_not_polled(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator)
    sqs, lambda_ = clean_emulator.client("sqs"), clean_emulator.client("lambda")
    paused = sqs.create_queue(QueueName="paused.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    paused_arn = sqs.get_queue_attributes(QueueUrl=paused, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    lambda_.create_event_source_mapping(EventSourceArn=paused_arn, FunctionName="consumer", Enabled=False)
    deployed.send("ok-1")

    drained = _local_run(clean_emulator, "--drain", "--retry-delay", "0")
    out, err = drained.communicate(timeout=300)

    assert drained.returncode == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("polling 1 event source mapping(s) on ")
    assert lines[1] == f"    {deployed.queue_arn} -> consumer (batch 10)"
    assert lines[2] == f"    not polled (disabled): {paused_arn} -> consumer (batch 10)"


def test_run_polls_every_mapping_at_the_same_time(clean_emulator: Emulator) -> None:
    deployed = _deploy(clean_emulator)
    sqs, lambda_ = clean_emulator.client("sqs"), clean_emulator.client("lambda")
    other = sqs.create_queue(QueueName="other.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    other_arn = sqs.get_queue_attributes(QueueUrl=other, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    lambda_.create_function(
        FunctionName="second",
        Runtime="python3.12",
        Role=lambda_.get_function(FunctionName="consumer")["Configuration"]["Role"],
        Handler="probe.handler",
        Code={"S3Bucket": "assets", "S3Key": "code.zip"},
        Environment={"Variables": {"TABLE_NAME": "items", "MARKER": "second"}},
    )
    lambda_.create_event_source_mapping(EventSourceArn=other_arn, FunctionName="second", BatchSize=10)
    waiting: set[str] = set()
    together: list[set[str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def receiving(params: dict, **kwargs: object) -> None:
        with lock:
            waiting.add(params["QueueUrl"])
            if len(waiting) == 2:
                together.append(set(waiting))
                stop.set()

    def received(params: dict, **kwargs: object) -> None:
        with lock:
            waiting.discard(params["QueueUrl"])

    with deployed.runner(wait_seconds=3) as runner:
        runner.emulator.client("sqs").meta.events.register(
            "provide-client-params.sqs.ReceiveMessage", receiving
        )
        original = runner.emulator.client("sqs").receive_message

        def receive_message(**params: object) -> dict:
            try:
                return original(**params)
            finally:
                received(params)

        runner.emulator.client("sqs").receive_message = receive_message  # type: ignore[method-assign]
        thread = threading.Thread(target=runner.run, args=(stop,), kwargs={"refresh_seconds": 1})
        thread.start()
        stop.wait(20)
        stop.set()
        thread.join(30)
    assert together and together[0] == {deployed.queue_url, other}  # both queues long-polled at once


def test_the_summary_of_one_delivery_speaks_in_the_singular() -> None:
    from idempotent_local.runner import Stats

    stats = Stats(invocations=1, records=1, outcomes={"m-1": "processed"})
    assert stats.summary() == (
        "1 message: 1 processed, 0 duplicate, 0 quarantined, 0 failed; 1 delivery in 1 invocation"
    )
