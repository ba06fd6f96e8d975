"""Start a workflow exactly once: guarded mode with ``idempotent_runtime.workflows.start_execution_once``,
through the bundled handler, against moto's Step Functions.

What moto 5.2.5 models as the StartExecution API reference says, for a STANDARD state machine: names are
unique per state machine; the name and input of a RUNNING execution return that execution; a closed one
(any input) or another input fail ``ExecutionAlreadyExists``; inputs are compared as text. Where it differs,
the tests say so: executions never end by themselves (``StopExecution`` closes one, ABORTED); it reads an
execution at once (AWS's DescribeExecution is eventually consistent: stubbed below); it applies the Standard
name rules to Express state machines too and describes their executions (AWS does neither - the runtime
refuses Express before anything starts, so no stub is needed); and it accepts names AWS refuses (surrogates,
U+FFFE, U+FFFF): names are checked against the API reference's rules here, not only by moto.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import boto3
import pytest
from idempotent_runtime import workflows
from idempotent_runtime.message import Key
from idempotent_runtime.payload import sha256_hex
from idempotent_runtime.testing import message
from idempotent_runtime.workflows import (
    ExecutionConflict,
    execution_input,
    execution_name,
    start_execution_once,
)
from runtime_helpers import (
    REGION,
    Clock,
    die_before_completion,
    dlq_details,
    dlq_reason,
    drain,
    event,
    log_lines,
    record,
    scan,
)

# The reference app's shipped processor (examples/workflow), imported as a code asset holds it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "workflow"))

DAY = 24 * 3600
DEFINITION = json.dumps({"StartAt": "Ship", "States": {"Ship": {"Type": "Pass", "End": True}}})
ROLE = "arn:aws:iam::123456789012:role/workflow"
ORDER = {"x": "cust-7", "y": "order-1", "cents": 2500}


def _client():
    # Explicit fake credentials: the client never depends on (or reaches) a real account.
    return boto3.client(
        "stepfunctions", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@pytest.fixture(scope="module")
def _sfn():
    return _client()


@pytest.fixture
def sfn(_sfn):
    workflows._standard.clear()  # each test has its own moto: nothing is known about its state machines
    return _sfn


@pytest.fixture
def fresh_sfn():
    """A client of its own, for tests that register botocore hooks on it."""
    workflows._standard.clear()
    return _client()


def _state_machine(sfn, kind: str = "STANDARD") -> str:
    name = f"orders-{uuid.uuid4().hex[:8]}"
    return sfn.create_state_machine(name=name, definition=DEFINITION, roleArn=ROLE, type=kind)[
        "stateMachineArn"
    ]


@pytest.fixture
def state_machine(sfn, monkeypatch) -> str:
    arn = _state_machine(sfn)
    monkeypatch.setenv("STATE_MACHINE_ARN", arn)  # what the shipped order_workflow.start reads
    return arn


def _executions(sfn, state_machine_arn: str) -> list[dict]:
    listed = sfn.list_executions(stateMachineArn=state_machine_arn)["executions"]
    return [
        {
            "name": e["name"],
            "status": e["status"],
            "input": sfn.describe_execution(executionArn=e["executionArn"])["input"],
        }
        for e in listed
    ]


def _guarded(make_handler, clock=None, **config):
    config.setdefault("processor", "order_workflow:start")
    return make_handler(clock=clock or Clock(), mode="guarded", **config)


def _result(dynamodb, pk: str = "cust-7", sk: str = "order-1"):
    (item,) = [i for i in scan(dynamodb) if (i["pk"]["S"], i["sk"]["S"]) == (pk, sk)]
    return item["idempotency:status"]["S"], json.loads(item["idempotency:result"]["S"])


def test_a_new_key_starts_one_execution_named_for_the_key_and_stores_its_arn(
    make_handler, sfn, state_machine, dynamodb
):
    handler, _ = _guarded(make_handler)
    (result,) = handler.process_batch(event(record(ORDER)), None)
    arn = f"arn:aws:states:{REGION}:123456789012:execution:{state_machine.split(':')[-1]}:cust-7_order-1"
    assert (result.outcome, result.result) == ("processed", arn)
    assert _executions(sfn, state_machine) == [
        {"name": "cust-7_order-1", "status": "RUNNING", "input": execution_input(ORDER)}
    ]
    assert _result(dynamodb) == ("COMPLETED", arn)


def test_the_input_is_canonical_json_so_one_value_is_one_text():
    assert execution_input({"b": [1, "é"], "a": 1}) == '{"a":1,"b":[1,"\\u00e9"]}'
    body = message('{"x": "c", "y": "o", "cents": 2.50, "n": 1E+2}', mode="guarded").data
    again = message('{"n": 100, "cents": 2.5, "y": "o", "x": "c"}', mode="guarded").data
    assert execution_input(body) == execution_input(again)


def test_a_duplicate_delivery_while_the_execution_runs_and_after_it_closed_returns_its_arn(
    make_handler, sfn, state_machine
):
    handler, _ = _guarded(make_handler)
    (first,) = handler.process_batch(event(record(ORDER)), None)
    (running,) = handler.process_batch(event(record(ORDER)), None)
    sfn.stop_execution(executionArn=first.result)  # moto's executions run until stopped
    (closed,) = handler.process_batch(event(record(ORDER)), None)
    assert [(r.outcome, r.result) for r in (running, closed)] == [("duplicate", first.result)] * 2
    assert [e["name"] for e in _executions(sfn, state_machine)] == ["cust-7_order-1"]


@pytest.mark.parametrize("closed", [False, True], ids=["still-running", "closed-meanwhile"])
def test_a_crash_between_the_start_and_the_completion_starts_nothing_new_on_redelivery(
    make_handler, sfn, state_machine, fresh_dynamodb, closed
):
    clock = Clock()
    handler, _ = _guarded(make_handler, clock, client=fresh_dynamodb, lease_seconds=30)
    delivery = record(ORDER)
    die_before_completion(handler, fresh_dynamodb, delivery)
    (started,) = sfn.list_executions(stateMachineArn=state_machine)["executions"]
    if closed:  # StartExecution now refuses the name: the execution's input is looked up
        sfn.stop_execution(executionArn=started["executionArn"])

    clock.now += 30 + 10 + 1  # the claim's lease (and its margin) expires; SQS delivers the message again
    delivery["attributes"]["ApproximateReceiveCount"] = "2"
    (again,) = handler.process_batch(event(delivery), None)
    assert (again.outcome, again.result) == ("processed", started["executionArn"])
    assert len(_executions(sfn, state_machine)) == 1
    assert _result(fresh_dynamodb) == ("COMPLETED", started["executionArn"])


def test_a_delivery_after_the_key_record_expired_finds_the_execution_step_functions_keeps(
    make_handler, sfn, state_machine
):
    clock = Clock()
    handler, _ = _guarded(make_handler, clock)
    (first,) = handler.process_batch(event(record(ORDER)), None)
    sfn.stop_execution(executionArn=first.result)
    clock.now += 8 * DAY  # past DEDUP_TTL_SECONDS (7 days), within Step Functions' 90 days
    (late,) = handler.process_batch(event(record(ORDER)), None)
    assert (late.outcome, late.result) == ("processed", first.result)
    assert len(_executions(sfn, state_machine)) == 1


def test_the_same_key_with_another_input_is_a_conflict_quarantined_and_starts_nothing(
    make_handler, sfn, state_machine, sqs, dlq_url
):
    clock = Clock()
    handler, stream = _guarded(make_handler, clock, dlq_url=dlq_url)
    (first,) = handler.process_batch(event(record(ORDER)), None)
    clock.now += 8 * DAY  # the key's record expired: only the execution remembers the first order
    other = {**ORDER, "cents": 9999}
    (result,) = handler.process_batch(event(record(other)), None)
    assert (result.outcome, result.conflict) == ("quarantined", True)
    assert _executions(sfn, state_machine) == [
        {"name": "cust-7_order-1", "status": "RUNNING", "input": execution_input(ORDER)}
    ]
    (dead,) = drain(sqs, dlq_url)
    details = dlq_details(dead)
    ours = sha256_hex(execution_input(other).encode())
    theirs = sha256_hex(execution_input(ORDER).encode())
    assert (details["kind"], details["fingerprint"], details["stored_fingerprint"]) == (
        "conflict",
        ours,
        theirs,
    )
    assert dlq_reason(dead) == (
        f"conflict: execution {first.result} of key cust-7#order-1 exists with another input (fingerprint "
        f"{theirs}), this message's input fingerprint is {ours}"
    )
    assert log_lines(stream)[-1]["conflicts"] == 1


@pytest.mark.parametrize("closed", [False, True], ids=["running", "closed"])
def test_another_input_for_an_existing_execution_raises_a_conflict(sfn, state_machine, closed):
    delivery = message(ORDER, mode="guarded")
    arn = start_execution_once(delivery, state_machine, ORDER, client=sfn)
    if closed:
        sfn.stop_execution(executionArn=arn)
    with pytest.raises(ExecutionConflict) as raised:
        start_execution_once(delivery, state_machine, {**ORDER, "cents": 1}, client=sfn)
    assert (raised.value.execution_arn, raised.value.kind) == (arn, "conflict")
    assert len(_executions(sfn, state_machine)) == 1


def test_an_execution_started_with_other_json_text_of_the_same_value_counts_as_the_same(sfn, state_machine):
    delivery = message(ORDER, mode="guarded")
    text = '{ "cents": 2500.0, "y": "order-1", "x": "cust-7" }'  # started by another tool, say
    sfn.start_execution(stateMachineArn=state_machine, name=execution_name(delivery.key), input=text)
    arn = start_execution_once(delivery, state_machine, ORDER, client=sfn)
    assert arn.endswith(":cust-7_order-1") and len(_executions(sfn, state_machine)) == 1


def refused_by_step_functions(name: str) -> str | None:
    """Why StartExecution would refuse ``name`` (or CloudWatch Logs logging would not work with it), by the
    API reference's rules - stricter than moto, which accepts surrogates, U+FFFE and U+FFFF."""
    if not 1 <= len(name) <= 80:
        return f"{len(name)} characters"
    for character in name:
        point = ord(character)
        if (
            character.isspace()
            or character in '<>{}[]?*"#%\\^|~`$&,;:/'
            or point <= 0x1F
            or 0x7F <= point <= 0x9F
            or 0xD800 <= point <= 0xDFFF
            or point in (0xFFFE, 0xFFFF)
        ):
            return f"holds {character!r}"
        if not (character.isascii() and (character.isalnum() or character in "-_")):
            return f"holds {character!r}, which CloudWatch Logs logging does not take"
    return None


# Keys Step Functions would refuse as names, and pairs that would share one if joined naively.
KEYS = [
    ("cust-7", "order-1"),
    ("c" * 60, "o" * 30),  # over 80 characters joined
    ("cust#7", "order-1"),
    ("cust 7", "order:1"),
    ("cust/7", "order*1"),
    ("café", "order-1"),
    ("cust-7", "\u0085order"),
    ("cust-7\t", "order-1"),
    ("a_b", "c"),
    ("a", "b_c"),
    ("a#b", "c"),
    ("a", "b#c"),
    ("A", "b"),
    ("a", "b"),
    ("cust-7", "order-1\n"),  # `$` matches before a trailing newline: never a name
    ("cust-7\n", "order-1"),
]


def test_names_are_valid_deterministic_and_distinct_for_every_key(make_handler, sfn, state_machine):
    handler, _ = _guarded(make_handler)
    results = handler.process_batch(event(*(record({**ORDER, "x": x, "y": y}) for x, y in KEYS)), None)
    assert [r.outcome for r in results] == ["processed"] * len(KEYS)
    names = [execution_name(Key(x, y)) for x, y in KEYS]
    assert [refused_by_step_functions(name) for name in names] == [None] * len(KEYS)
    assert len(set(names)) == len(KEYS)
    assert sorted(e["name"] for e in _executions(sfn, state_machine)) == sorted(names)
    assert [r.result.rsplit(":", 1)[1] for r in results] == names
    assert names[0] == "cust-7_order-1"
    # Otherwise the key's SHA-256 (64 characters): its idempotency key when that is hashed too.
    assert names[1] == sha256_hex(json.dumps(["c" * 60, "o" * 30]).encode())
    assert names[2] == Key("cust#7", "order-1").idempotency_key
    assert [execution_name(Key(x, y)) for x, y in KEYS] == names  # the same key, the same name


def test_an_express_state_machine_is_refused_before_anything_starts(make_handler, sfn, monkeypatch):
    express = _state_machine(sfn, "EXPRESS")
    monkeypatch.setenv("STATE_MACHINE_ARN", express)
    handler, stream = _guarded(make_handler)
    (result,) = handler.process_batch(event(record(ORDER)), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert "EXPRESS workflow, whose execution names Step Functions does not check" in result.hint
    assert sfn.list_executions(stateMachineArn=express)["executions"] == []
    assert next(line for line in log_lines(stream) if line["level"] == "ERROR")["misconfigured"] == 1


def test_a_missing_state_machine_is_a_misconfiguration_not_a_quarantine(
    make_handler, monkeypatch, dlq_url, sfn
):
    monkeypatch.setenv("STATE_MACHINE_ARN", f"arn:aws:states:{REGION}:123456789012:stateMachine:gone")
    handler, _ = _guarded(make_handler, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record(ORDER)), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert "grant_start_execution" in result.hint


def _fail(client, operation: str, code: str, times: int = 1000) -> list[int]:
    """The first ``times`` ``operation`` calls of ``client`` fail with ``code`` before they reach moto;
    returns the failed calls."""
    from botocore.awsrequest import AWSResponse

    failed: list[int] = []

    def fail(**_):
        if len(failed) >= times:
            return None
        failed.append(len(failed) + 1)
        error = {"Error": {"Code": code, "Message": "injected"}, "ResponseMetadata": {"HTTPStatusCode": 400}}
        return AWSResponse("https://states.invalid", 400, {}, None), error

    client.meta.events.register(f"before-call.sfn.{operation}", fail)
    return failed


def _starting_with(client):
    """The shipped order_workflow.start with its own client."""

    def start(delivery):
        arn = os.environ["STATE_MACHINE_ARN"]
        return start_execution_once(delivery, arn, delivery.json_object(), client=client)

    return start


def test_throttling_is_retried_then_left_to_sqs_and_the_retry_starts_one_execution(
    make_handler, fresh_sfn, state_machine, monkeypatch, dynamodb
):
    monkeypatch.setattr(workflows, "_calls", workflows.Retrier(sleep=lambda seconds: None))
    throttled = _fail(fresh_sfn, "StartExecution", "ThrottlingException", times=4)
    handler, _ = _guarded(make_handler, processor=None, fn=_starting_with(fresh_sfn))
    delivery = record(ORDER)
    (result,) = handler.process_batch(event(delivery), None)
    assert (result.outcome, result.misconfigured, result.kind) == ("failed", False, None)
    assert "step functions StartExecution of " in result.reason and "ThrottlingException" in result.reason
    assert len(throttled) == 4  # the first attempt and three retries within the invocation
    assert scan(dynamodb) == []  # the claim was released: the next delivery runs
    assert _executions(fresh_sfn, state_machine) == []
    (again,) = handler.process_batch(event(delivery), None)
    assert again.outcome == "processed"
    assert len(_executions(fresh_sfn, state_machine)) == 1


def test_an_execution_describe_cannot_see_yet_is_retried_later(sfn, fresh_sfn, state_machine, monkeypatch):
    """AWS's DescribeExecution is eventually consistent (moto's is not): just after another invocation's
    start it may answer ExecutionDoesNotExist. That is transient, never a conflict."""
    monkeypatch.setattr(workflows, "_calls", workflows.Retrier(sleep=lambda seconds: None))
    delivery = message(ORDER, mode="guarded")
    start_execution_once(delivery, state_machine, ORDER, client=sfn)
    sfn.stop_execution(
        executionArn=sfn.list_executions(stateMachineArn=state_machine)["executions"][0]["executionArn"]
    )
    _fail(fresh_sfn, "DescribeExecution", "ExecutionDoesNotExist")
    with pytest.raises(workflows.TransientError, match=r"DescribeExecution .* ExecutionDoesNotExist"):
        start_execution_once(delivery, state_machine, ORDER, client=fresh_sfn)


def test_an_input_over_step_functions_limit_is_rejected_before_the_request(
    make_handler, sfn, state_machine, sqs, dlq_url
):
    big = {**ORDER, "note": "n" * workflows.MAX_INPUT_BYTES}
    handler, _ = _guarded(make_handler, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record(big)), None)
    assert (result.outcome, result.kind) == ("quarantined", "rejected")
    assert "over Step Functions' 262144" in result.reason
    assert _executions(sfn, state_machine) == []
