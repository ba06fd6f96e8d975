"""versioned mode: the latest state per entity, one conditional PutItem per message whatever the outcome.

Newer versions replace the state, older ones are stale (counted and logged, not dead-lettered), the same
version is a duplicate or, with other content, a conflict; tombstones are states of deleted entities."""

from __future__ import annotations

import json
import random
import threading

import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.contract import ConfigurationError
from idempotent_runtime.records import RecordState, forget, inspect
from runtime_helpers import (
    TABLE,
    dlq_details,
    dlq_reason,
    drain,
    event,
    failures,
    log_lines,
    metrics,
    record,
    record_logs,
    scan,
)

VERSIONED = {"mode": "versioned", "version_field": "v", "queue_type": "standard"}


def state(key: str = "e-1", v: object = 1, **fields: object) -> dict[str, object]:
    return {"x": key, "y": "profile", "v": v, **fields}


def standard(body: object) -> dict:
    """A record of a standard queue: no group, every record on its own."""
    return record(body, group=None)


def deliver(handler, *bodies: object) -> list[str]:
    """Each body in its own batch, in order: the outcomes."""
    return [r.outcome.value for body in bodies for r in handler.process_batch(event(standard(body)), None)]


def _requests(client) -> list[str]:
    calls: list[str] = []
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    return calls


def test_a_new_entity_stores_its_state_with_the_version_in_one_comparable_attribute(make_handler, dynamodb):
    handler, _ = make_handler(**VERSIONED)
    assert deliver(handler, state(v=7, name="Ada", tags=["a"])) == ["processed"]
    (item,) = scan(dynamodb)
    assert item["pk"] == {"S": "e-1"} and item["sk"] == {"S": "profile"}
    assert item["v"] == {"N": "7"} and item["name"] == {"S": "Ada"}
    assert item["idempotency:version"] == {"N": "7"}
    assert set(item) == {"pk", "sk", "x", "y", "v", "name", "tags"} | {
        "idempotency:version",
        "idempotency:fingerprint",
        "idempotency:token",
    }


def test_a_newer_version_replaces_the_state_and_an_older_one_is_stale(make_handler, dynamodb, dlq_url, sqs):
    handler, stream = make_handler(dlq_url=dlq_url, **VERSIONED)
    outcomes = deliver(handler, state(v=2, name="two"), state(v=5, name="five"), state(v=3, name="three"))
    assert outcomes == ["processed", "processed", "stale"]
    (item,) = scan(dynamodb)
    assert (item["name"], item["idempotency:version"]) == ({"S": "five"}, {"N": "5"})
    assert drain(sqs, dlq_url) == []  # stale is not a failure: nothing is dead-lettered
    last = metrics(stream)[-1]
    assert (last["stale"], last["processed"], last["duplicates"], last["quarantined"]) == (1, 0, 0, 0)
    assert {"Name": "stale", "Unit": "Count"} in last["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    stale = record_logs(stream)[-1]
    assert (stale["level"], stale["outcome"], stale["key"]) == ("INFO", "stale", "e-1#profile")
    assert stale["reason"] == "stale: key e-1#profile holds version 5, newer than this message's 3"


def test_a_stale_record_is_deleted_from_its_queue_not_retried(make_handler):
    handler, _ = make_handler(**VERSIONED)
    deliver(handler, state(v=9))
    assert failures(handler(event(standard(state(v=1))), None)) == []


def test_at_the_default_log_level_a_stale_record_writes_one_info_line_and_warning_level_none(make_handler):
    handler, stream = make_handler(log_level="INFO", **VERSIONED)
    deliver(handler, state(v=2), state(v=2), state(v=1))
    lines = [line for line in log_lines(stream) if "_aws" not in line]
    assert [(line["level"], line["outcome"]) for line in lines] == [("INFO", "stale")]
    quiet, quiet_stream = make_handler(log_level="WARNING", **VERSIONED)
    assert deliver(quiet, state(v=1)) == ["stale"]
    assert [line for line in log_lines(quiet_stream) if "_aws" not in line] == []
    assert metrics(quiet_stream)[-1]["stale"] == 1  # the metric counts what the log leaves out


def test_the_same_version_with_the_same_content_is_a_duplicate(make_handler, dynamodb):
    handler, stream = make_handler(**VERSIONED)
    assert deliver(handler, state(v=4, name="x"), state(v=4, name="x")) == ["processed", "duplicate"]
    assert metrics(stream)[-1]["duplicates"] == 1
    assert len(scan(dynamodb)) == 1


def test_the_same_version_with_other_content_is_a_conflict_sent_to_the_dlq(
    make_handler, dynamodb, dlq_url, sqs
):
    handler, stream = make_handler(dlq_url=dlq_url, **VERSIONED)
    first, second = state(v=4, name="first"), state(v=4, name="second")
    assert deliver(handler, first, second) == ["processed", "quarantined"]
    (item,) = scan(dynamodb)
    assert item["name"] == {"S": "first"}  # the first state of version 4 stands
    (dead,) = drain(sqs, dlq_url)
    assert json.loads(dead["Body"]) == second
    details = dlq_details(dead)
    assert details["kind"] == "conflict"
    assert dlq_reason(dead) == (
        f"conflict: key e-1#profile holds version 4 with another payload (fingerprint "
        f"{details['stored_fingerprint']}), this message's fingerprint is {details['fingerprint']}"
    )
    assert details["stored_fingerprint"] == item["idempotency:fingerprint"]["S"]
    assert metrics(stream)[-1]["conflicts"] == 1


def test_a_conflict_is_a_duplicate_with_on_conflict_duplicate(make_handler, dynamodb):
    handler, stream = make_handler(on_conflict="duplicate", **VERSIONED)
    assert deliver(handler, state(v=4, name="a"), state(v=4, name="b")) == ["processed", "duplicate"]
    assert metrics(stream)[-1]["conflicts"] == 1
    assert scan(dynamodb)[0]["name"] == {"S": "a"}


def test_every_outcome_costs_one_dynamodb_request(make_handler, fresh_dynamodb):
    handler, _ = make_handler(client=fresh_dynamodb, on_conflict="duplicate", **VERSIONED)
    calls = _requests(fresh_dynamodb)
    seen = []
    for body in (state(v=2), state(v=1), state(v=2), state(v=2, name="other"), state(v=3)):
        calls.clear()
        (result,) = handler.process_batch(event(standard(body)), None)
        seen.append((result.outcome.value, result.conflict))
        assert calls == ["PutItem"], (seen[-1], calls)
    assert seen == [
        ("processed", False),
        ("stale", False),
        ("duplicate", False),
        ("duplicate", True),  # the conflict, counted as a duplicate here
        ("processed", False),
    ]


def test_a_quarantined_conflict_from_a_fifo_queue_costs_one_dynamodb_request(
    pipeline, sqs, table, fresh_dynamodb, dlq_url
):
    from idempotent_runtime.flow import build_handler
    from runtime_helpers import receive_event

    _, _, queue_url, queue_arn = pipeline
    handler = build_handler(
        Config(table_name=table, mode="versioned", version_field="v", dlq_url=dlq_url),
        dynamodb_client=fresh_dynamodb,
        sqs_client=sqs,
    )
    calls = _requests(fresh_dynamodb)
    for body in (state(v=2, name="a"), state(v=2, name="b")):
        sqs.send_message(
            QueueUrl=queue_url,
            MessageBody=json.dumps(body),
            MessageGroupId="e-1",
            MessageDeduplicationId=body["name"],
        )
        calls.clear()
        lambda_event, (message,) = receive_event(sqs, queue_url, queue_arn)
        (result,) = handler.process_batch(lambda_event, None)
        assert calls == ["PutItem"], (result, calls)
        if result.outcome.value == "processed":  # what the event source does with a success
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    assert (result.outcome.value, result.conflict) == ("quarantined", True)
    assert len(drain(sqs, dlq_url)) == 1


def test_a_write_applied_whose_response_was_lost_is_processed_not_a_duplicate(table, dynamodb):
    from botocore.exceptions import ReadTimeoutError
    from idempotent_runtime.clients import create_client
    from idempotent_runtime.flow import build_handler

    client = create_client("dynamodb")
    handler = build_handler(Config(table_name=table, **VERSIONED), dynamodb_client=client)
    lost: list[bool] = []

    def lose_once(**_):
        if not lost:  # the PutItem was applied; the runtime sees a read timeout instead of the answer
            lost.append(True)
            raise ReadTimeoutError(endpoint_url="https://dynamodb.invalid")

    client.meta.events.register("after-call.dynamodb.PutItem", lose_once)
    (result,) = handler.process_batch(event(standard(state(v=3))), None)
    assert lost and result.outcome == "processed"
    assert scan(dynamodb)[0]["idempotency:version"] == {"N": "3"}


def test_a_tombstone_replaces_the_state_and_keeps_older_updates_stale(make_handler, dynamodb, dlq_url, sqs):
    handler, _ = make_handler(dlq_url=dlq_url, **VERSIONED)
    tombstone = state(v=5, deleted=True)
    outcomes = deliver(handler, state(v=3, name="Ada"), tombstone, state(v=4, name="late"), tombstone)
    assert outcomes == ["processed", "processed", "stale", "duplicate"]
    (item,) = scan(dynamodb)
    assert item["idempotency:deleted"] == {"BOOL": True}
    assert item["deleted"] == {"BOOL": True} and item["idempotency:version"] == {"N": "5"}
    assert "name" not in item and "expires_at" not in item  # the state is gone; tombstones never expire
    assert drain(sqs, dlq_url) == []


def test_a_newer_state_after_a_tombstone_creates_the_entity_again(make_handler, dynamodb):
    handler, _ = make_handler(tombstone_ttl_seconds=3600, **VERSIONED)
    assert deliver(handler, state(v=5, deleted=True), state(v=6, name="back")) == ["processed", "processed"]
    (item,) = scan(dynamodb)
    assert item["name"] == {"S": "back"} and item["idempotency:version"] == {"N": "6"}
    assert "idempotency:deleted" not in item and "expires_at" not in item  # the tombstone's TTL went with it


def test_only_json_true_makes_a_tombstone(make_handler, dynamodb):
    handler, _ = make_handler(**VERSIONED)
    for v, deleted in enumerate((False, "true", 1, None), start=1):
        deliver(handler, state(v=v, deleted=deleted))
        assert "idempotency:deleted" not in scan(dynamodb)[0], deleted


def test_a_tombstone_lives_tombstone_ttl_seconds_and_an_older_update_then_creates_the_entity(
    make_handler, dynamodb
):
    now = [1_800_000_000.0]
    handler, _ = make_handler(clock=lambda: now[0], tombstone_ttl_seconds=60, **VERSIONED)
    assert deliver(handler, state(v=5, deleted=True), state(v=4)) == ["processed", "stale"]
    assert scan(dynamodb)[0]["expires_at"] == {"N": str(1_800_000_000 + 60)}
    now[0] += 61  # past the tombstone's lifetime (DynamoDB deletes it up to 48 hours later): absent
    assert deliver(handler, state(v=4, name="resurrected")) == ["processed"]
    assert scan(dynamodb)[0]["name"] == {"S": "resurrected"}


def test_the_runtimes_clock_never_decides_which_version_wins(make_handler, dynamodb):
    # Versions come from producers: a consumer whose clock is years off orders them the same way.
    for clock in (0.0, 1_800_000_000.0, 4_000_000_000.0):
        dynamodb.delete_item(TableName=TABLE, Key={"pk": {"S": "e-1"}, "sk": {"S": "profile"}})
        handler, _ = make_handler(clock=lambda clock=clock: clock, **VERSIONED)
        stamps = ("2026-11-26T10:00:00Z", "2026-11-26T09:00:00Z", "2026-11-26T10:00:01Z")
        assert deliver(handler, *(state(v=v) for v in stamps)) == ["processed", "stale", "processed"]


def test_concurrent_deliveries_of_one_key_from_a_standard_queue_leave_the_newest_state(
    make_handler, dynamodb
):
    handler, stream = make_handler(max_workers=10, **VERSIONED)
    for round_ in range(5):
        versions = list(range(round_ * 10, round_ * 10 + 10))
        random.Random(round_).shuffle(versions)
        barrier = threading.Barrier(10)
        original = handler.mode.document

        def together(*args, original=original, barrier=barrier, **kwargs):
            result = original(*args, **kwargs)
            barrier.wait(timeout=5)  # every record built, then all ten writes race
            return result

        handler.mode.document = together
        results = handler.process_batch(event(*(standard(state(v=v, n=v)) for v in versions)), None)
        outcomes = [r.outcome.value for r in results]
        assert set(outcomes) <= {"processed", "stale"} and "processed" in outcomes
        (item,) = scan(dynamodb)
        assert item["idempotency:version"] == {"N": str(max(versions))}, round_
        assert item["n"] == {"N": str(max(versions))}
        assert metrics(stream)[-1]["processed"] + metrics(stream)[-1]["stale"] == 10


def test_fifo_queues_work_too_each_entity_in_order(make_handler, dynamodb):
    handler, _ = make_handler(mode="versioned", version_field="v")
    batch = [record(state(v=v), group="e-1") for v in (1, 3, 2)]
    assert [r.outcome.value for r in handler.process_batch(event(*batch), None)] == [
        "processed",
        "processed",
        "stale",
    ]
    assert scan(dynamodb)[0]["idempotency:version"] == {"N": "3"}


def test_a_processor_stores_its_attributes_and_the_version_is_the_bodys_as_delivered(make_handler, dynamodb):
    def processor(message):
        data = message.json_object()
        data["v"] = 1000  # changing the parsed body does not change the version it is written with
        return {"label": data["name"].upper()}

    handler, _ = make_handler(fn=processor, **VERSIONED)
    deliver(handler, state(v=2, name="ada"))
    (item,) = scan(dynamodb)
    assert (item["label"], item["idempotency:version"]) == ({"S": "ADA"}, {"N": "2"})
    assert "v" not in item  # the processor's attributes are the state


def test_an_item_without_a_version_is_replaced_by_the_first_versioned_state(make_handler, dynamodb, table):
    # A document stored in document mode before the switch to versioned mode.
    dynamodb.put_item(
        TableName=table,
        Item={
            "pk": {"S": "e-1"},
            "sk": {"S": "profile"},
            "name": {"S": "old"},
            "idempotency:fingerprint": {"S": "f"},
        },
    )
    handler, _ = make_handler(**VERSIONED)
    assert deliver(handler, state(v=1, name="new"), state(v=0)) == ["processed", "stale"]
    assert scan(dynamodb)[0]["name"] == {"S": "new"}


def test_a_key_prefix_keys_every_entity_and_only_the_metric_line_of_versioned_mode_counts_stale(
    make_handler, dynamodb
):
    handler, stream = make_handler(key_prefix="crm#", **VERSIONED)
    deliver(handler, state(v=1))
    assert scan(dynamodb)[0]["pk"] == {"S": "crm#e-1"}
    document, document_stream = make_handler()
    document(event(record({"x": "d", "y": "1"})), None)
    names = [m["Name"] for m in metrics(document_stream)[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    assert "stale" not in names and "stale" not in metrics(document_stream)[0]
    assert "stale" in metrics(stream)[0]


# -- settings ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environment", "error"),
    [
        (
            {"IDEMPOTENCY_MODE": "versioned"},
            "VERSION_FIELD is required with IDEMPOTENCY_MODE 'versioned': the body field that holds each "
            "message's version",
        ),
        (
            {"VERSION_FIELD": "v"},
            "VERSION_FIELD applies only to IDEMPOTENCY_MODE 'versioned'; got IDEMPOTENCY_MODE 'document' "
            "with VERSION_FIELD 'v'",
        ),
        (
            {"IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "v", "KEY_SOURCE": "message_id"},
            "KEY_SOURCE 'message_id' cannot be used with IDEMPOTENCY_MODE 'versioned': a key from a "
            "message's ids or content makes every version an entity of its own",
        ),
        (
            {"IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "v", "KEY_SOURCE": "body_sha256"},
            "KEY_SOURCE 'body_sha256' cannot be used with IDEMPOTENCY_MODE 'versioned'",
        ),
        (
            {"IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "y"},
            "VERSION_FIELD 'y' is one of the key fields (PARTITION_KEY_FIELD 'x', SORT_KEY_FIELD 'y')",
        ),
        (
            {"IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "sk.at"},
            "VERSION_FIELD 'sk.at' begins with 'sk', the table's sort key attribute (SORT_KEY): in "
            "IDEMPOTENCY_MODE 'versioned' it holds the key's sort value",
        ),
        (
            {"IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "idempotency:v"},
            "VERSION_FIELD 'idempotency:v' begins with 'idempotency:', the runtime's attribute names",
        ),
        (
            {"IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "v", "TOMBSTONE_TTL_SECONDS": "soon"},
            "TOMBSTONE_TTL_SECONDS must be a whole number of seconds, 0 or never (never expire); got 'soon'",
        ),
    ],
)
def test_the_cold_start_refuses_settings_under_which_versioned_mode_cannot_work(environment, error):
    with pytest.raises(ConfigurationError) as refused:
        Config.from_env({"TABLE_NAME": "t", **environment})
    assert str(refused.value).startswith(error)


def test_the_environment_reads_the_version_field_and_the_tombstone_lifetime():
    config = Config.from_env(
        {
            "TABLE_NAME": "t",
            "IDEMPOTENCY_MODE": "versioned",
            "VERSION_FIELD": "meta.version",
            "TOMBSTONE_TTL_SECONDS": "never",
        }
    )
    assert config.mode == "versioned"
    assert (config.version_field, config.tombstone_ttl_seconds) == ("meta.version", 0)
    assert Config(table_name="t", mode="versioned", version_field="v", processor="m:f").processor == "m:f"


# -- operators' view: records.inspect ------------------------------------------------------------------------


def test_inspect_says_new_stale_done_newer_and_conflict_by_version(make_handler, dynamodb):
    config = Config(table_name=TABLE, **VERSIONED)
    assert inspect(config, dynamodb, standard(state(v=5))).state == RecordState.NEW
    handler, _ = make_handler(**VERSIONED)
    deliver(handler, state(v=5, name="five"))
    seen = {
        "older": inspect(config, dynamodb, standard(state(v=4))),
        "same": inspect(config, dynamodb, standard(state(v=5, name="five"))),
        "other": inspect(config, dynamodb, standard(state(v=5, name="changed"))),
        "newer": inspect(config, dynamodb, standard(state(v=6))),
    }
    assert {name: found.state.value for name, found in seen.items()} == {
        "older": "stale",
        "same": "done",
        "other": "conflict",
        "newer": "new",
    }
    # A key asked about without its payload: the stored state, done.
    assert inspect(config, dynamodb, standard(state(v=1)), compare_payload=False).state == "done"


def test_inspect_calls_a_version_of_the_other_kind_invalid_with_the_reason(make_handler, dynamodb):
    config = Config(table_name=TABLE, **VERSIONED)
    handler, _ = make_handler(**VERSIONED)
    deliver(handler, state(v=5))
    found = inspect(config, dynamodb, standard(state(v="2026-11-26T10:00:00Z")))
    assert found.state == RecordState.INVALID
    assert found.reason == (
        "this message's version (timestamp 2026-11-26T10:00:00.000000000Z) cannot be compared with the one "
        "key e-1#profile holds (number 5): a key's versions are all numbers or all timestamps"
    )


def test_forget_deletes_a_done_state_so_a_forced_redrive_writes_it_again(make_handler, dynamodb):
    config = Config(table_name=TABLE, **VERSIONED)
    handler, _ = make_handler(**VERSIONED)
    message = standard(state(v=5))
    deliver(handler, state(v=5))
    found = inspect(config, dynamodb, message)
    assert found.state == "done" and forget(config, dynamodb, found) is True
    assert scan(dynamodb) == []
    assert [r.outcome.value for r in handler.process_batch(event(message), None)] == ["processed"]
