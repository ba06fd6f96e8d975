"""Finding the queues: stack outputs, stack resources, the only pipeline, --queue-url, --local; and the
errors that name what was wrong (unknown stack, several pipelines, no DLQ, no credentials, no emulator)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from dlq_helpers import (
    body,
    client,
    dead_letter,
    deploy_pipeline,
    dlq,
    drain,
    make_queue,
)

pytestmark = pytest.mark.usefixtures("cloud")


def _listed(terminal) -> dict:
    return json.loads(terminal.out.getvalue())


def test_a_stack_without_outputs_is_read_from_its_resources():
    pipeline = deploy_pipeline(outputs=False)
    dead_letter(body("r1"), queue_url=pipeline.dlq_url, group_id="g")

    code, terminal = dlq("list", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    assert f"(FIFO) of {pipeline.stack}/{pipeline.function}, in region us-east-1" in terminal.lines[0]
    assert terminal.lines[1].startswith("source queue ") and terminal.lines[1].endswith(
        pipeline.queue_url.rsplit("/", 1)[-1]
    )
    assert "1 read" in terminal.lines


def test_the_stack_may_be_left_out_when_one_pipeline_is_deployed():
    pipeline = deploy_pipeline()
    dead_letter(body("o1"), queue_url=pipeline.dlq_url, group_id="g")

    code, terminal = dlq("list", "--json")

    assert code == 0, terminal.error
    assert _listed(terminal)["read"] == 1


def test_several_pipelines_and_no_stack_is_an_error_naming_them():
    first, second = deploy_pipeline(), deploy_pipeline(outputs=False)

    code, terminal = dlq("list")

    assert code == 1
    assert "error: 2 pipelines are deployed (" in terminal.error
    assert f"{first.stack}/{first.function}" in terminal.error
    assert f"{second.stack}/{second.function}" in terminal.error
    assert "choose one with --stack NAME" in terminal.error


def test_an_unknown_stack_is_an_error_naming_it_and_the_deployed_ones():
    pipeline = deploy_pipeline()

    code, terminal = dlq("list", "--stack", "Nope")

    assert code == 1
    assert terminal.error.startswith("error: unknown stack Nope in region us-east-1; deployed stacks: ")
    assert pipeline.stack in terminal.error


def test_no_pipeline_deployed_is_an_error():
    code, terminal = dlq("redrive")

    assert code == 1
    assert "error: no pipeline is deployed in region us-east-1" in terminal.error


def test_a_stack_without_a_pipeline_is_an_error():
    client("cloudformation").create_stack(
        StackName="just-a-queue",
        TemplateBody=json.dumps(
            {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "just-a-queue"}}}}
        ),
    )

    code, terminal = dlq("list", "--stack", "just-a-queue")

    assert code == 1
    assert "error: stack just-a-queue has no pipeline" in terminal.error


def test_a_pipeline_whose_subscription_has_no_dlq_is_an_error():
    pipeline = deploy_pipeline()

    code, terminal = dlq("list", "--stack", pipeline.stack, "--which", "subscription")

    assert code == 1
    assert "has no dead-letter queue (no RedrivePolicy); pass --queue-url to name one" in terminal.error


def test_a_queue_url_that_does_not_exist_is_an_error():
    code, terminal = dlq("list", "--queue-url", "http://localhost:1/123456789012/nope.fifo")

    assert code == 1
    assert "does not exist" in terminal.error


def test_a_plain_queue_url_without_a_source_can_be_listed_but_not_redriven():
    lonely = make_queue("lonely")
    dead_letter(body("l1"), queue_url=lonely, group_id="g")

    code, terminal = dlq("list", "--queue-url", lonely, "--json")
    assert code == 0 and _listed(terminal)["read"] == 1

    code, terminal = dlq("redrive", "--queue-url", lonely)
    assert code == 1
    assert "the source queue of " in terminal.error and "pass --source-queue-url" in terminal.error
    assert len(drain(lonely)) == 1


def test_a_source_queue_url_with_an_unknown_consumer_keeps_what_it_cannot_key():
    # Without the consumer the key source is unknown: a dead letter that does not name its original
    # deduplication id stays (the consumer might key by it); one that names it is redriven.
    source, dlq_url = make_queue("src"), make_queue("dlq")
    dead_letter(body("k1"), queue_url=dlq_url, group_id="g", dedup_id="k1")
    unkeyed = dead_letter(body("u1"), queue_url=dlq_url, group_id="h", dedup_id=None)

    code, terminal = dlq("redrive", "--queue-url", dlq_url, "--source-queue-url", source)

    assert code == 1
    assert (
        f"kept {unkeyed['MessageId']} (group h): its original deduplication id is unknown (the dead letter "
        "does not name it), and the consumer may key messages by it"
    ) in terminal.out.getvalue()
    assert [m["Body"] for m in drain(source)] == [body("k1")]
    assert [m["Body"] for m in drain(dlq_url)] == [body("u1")]


def test_no_credentials_is_an_error_that_says_how_to_fix_it(monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    code, terminal = dlq("list")

    assert code == 1
    assert "error: no AWS credentials found" in terminal.error and "--profile NAME" in terminal.error


def test_no_region_is_an_error(monkeypatch):
    monkeypatch.delenv("AWS_DEFAULT_REGION")

    code, terminal = dlq("list")

    assert code == 1
    assert "error: no AWS region is configured" in terminal.error


def test_local_outside_any_app_refuses_and_says_how_to_name_one(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, terminal = dlq("list", "--local")

    assert code == 1
    assert "no CDK app here" in terminal.error
    assert "--app-dir" in terminal.error


@pytest.mark.slow
def test_local_finds_the_emulator_of_the_app_from_a_subdirectory(tmp_path: Path, monkeypatch):
    from idempotent_local import emulator as emulators

    (tmp_path / "cdk.json").write_text("{}")
    (tmp_path / "src").mkdir()
    running, _ = emulators.start(tmp_path / emulators.DEFAULT_STATE_DIR)
    try:
        monkeypatch.chdir(tmp_path / "src")
        code, terminal = dlq("list", "--local", "--queue-url", "http://localhost/000000000000/none.fifo")
        # Found from src/ (cdk.json is one level up): the answer comes from that app's emulator.
        assert code == 1
        assert f"does not exist in the local emulator on {running.endpoint} (app {tmp_path.resolve()})" in (
            terminal.error
        )
    finally:
        emulators.stop(tmp_path / emulators.DEFAULT_STATE_DIR)


def test_an_unknown_profile_is_an_error():
    code, terminal = dlq("list", "--profile", "nobody")

    assert code == 1
    assert "nobody" in terminal.error


def test_local_without_a_running_emulator_is_an_error_naming_the_app_directory(tmp_path: Path):
    (tmp_path / "cdk.json").write_text("{}")
    code, terminal = dlq("list", "--local", "--app-dir", str(tmp_path))

    assert code == 1
    assert f"error: no local emulator is running for {tmp_path.resolve()}" in terminal.error
    assert "idempotent-pipeline local deploy" in terminal.error


def test_local_without_the_local_extra_names_the_extra_and_how_to_install_it(tmp_path: Path, monkeypatch):
    (tmp_path / "cdk.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "moto", None)  # `import moto` fails, as without the extra

    code, terminal = dlq("list", "--local", "--app-dir", str(tmp_path))

    assert code == 1
    assert "error: --local: the local cloud needs the `local` extra of idempotent-pipeline" in terminal.error
    assert " -m pip install " in terminal.error
    assert "no local emulator is running" not in terminal.error


@pytest.mark.slow
def test_local_aims_every_client_at_the_emulator_of_the_app_directory(tmp_path: Path, monkeypatch):
    from idempotent_local import emulator as emulators

    # Whatever the shell points at, --local talks to the app's emulator only.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://localhost:9")
    (tmp_path / "cdk.json").write_text("{}")
    state_dir = tmp_path / emulators.DEFAULT_STATE_DIR
    running, _ = emulators.start(state_dir)
    try:
        sqs = running.client("sqs")
        source = sqs.create_queue(QueueName="local-src.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        dlq_url = sqs.create_queue(QueueName="local-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        sqs.send_message(
            QueueUrl=dlq_url, MessageBody=body("x1"), MessageGroupId="g", MessageDeduplicationId="d1"
        )

        code, terminal = dlq(
            "redrive",
            "--local",
            "--app-dir",
            str(tmp_path),
            "--queue-url",
            dlq_url,
            "--source-queue-url",
            source,
        )

        assert "in the local emulator on http://localhost:" in terminal.lines[0], terminal.error
        # A message with no reason in a DLQ without a consumer: SQS moved it, and the key source is unknown,
        # so its deduplication id (the one it still carries) is restored.
        assert code == 0, terminal.out.getvalue()
        [message] = sqs.receive_message(QueueUrl=source, AttributeNames=["All"])["Messages"]
        assert message["Body"] == body("x1")
        assert message["Attributes"]["MessageDeduplicationId"] == "d1"
    finally:
        emulators.stop(state_dir)
