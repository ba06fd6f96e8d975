"""A stack of several consumers (the reference app with ``-c outbox=true``, an ``init`` app with a second
pipeline): every command reaches each consumer by any name the user sees (its construct id or path, its
function's name, the stack's output naming it, its logical id), each with its own queues, DLQ and table;
without --function, the commands that only read cover every pipeline, each line saying whose, and those that
change things stop naming them (exit code 2); the outbox relay is no consumer, and its DLQ stays reachable by
its names and by URL; `logs` reads any function of the stack."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import dlq_processors
import pytest
from dlq_helpers import (
    Hops,
    Pipeline,
    client,
    command,
    consume,
    consumer,
    dead_letter,
    deploy_hops,
    dlq,
    drain,
    publish,
    queue_arn,
)

from idempotent_cli.main import parser
from idempotent_cli.send import run as run_send
from idempotent_local.runner import function_log_path

pytestmark = pytest.mark.usefixtures("cloud")

# The outputs that name each consumer (the reference stack's: none for the main one, "Payments" for the
# next hop).
OUTPUT = {"orders": "FunctionName", "payments": "PaymentsFunctionName"}
LOGICAL_ID = {"orders": "Function", "payments": "PaymentsFunction"}
# The construct the user wrote (IdempotentPipeline(self, "Orders", ...)), and a deeper path to its function.
CONSTRUCT = {"orders": "Orders", "payments": "Payments"}
ORDER = json.dumps({"order_id": "o-1", "line_id": "1", "sku": "tea"})
PAYMENT = json.dumps({"order_id": "o-1", "cents": 2500})
PAYMENT_DEDUP_ID = "o-1#1#000"
BY = ["function", "output", "logical id", "construct id", "stack/construct", "path to the function"]


def _name(hops: Hops, which: str, by: str) -> str:
    return {
        "function": _pipeline(hops, which).function,
        "output": OUTPUT[which],
        "logical id": LOGICAL_ID[which],
        "construct id": CONSTRUCT[which],
        "stack/construct": f"{hops.stack}/{CONSTRUCT[which]}",
        "path to the function": f"{CONSTRUCT[which]}/Consumer/Function",
    }[by]


def _pipeline(hops: Hops, which: str) -> Pipeline:
    return hops.orders if which == "orders" else hops.payments


def _other(which: str) -> str:
    return "payments" if which == "orders" else "orders"


def _queue_name(url: str) -> str:
    """A queue's account and name (the outputs and GetQueueUrl write the host differently)."""
    return url.split("/", 3)[3]


def _dead_letters(hops: Hops) -> dict[str, str]:
    """One dead letter in each consumer's DLQ; returns their message ids in the DLQ."""
    return {
        "orders": dead_letter(
            ORDER, queue_url=hops.orders.dlq_url, group_id="o-1", key={"partition": "o-1", "sort": "1"}
        )["MessageId"],
        "payments": dead_letter(
            PAYMENT,
            queue_url=hops.payments.dlq_url,
            group_id="o-1",
            dedup_id=PAYMENT_DEDUP_ID,
            key={"partition": PAYMENT_DEDUP_ID, "sort": "dedup_id"},
        )["MessageId"],
    }


def _send(*argv: str, lines: str) -> tuple[int, str]:
    args = parser().parse_args(["send", *argv, "--progress-seconds", "0"])
    err = io.StringIO()
    code = run_send(args, stdin=io.StringIO(lines), out=io.StringIO(), err=err)
    return code, err.getvalue()


# -- each consumer, by each of its names -------------------------------------------------------------------


@pytest.mark.parametrize("by", BY)
@pytest.mark.parametrize("which", ["orders", "payments"])
def test_dlq_commands_work_on_the_dlq_of_the_consumer_any_of_its_names_names(which, by):
    hops = deploy_hops(paths=True)
    ids = _dead_letters(hops)
    chosen, other = _pipeline(hops, which), _pipeline(hops, _other(which))
    where = ("--stack", hops.stack, "--function", _name(hops, which, by))

    code, listed = dlq("list", *where, "--json")
    assert code == 0, listed.error
    report = json.loads(listed.out.getvalue())
    assert _queue_name(report["queue"]) == _queue_name(chosen.dlq_url)
    assert _queue_name(report["source_queue"]) == _queue_name(chosen.queue_url)
    assert report["read"] == 1 and listed.error == ""

    code, shown = dlq("show", ids[which], *where)
    assert code == 0, shown.error
    assert f"  {ORDER if which == 'orders' else PAYMENT}" in shown.lines

    code, redriven = dlq("redrive", *where)
    assert code == 0, redriven.error
    assert [m["Body"] for m in drain(chosen.queue_url)] == [ORDER if which == "orders" else PAYMENT]
    assert drain(chosen.dlq_url) == []

    dead_letter(ORDER, queue_url=chosen.dlq_url, group_id="o-2")
    code, purged = dlq("purge", *where, "--yes")
    assert code == 0, purged.error
    assert drain(chosen.dlq_url) == []
    # The other consumer's DLQ and queue were not touched.
    assert [m["MessageId"] for m in drain(other.dlq_url)] == [ids[_other(which)]]
    assert drain(other.queue_url) == []


@pytest.mark.parametrize("by", BY)
@pytest.mark.parametrize("which", ["orders", "payments"])
def test_trace_reads_the_table_of_the_consumer_any_of_its_names_names(which, by):
    hops = deploy_hops(paths=True)
    publish(hops.orders, ORDER, group="o-1")
    publish(hops.payments, PAYMENT, group="o-1", dedup_id=PAYMENT_DEDUP_ID)
    processors = {"orders": dlq_processors.add_to_order, "payments": None}
    for name in ("orders", "payments"):
        pipeline = _pipeline(hops, name)
        outcomes = consume(pipeline, consumer(pipeline, processors[name]))
        assert [outcome for _, outcome in outcomes] == ["processed"]
    key = ("o-1", "1") if which == "orders" else ("--dedup-id", PAYMENT_DEDUP_ID)

    code, terminal = command(
        "trace", *key, "--stack", hops.stack, "--function", _name(hops, which, by), "--json"
    )

    assert code == 0, terminal.error
    traced = json.loads(terminal.out.getvalue())
    assert traced["pipeline"]["function"] == _pipeline(hops, which).function
    assert traced["pipeline"]["table"] == _pipeline(hops, which).table
    assert traced["table"]["state"] == "stored"


@pytest.mark.parametrize("by", BY)
@pytest.mark.parametrize("which", ["orders", "payments"])
def test_logs_show_the_lines_of_the_consumer_any_of_its_names_names(which, by, local_app: Path):
    hops = deploy_hops(paths=True)
    for name in ("orders", "payments"):
        path = function_log_path(local_app / ".local-cloud", _pipeline(hops, name).function)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"level": "INFO", "message": f"a line of {name}"}) + "\n")

    code, terminal = command(
        "logs", "--local", "--app-dir", str(local_app), "--function", _name(hops, which, by)
    )

    assert code == 0, terminal.error
    [line] = terminal.lines
    assert line.endswith(f"a line of {which}")
    assert terminal.error.startswith(f"{hops.stack}/{_pipeline(hops, which).function}: ")


@pytest.mark.parametrize("by", BY)
@pytest.mark.parametrize("which", ["orders", "payments"])
def test_send_publishes_to_the_queue_of_the_consumer_any_of_its_names_names(which, by):
    hops = deploy_hops(paths=True)
    keyed = ["--key-fields", "order_id,line_id", "--group-field", "order_id"] if which == "payments" else []

    code, err = _send("--stack", hops.stack, "--function", _name(hops, which, by), *keyed, lines=ORDER + "\n")

    assert code == 0, err
    assert [m["Body"] for m in drain(_pipeline(hops, which).queue_url)] == [ORDER]
    assert drain(_pipeline(hops, _other(which)).queue_url) == []


# -- without --function ------------------------------------------------------------------------------------


def _listing(hops: Hops) -> str:
    return f"{hops.orders.function} (FunctionName), {hops.payments.function} (PaymentsFunctionName)"


@pytest.mark.parametrize("stack", [True, False], ids=["with --stack", "the only stack"])
def test_reading_commands_cover_every_pipeline_each_saying_whose(stack, local_app: Path):
    hops = deploy_hops()
    ids = _dead_letters(hops)
    where = ["--stack", hops.stack] if stack else []

    code, listed = dlq("list", *where, "--messages", "--json")
    assert code == 0, listed.error
    queues = json.loads(listed.out.getvalue())["dead_letter_queues"]
    assert [(q["pipeline"], q["kind"]) for q in queues] == [
        (hops.orders.function, "pipeline"),
        (hops.payments.function, "pipeline"),
        (hops.relay, "outbox relay"),
    ]
    orders, payments, relay = queues
    assert [_queue_name(q["queue"]) for q in (orders, payments)] == [
        _queue_name(hops.orders.dlq_url),
        _queue_name(hops.payments.dlq_url),
    ]
    assert [(m["message_id"], m["pipeline"]) for m in orders["message_list"] + payments["message_list"]] == [
        (ids["orders"], hops.orders.function),
        (ids["payments"], hops.payments.function),
    ]
    assert (relay["function"], relay["entries"]) == (hops.relay, [])
    assert listed.error.startswith(f"stack {hops.stack} has 3 dead-letter queues: {_listing(hops)}, ")

    code, listed = dlq("list", *where)
    assert code == 0, listed.error
    headers = [line for line in listed.lines if line.startswith(("pipeline ", "outbox relay "))]
    assert headers == [
        f"pipeline {hops.orders.function} (FunctionName):",
        f"pipeline {hops.payments.function} (PaymentsFunctionName):",
        f"outbox relay {hops.relay}:",
    ]
    assert listed.lines.count("1 read") == 2

    for name in ("orders", "payments"):
        path = function_log_path(local_app / ".local-cloud", _pipeline(hops, name).function)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"level": "INFO", "timestamp": 1, "message": f"a line of {name}"}) + "\n")
    code, logs = command("logs", *where, "--local", "--app-dir", str(local_app))
    assert code == 0, logs.error
    assert [line.split("  ")[0] for line in logs.lines] == [hops.orders.function, hops.payments.function]
    assert [line.rsplit("  ", 1)[1] for line in logs.lines] == ["a line of orders", "a line of payments"]
    assert f"{hops.payments.function}: lines the local runner wrote to " in logs.error


def test_a_queue_no_pipeline_has_is_an_error_naming_each_not_an_empty_listing():
    """--which subscription on a stack whose pipelines have no subscription DLQ: as with --function, an
    error (exit 1), each pipeline saying it has none; nothing listed, no count of queues not there."""
    hops = deploy_hops()
    code, listed = dlq("list", "--stack", hops.stack, "--which", "subscription")
    assert code == 1 and listed.lines == []
    assert listed.error.startswith(f"error: no pipeline of stack {hops.stack} has that queue: "), listed.error
    for pipeline in (hops.orders, hops.payments):
        assert f"pipeline {hops.stack}/{pipeline.function}: the SNS subscription of " in listed.error
    assert listed.error.count("has no dead-letter queue (no RedrivePolicy)") == 2
    assert "dead-letter queues:" not in listed.error


def test_commands_that_change_things_stop_and_list_the_pipelines_without_function():
    hops = deploy_hops()
    ids = _dead_letters(hops)
    refused = (
        f"error: stack {hops.stack} has 2 pipelines: {_listing(hops)}; this command changes things: choose "
        "one with --function NAME (a construct id or path, a function name or ARN, a stack output naming "
        "it, or its logical id)\n"
    )

    for argv in (["redrive"], ["redrive", "--dry-run"], ["purge", "--yes"]):
        code, terminal = dlq(*argv, "--stack", hops.stack)
        assert (code, terminal.error, terminal.out.getvalue()) == (2, refused, ""), argv
    code, err = _send("--stack", hops.stack, lines=ORDER + "\n")
    assert (code, err) == (2, refused)

    assert [m["MessageId"] for m in drain(hops.orders.dlq_url)] == [ids["orders"]]
    assert [m["MessageId"] for m in drain(hops.payments.dlq_url)] == [ids["payments"]]
    assert drain(hops.orders.queue_url) == drain(hops.payments.queue_url) == []


def test_trace_looks_for_the_key_in_each_consumer_that_keys_it_and_says_where_it_is():
    hops = deploy_hops()
    publish(hops.payments, PAYMENT, group="o-1", dedup_id=PAYMENT_DEDUP_ID)
    assert [outcome for _, outcome in consume(hops.payments, consumer(hops.payments))] == ["processed"]

    code, terminal = command("trace", "--dedup-id", PAYMENT_DEDUP_ID, "--stack", hops.stack)

    assert code == 0, terminal.error
    lines = terminal.lines
    assert lines[:3] == [
        f"stack {hops.stack} has 2 consumers: {_listing(hops)}",
        f"the key was looked for in each that can key it (1): found in {hops.payments.function}",
        f"  {hops.orders.function}: not looked in, it cannot key this: the consumer keys messages by the "
        "fields order_id, line_id (KEY_SOURCE=fields), not by dedup id: the values of order_id and line_id "
        "(trace VALUE VALUE, or --partition VALUE --sort VALUE), or a body (--body JSON)",
    ]
    assert lines[4].startswith(f"key {PAYMENT_DEDUP_ID}#dedup_id (deduplication id '{PAYMENT_DEDUP_ID}') of ")
    assert f"of {hops.stack}/{hops.payments.function}, in " in lines[4]
    assert lines[6].startswith("table         stored: ")
    assert lines[-1].endswith(
        f"logs --stack {hops.stack} --function {hops.payments.function} --key '{PAYMENT_DEDUP_ID}#dedup_id'"
    )

    code, terminal = command("trace", "--dedup-id", PAYMENT_DEDUP_ID, "--stack", hops.stack, "--json")
    assert code == 0, terminal.error
    document = json.loads(terminal.out.getvalue())
    assert document["found_in"] == [hops.payments.function]
    assert [(c["function"], c["outputs"], c["traced"], c["found"]) for c in document["consumers"]] == [
        (hops.orders.function, ["FunctionName"], False, False),
        (hops.payments.function, ["PaymentsFunctionName"], True, True),
    ]
    [payments] = document["traces"]
    assert payments["pipeline"]["function"] == hops.payments.function
    assert payments["table"]["state"] == "stored"


def test_trace_of_a_key_no_consumer_holds_shows_each_consumer_it_looked_in():
    hops = deploy_hops(outputs=False)

    code, terminal = command("trace", "--body", ORDER, "--stack", hops.stack)

    assert code == 0, terminal.error
    # A body can be keyed by both: the one keyed by fields reads it, the one keyed by deduplication id needs
    # the id too.
    assert terminal.lines[1] == "the key was looked for in each that can key it (1): found in none of them"
    assert sum(line.startswith("key o-1#1 (this body) of ") for line in terminal.lines) == 1
    assert (
        "table         absent: not in the table: the next delivery of this key is processed" in terminal.lines
    )


def test_trace_that_no_consumer_can_key_names_why_for_each():
    hops = deploy_hops()

    code, terminal = command("trace", "--message-id", "m-1", "--stack", hops.stack)

    assert code == 1
    assert terminal.error.startswith(
        f"error: none of the 2 consumers of stack {hops.stack} can key --message-id 'm-1': "
        f"{hops.orders.function}: the consumer keys messages by the fields order_id, line_id"
    )
    assert (
        f"; {hops.payments.function}: the consumer keys messages by their deduplication id "
        "(KEY_SOURCE=dedup_id): give it as one KEY or with --dedup-id, got --message-id\n"
    ) in terminal.error


def test_dlq_show_finds_the_message_in_the_dlq_of_any_consumer_and_says_which():
    hops = deploy_hops()
    ids = _dead_letters(hops)

    code, terminal = dlq("show", ids["payments"], "--stack", hops.stack)

    assert code == 0, terminal.error
    assert f"  {PAYMENT}" in terminal.lines
    assert terminal.error == (
        f"stack {hops.stack} has 3 dead-letter queues: {_listing(hops)}, {hops.relay}; {ids['payments']} is "
        f"in the dead-letter queue of {hops.payments.function}\n"
    )

    code, terminal = dlq("show", "no-such-id", "--stack", hops.stack)
    assert code == 1
    assert (
        "error: no message no-such-id (its id in the DLQ, the original's, or a redriven copy's) in the "
        in (terminal.error)
    )
    assert (
        f"dead-letter queue of any pipeline of stack {hops.stack}: {hops.orders.function} (" in terminal.error
    )
    # Nothing moved: each DLQ still holds its dead letter.
    assert [m["MessageId"] for m in drain(hops.payments.dlq_url)] == [ids["payments"]]
    assert [m["MessageId"] for m in drain(hops.orders.dlq_url)] == [ids["orders"]]


# -- the relay, names that are no consumer's, a stack without outputs -------------------------------------


def test_the_relays_dlq_is_read_by_its_function_name_and_purged_by_url():
    hops = deploy_hops()
    dead_letter(PAYMENT, queue_url=hops.relay_dlq_url, group_id=None, reason="the emit target refused it")

    code, terminal = dlq("list", "--stack", hops.stack, "--function", hops.relay)

    assert code == 0, terminal.error
    assert f"-relay-dlq of the outbox relay {hops.stack}/{hops.relay}" in terminal.lines[0]
    assert terminal.lines[-1] == "1 unknown"  # a dead letter neither the relay nor Lambda wrote
    code, terminal = dlq("purge", "--stack", hops.stack, "--function", hops.relay, "--yes")
    assert code == 1
    assert terminal.error.startswith(
        f"error: {hops.stack}/{hops.relay} is the outbox relay of {hops.stack}/{hops.orders.function} (it "
        f"publishes to {queue_arn(hops.payments.queue_url)}), not a consumer: `dlq list|show|redrive "
        f"--function {hops.relay}` read its dead-letter queue"
    )
    code, terminal = dlq("list", "--queue-url", hops.relay_dlq_url, "--json")
    assert code == 0, terminal.error
    assert json.loads(terminal.out.getvalue())["read"] == 1


def test_a_name_no_consumer_has_is_refused_naming_each_consumer_and_its_outputs():
    hops = deploy_hops()

    code, terminal = dlq("list", "--stack", hops.stack, "--function", "ShippingFunctionName")

    assert code == 1
    assert terminal.error == (
        f"error: no function ShippingFunctionName in stack {hops.stack} (a construct id or path, a function "
        "name or ARN, a stack output naming it, or its logical id); functions: "
        f"pipeline {hops.stack}/{hops.orders.function} (FunctionName), pipeline "
        f"{hops.stack}/{hops.payments.function} (PaymentsFunctionName), outbox relay "
        f"{hops.stack}/{hops.relay}\n"
    )


def test_a_stack_without_outputs_lists_every_consumer_and_function_chooses_one():
    hops = deploy_hops(outputs=False)

    code, terminal = dlq("list", "--stack", hops.stack, "--json")

    assert code == 0, terminal.error
    listed = json.loads(terminal.out.getvalue())["dead_letter_queues"]
    assert [q["pipeline"] for q in listed] == [hops.orders.function, hops.payments.function, hops.relay]
    code, terminal = dlq("list", "--stack", hops.stack, "--function", "PaymentsFunction", "--json")
    assert code == 0, terminal.error
    assert _queue_name(json.loads(terminal.out.getvalue())["queue"]) == _queue_name(hops.payments.dlq_url)


def test_the_function_arn_names_its_consumer():
    hops = deploy_hops()
    arn = client("lambda").get_function_configuration(FunctionName=hops.payments.function)["FunctionArn"]

    with contextlib.redirect_stderr(io.StringIO()):
        code, terminal = dlq("list", "--function", arn, "--json")

    assert code == 0, terminal.error
    assert _queue_name(json.loads(terminal.out.getvalue())["queue"]) == _queue_name(hops.payments.dlq_url)


# -- construct paths: whose lines, names that name several, any function of the stack ---------------------


def test_reading_commands_say_whose_each_part_is_by_construct_path(local_app: Path):
    hops = deploy_hops(paths=True)
    ids = _dead_letters(hops)
    orders, payments = f"{hops.stack}/Orders", f"{hops.stack}/Payments"

    code, listed = dlq("list", "--stack", hops.stack)
    assert code == 0, listed.error
    assert [line for line in listed.lines if line.startswith(("pipeline ", "outbox relay "))] == [
        f"pipeline {orders} ({hops.orders.function}, FunctionName):",
        f"pipeline {payments} ({hops.payments.function}, PaymentsFunctionName):",
        f"outbox relay {orders}/Consumer/Relay ({hops.relay}):",
    ]
    assert f"(FIFO) of {hops.stack}/{hops.payments.function} ({payments}), in region" in listed.out.getvalue()

    code, shown = dlq("show", ids["payments"], "--stack", hops.stack)
    assert code == 0, shown.error
    assert shown.error.endswith(f"{ids['payments']} is in the dead-letter queue of {payments}\n")

    code, traced = command("trace", "o-1", "1", "--stack", hops.stack)
    assert code == 0, traced.error
    assert traced.lines[1] == f"the key was looked for in each that can key it (1): found in {orders}"
    assert traced.lines[2].startswith(f"  {payments}: not looked in, it cannot key this: ")

    for which in ("orders", "payments"):
        path = function_log_path(local_app / ".local-cloud", _pipeline(hops, which).function)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"level": "WARNING", "timestamp": 1, "message": f"a {which} line"}) + "\n")
    code, logs = command("logs", "--local", "--app-dir", str(local_app), "--stack", hops.stack)
    assert code == 0, logs.error
    assert logs.lines == [
        f"{orders}  1970-01-01 00:00:01.000Z  WARNING  a orders line",
        f"{payments}  1970-01-01 00:00:01.000Z  WARNING  a payments line",
    ]
    code, logs = command("logs", "--local", "--app-dir", str(local_app), "--json")
    assert code == 0, logs.error
    assert [json.loads(line)["pipeline"] for line in logs.lines] == [orders, payments]


def test_a_name_that_names_several_functions_is_refused_naming_them():
    hops = deploy_hops(paths=True)
    name = "Consumer"  # the id of each pipeline's consumer construct
    ids = _dead_letters(hops)

    code, terminal = dlq("redrive", "--stack", hops.stack, "--function", name)

    assert code == 2 and terminal.out.getvalue() == ""
    assert terminal.error.startswith(f"error: --function {name} names ")
    for function in (hops.orders.function, hops.payments.function, hops.relay):
        assert function in terminal.error
    assert terminal.error.endswith(
        "; name one by more of its construct path, its function name or its logical id\n"
    )
    code, err = _send("--stack", hops.stack, "--function", name, lines=ORDER + "\n")
    assert code == 2 and f"error: --function {name} names " in err
    assert [m["MessageId"] for m in drain(hops.orders.dlq_url)] == [ids["orders"]]
    assert drain(hops.orders.queue_url) == drain(hops.payments.queue_url) == []


def test_the_relay_is_named_by_its_construct_path_and_its_pipeline_by_the_construct_above_it():
    hops = deploy_hops(paths=True)
    dead_letter(PAYMENT, queue_url=hops.relay_dlq_url, group_id=None, reason="the emit target refused it")

    code, terminal = dlq("list", "--stack", hops.stack, "--function", "Orders/Consumer/Relay")
    assert code == 0, terminal.error
    assert f"-relay-dlq of the outbox relay {hops.stack}/{hops.relay}" in terminal.lines[0]
    # The relay lies under the Orders pipeline too: its name names the pipeline's consumer.
    code, terminal = dlq("list", "--stack", hops.stack, "--function", "Orders", "--json")
    assert code == 0, terminal.error
    assert _queue_name(json.loads(terminal.out.getvalue())["queue"]) == _queue_name(hops.orders.dlq_url)


def test_logs_read_a_plain_function_of_the_stack_locally_and_from_cloudwatch(local_app: Path):
    hops = deploy_hops(paths=True)
    assert hops.notifier is not None
    line = json.dumps({"level": "INFO", "timestamp": 1, "message": "notified"})
    path = function_log_path(local_app / ".local-cloud", hops.notifier)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(line + "\n")

    code, terminal = command("logs", "--local", "--app-dir", str(local_app), "--function", "Notifier")
    assert code == 0, terminal.error
    assert terminal.lines == ["1970-01-01 00:00:01.000Z  INFO     notified"]
    assert terminal.error.startswith(f"{hops.stack}/{hops.notifier}: lines the local runner wrote to {path}")

    logs, group = client("logs"), f"/aws/lambda/{hops.notifier}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    logs.put_log_events(
        logGroupName=group,
        logStreamName="s",
        logEvents=[{"timestamp": int(time.time() * 1000), "message": line}],
    )
    code, terminal = command("logs", "--stack", hops.stack, "--function", hops.notifier, "--json")
    assert code == 0, terminal.error
    assert terminal.lines == [line]
    assert terminal.error.startswith(f"{hops.stack}/{hops.notifier}: log group {group}, since ")


def test_a_plain_function_is_no_pipeline_for_the_dlq_send_and_trace():
    hops = deploy_hops(paths=True)
    refused = (
        f"error: {hops.stack}/Notifier ({hops.notifier}) is a function of stack {hops.stack}, not a "
        f"pipeline's consumer (`logs --function {hops.notifier}` reads its lines); pipelines: "
    )

    code, terminal = dlq("list", "--stack", hops.stack, "--function", "Notifier")
    assert code == 1 and terminal.error.startswith(refused), terminal.error
    code, err = _send("--stack", hops.stack, "--function", "Notifier", lines=ORDER + "\n")
    assert code == 1 and err.startswith(refused), err
    code, terminal = command("trace", "o-1", "1", "--stack", hops.stack, "--function", "Notifier")
    assert code == 1 and terminal.error.startswith(refused), terminal.error
