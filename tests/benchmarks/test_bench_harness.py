"""The benchmark harness measures what it says: requests counted, latency injected, stubs answering, the
results file in the documented shape. No timing is asserted here; the numbers are `make bench`'s job."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ParamValidationError
from botocore.stub import StubAssertionError
from moto import mock_aws

from benchmarks import contenders, run, runtime_bench, synth_bench, volume_bench
from benchmarks.events import fifo_batch, redelivery
from benchmarks.instruments import RequestCounter, StandingStubber
from benchmarks.report import TIMES, Metric, Target, render_markdown, unmeasured

REQUIRED_KEYS = {"name", "unit", "ours", "reference", "reference_name", "ratio", "method"}


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "bench")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "bench")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def moto_table():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        contenders.create_our_table(client, "t")
        yield client


def _put(client, pk: str) -> None:
    client.put_item(TableName="t", Item={"pk": {"S": pk}, "sk": {"S": "s"}})


def test_request_counter_counts_every_request_per_operation(moto_table):
    counter = RequestCounter(moto_table)
    for pk in ("a", "b", "c"):
        _put(moto_table, pk)
    moto_table.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "s"}})
    assert counter.snapshot() == {"PutItem": 3, "GetItem": 1}
    assert counter.total == 4
    counter.reset()
    assert counter.total == 0
    counter.detach()
    _put(moto_table, "d")
    assert counter.total == 0


def test_request_counter_counts_retried_attempts_as_requests(moto_table):
    counter = RequestCounter(moto_table)
    attempts = []

    def throttle_first_attempt(**kwargs):
        attempts.append(1)
        if len(attempts) == 1:
            from botocore.awsrequest import AWSResponse

            body = b'{"__type":"ThrottlingException","message":"slow down"}'
            response = AWSResponse("https://dynamodb", 400, {"x-amzn-ErrorType": "ThrottlingException"}, None)
            response._content = body
            return response
        return None

    moto_table.meta.events.register("before-send.dynamodb.PutItem", throttle_first_attempt)
    _put(moto_table, "a")
    assert counter.snapshot() == {"PutItem": 2}


def test_standing_stubber_answers_any_number_of_calls_in_any_order():
    client = boto3.client("dynamodb", region_name="us-east-1")
    stubber = StandingStubber(client, {"put_item": {}, "update_item": {"Attributes": {"n": {"N": "1"}}}})
    stubber.activate()
    for pk in ("a", "b"):
        _put(client, pk)
        answer = client.update_item(TableName="t", Key={"pk": {"S": pk}, "sk": {"S": "s"}})
        assert answer["Attributes"] == {"n": {"N": "1"}}
    _put(client, "c")
    assert stubber.calls == {"PutItem": 3, "UpdateItem": 2}
    with pytest.raises(StubAssertionError, match="no standing response for DeleteItem"):
        client.delete_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "s"}})


def test_standing_stubber_answers_after_its_delay_as_dynamodb_would():
    client = boto3.client("dynamodb", region_name="us-east-1")
    slept: list[float] = []
    StandingStubber(client, {"put_item": {}}, 0.005, sleep=slept.append).activate()
    _put(client, "a")
    _put(client, "b")
    assert slept == [0.005, 0.005]
    with pytest.raises(ValueError, match="delay_s must be >= 0, got -1"):
        StandingStubber(client, {"put_item": {}}, -1)


def test_standing_stubber_refuses_a_response_the_operation_cannot_return():
    client = boto3.client("dynamodb", region_name="us-east-1")
    with pytest.raises(ParamValidationError):
        StandingStubber(client, {"put_item": {"Attributes": "not a map"}})
    with pytest.raises(ValueError, match="unknown client method for stubbing: 'put_items'"):
        StandingStubber(client, {"put_items": {}})


def test_fifo_batch_spreads_new_keys_round_robin_over_groups():
    event = fifo_batch(10, 4)
    records = event["Records"]
    assert [r["attributes"]["MessageGroupId"] for r in records[:5]] == [
        "group-0",
        "group-1",
        "group-2",
        "group-3",
        "group-0",
    ]
    keys = {(json.loads(r["body"])["x"], json.loads(r["body"])["y"]) for r in records}
    assert len(keys) == 10
    again = redelivery(event)
    assert [r["body"] for r in again["Records"]] == [r["body"] for r in records]
    assert all(r["attributes"]["ApproximateReceiveCount"] == "2" for r in again["Records"])
    with pytest.raises(ValueError, match="need 1 <= groups <= records, got records=2 groups=3"):
        fifo_batch(2, 3)


def test_powertools_peer_writes_twice_per_new_message_and_once_per_duplicate():
    counts = runtime_bench.count_requests(contenders.POWERTOOLS, records=4, groups=2)
    assert counts.per_message("new_message") == 2
    assert counts.by_operation["new_message"] == {"PutItem": 4, "UpdateItem": 4}
    assert counts.per_message("duplicate") == 1
    assert counts.by_operation["duplicate"] == {"PutItem": 4}
    assert counts.items_after == 4


def test_document_mode_counts_one_request_per_message_new_or_duplicate():
    counts = runtime_bench.count_requests(contenders.ours("document"), records=4, groups=2)
    assert counts.by_operation == {"new_message": {"PutItem": 4}, "duplicate": {"PutItem": 4}}
    assert counts.items_after == 4


def test_cpu_run_processes_every_record_through_the_stubber():
    samples = runtime_bench.cpu_per_record(
        [contenders.POWERTOOLS, contenders.ours("document")],
        rounds=1,
        batches=1,
        records=4,
        groups=2,
        delay_s=0.001,
    )
    assert set(samples.samples) == {"Powertools", "ours (document)"}
    assert all(len(values) == 1 and values[0] > 0 for values in samples.samples.values())


def test_the_cpu_floor_replays_exactly_the_put_item_requests_the_runtime_sent():
    samples = runtime_bench.cpu_per_record(
        [contenders.ours("document")],
        rounds=2,
        batches=2,
        records=4,
        groups=2,
        floor_of=contenders.ours("document"),
    )
    assert set(samples.samples) == {"ours (document)", runtime_bench.FLOOR}
    assert all(len(values) == 2 and values[0] > 0 for values in samples.samples.values())


def test_a_conflict_costs_our_runtime_one_dynamodb_request_and_reaches_the_dlq():
    ours, theirs = runtime_bench.count_conflict_requests(
        records=4, groups=2, powertools=contenders.POWERTOOLS
    )
    assert ours.dynamodb_by_operation == {"PutItem": 4}
    assert ours.sqs_by_operation == {"SendMessage": 4, "DeleteMessage": 4}
    assert theirs.dynamodb_by_operation == {"PutItem": 4}


def test_log_bytes_are_what_each_handler_writes_per_record():
    from benchmarks.powertools_peer import build_powertools_handler

    measured = runtime_bench.log_bytes_per_record(
        {
            "ours": lambda client: contenders.build_ours("document", "t", client),
            "silent": lambda client: build_powertools_handler("t", dynamodb_client=client),
        },
        batches=2,
        records=4,
        groups=2,
    )
    ours, silent = measured
    assert ours.lines_per_batch == 1  # one summary (EMF) line per batch at the default level
    assert ours.bytes_per_record > 0
    assert (silent.bytes_per_record, silent.lines_per_batch) == (0, 0)


def test_cost_model_adds_up_its_components_from_the_measured_inputs():
    from benchmarks import cost_model

    inputs = cost_model.Inputs(
        "x", {"PutItem": 1}, {"PutItem": 1}, batch_latency_s=0.02, log_bytes_per_record=50
    )
    cost = cost_model.cost_per_million(inputs)
    assert cost.components["DynamoDB writes"] == pytest.approx(0.625)
    # 100,000 invocations x 0.25 GB x 0.02 s x the Arm price
    assert cost.components["Lambda duration"] == pytest.approx(100_000 * 0.25 * 0.02 * 0.0000133334)
    assert cost.total == pytest.approx(sum(cost.components.values()))
    transaction = cost_model.Inputs("t", {"TransactWriteItems": 1}, {"TransactWriteItems": 1}, 0.02, 50)
    assert cost_model.cost_per_million(transaction).components["DynamoDB writes"] == pytest.approx(4 * 0.625)


def test_rotated_puts_a_different_contender_first_each_round():
    assert [runtime_bench.rotated("abc", i)[0] for i in range(4)] == ["a", "b", "c", "a"]


def test_cold_init_program_failure_names_the_program_and_its_error():
    env = runtime_bench.cold_init_environment()
    sample = runtime_bench.run_program("import json", env)
    assert set(sample) == set(runtime_bench.COLD_INIT_KINDS)
    assert all(isinstance(value, float) and value >= 0 for value in sample.values()), sample
    with pytest.raises(runtime_bench.BenchmarkError, match="ModuleNotFoundError"):
        runtime_bench.run_program("import no_such_module_here", env)


def test_import_difference_lists_modules_beyond_the_floor():
    env = runtime_bench.cold_init_environment()
    ours = runtime_bench.import_profile("import json\nimport csv\n", env)
    floor = runtime_bench.import_profile("import json\n", env)
    difference = runtime_bench.import_difference(ours, floor)
    assert "csv" in [entry["module"] for entry in difference["heaviest"]]
    assert "json" not in [entry["module"] for entry in difference["heaviest"]]


def test_consumer_asset_is_found_by_its_handler_and_zipped(tmp_path):
    asset = tmp_path / "asset.abc123"
    (asset / "idempotent_runtime").mkdir(parents=True)
    (asset / "idempotent_runtime" / "handler.py").write_text("handler = None\n" * 50)
    template = {
        "Resources": {
            "Other": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Handler": "x.y", "Code": {"S3Key": "z.zip"}},
            },
            "Consumer": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Handler": synth_bench.CONSUMER_HANDLER, "Code": {"S3Key": "abc123.zip"}},
            },
        }
    }
    manifest = {"files": {"abc123": {"source": {"path": "asset.abc123", "packaging": "zip"}}}}
    (tmp_path / "Stack.template.json").write_text(json.dumps(template))
    (tmp_path / "Stack.assets.json").write_text(json.dumps(manifest))
    assert synth_bench.consumer_asset_dir(tmp_path) == asset
    size = synth_bench.zipped_size(asset)
    assert size["files"] == 1
    assert size["unzipped_bytes"] == len("handler = None\n" * 50)
    assert 0 < size["zip_bytes"] < size["unzipped_bytes"]


def test_targets_compare_the_ratio_or_the_value():
    faster = Metric("m", "ms", 30, 300, "Powertools", "how", Target("ratio", 0.3, "≤ 0.3x"))
    assert faster.ratio == pytest.approx(0.1) and faster.met is True
    slower = Metric("m", "ms", 100, 300, "Powertools", "how", Target("ratio", 0.3, "≤ 0.3x"))
    assert slower.met is False
    bigger = Metric("asset", "bytes", 70_000, 1_000_000, "peer", "how", Target("value", 65536, "≤ 64 KB"))
    assert bigger.met is False
    missing = unmeasured("m", "ms", "Powertools", "how", "mode not built", Target("ratio", 0.3, "≤ 0.3x"))
    assert missing.ratio is None and missing.met is None
    text = render_markdown([faster, slower, missing], {})
    assert "| `m` | ms | 30 | 300 (Powertools) | 0.10\u00d7 | ≤ 0.3x | yes |" in text
    assert "**no**" in text and "not measured" in text and "mode not built" in text


def test_measurements_reach_moto_whatever_endpoint_or_profile_the_shell_exports(monkeypatch):
    # What a shell holds after talking to the local emulator (stopped now: nothing listens on port 9) or
    # preparing `make deploy`: without isolation every request goes to that endpoint or fails on the profile.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    counts = runtime_bench.count_requests(contenders.ours("document"), records=4, groups=2)
    assert counts.by_operation["new_message"] == {"PutItem": 4}
    assert counts.items_after == 4
    samples = runtime_bench.cpu_per_record([contenders.POWERTOOLS], rounds=1, batches=1, records=2, groups=1)
    assert len(samples.samples["Powertools"]) == 1
    assert runtime_bench.os.environ["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"  # the caller's, restored
    assert runtime_bench.os.environ["AWS_PROFILE"] == "no-such-profile"


def test_run_writes_json_table_and_chart_in_the_documented_shape(tmp_path):
    status = run.main(["--quick", "--only", "requests", "--output-dir", str(tmp_path)])
    document = json.loads((tmp_path / "results.json").read_text())
    section_errors = [m["not_measured"] for m in document["metrics"] if m["name"].endswith("_section")]
    assert (status, section_errors) == (0, [])
    metrics = {metric["name"]: metric for metric in document["metrics"]}
    assert set(metrics) == {
        f"ddb_requests_per_{kind}_{mode}"
        for kind in ("new_message", "duplicate")
        for mode in contenders.MODES
    } | {"ddb_requests_per_conflict_document"} | {
        f"ddb_requests_per_{kind}_versioned" for kind in ("new_message", "stale", "duplicate", "conflict")
    }
    versioned = {name: m["ours"] for name, m in metrics.items() if name.endswith("_versioned")}
    assert set(versioned.values()) == {1}
    assert all(metrics[name]["met"] is True and metrics[name]["reference"] is None for name in versioned)
    for metric in metrics.values():
        assert set(metric) >= REQUIRED_KEYS
        assert metric["reference_name"] == ("none" if metric["name"] in versioned else "Powertools")
        if metric["ours"] is not None and metric["reference"] is not None:
            assert metric["ratio"] == pytest.approx(metric["ours"] / metric["reference"], abs=1e-4)
    document_mode = metrics["ddb_requests_per_new_message_document"]
    assert (document_mode["ours"], document_mode["reference"], document_mode["met"]) == (1, 2, True)
    table = (tmp_path / "results.md").read_text()
    assert "| metric | unit | ours | reference | ratio | target | met |" in table
    assert "`ddb_requests_per_new_message_document`" in table
    assert (tmp_path / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_skipped_test_suite_keeps_the_previous_measurement_marked_as_carried_over(tmp_path):
    previous = tmp_path / "results.json"
    previous.write_text(
        json.dumps(
            {
                "metrics": [
                    {
                        "name": "test_suite_s",
                        "unit": "s",
                        "ours": 61.5,
                        "reference": None,
                        "reference_name": "",
                        "ratio": None,
                        "method": "make test",
                        "target": None,
                        "met": None,
                        "exit_code": 0,
                        "measured_utc": "2026-11-21T23:00:00Z",
                    },
                    {
                        "name": "cpu_us_per_record",
                        "unit": "µs",
                        "ours": 1,
                        "reference": 2,
                        "reference_name": "Powertools",
                        "ratio": 0.5,
                        "method": "cpu",
                    },
                ],
                "run": {"finished_utc": "2026-11-21T23:00:00Z"},
            }
        )
    )
    (kept,) = run._carried_over(previous, {"test_suite_s"})
    assert (kept.name, kept.ours, kept.extra["exit_code"]) == ("test_suite_s", 61.5, 0)
    assert kept.extra["carried_over"] == "not rerun; measured 2026-11-21T23:00:00Z"
    assert "not rerun; measured 2026-11-21T23:00:00Z" in render_markdown([kept], {})
    assert run._carried_over(tmp_path / "missing.json", {"test_suite_s"}) == []


def test_the_volume_rows_hold_the_emulators_cpu_to_plain_motos_and_to_its_own_at_the_smallest_size():
    runs = [
        volume_bench.Drained(1000, publish_s=2.0, drain_s=4.0, emulator_cpu_s=2.4, deliveries=1000),
        volume_bench.Drained(10000, publish_s=20.0, drain_s=50.0, emulator_cpu_s=30.0, deliveries=10000),
        volume_bench.Drained(1000, publish_s=2.0, drain_s=6.0, emulator_cpu_s=2.6, deliveries=1000),
    ]
    total, per_message, against_moto, at_scale = run.volume_metrics(
        runs, plain_cpu_s=5.0, plain_messages=1000
    )

    assert (total.ours, total.target, total.met) == (70.0, None, None)  # wall time: recorded, no target
    assert (per_message.ours, per_message.reference, per_message.target) == (7.0, 7.0, None)
    assert (against_moto.ours, against_moto.reference) == (2.5, 5.0)  # ms: the 1,000 runs against plain moto
    assert (against_moto.ratio, against_moto.target.text, against_moto.met) == (
        0.5,
        f"≤ 1.5{TIMES} plain moto",
        True,
    )
    assert (at_scale.ours, at_scale.reference, at_scale.ratio, at_scale.met) == (3.0, 2.5, 1.2, True)
    assert [r["drained_per_s"] for r in total.extra["runs"]] == [250.0, 200.0, 166.7]


def test_the_local_tools_rows_hold_each_commands_median_to_a_second():
    from benchmarks import local_tools_bench

    timed = [
        local_tools_bench.Timed("local output TopicArn --stack BenchTwo", [0.6, 0.9, 0.7], 3, 294),
        local_tools_bench.Timed("local status", [1.2, 0.95, 1.4], 3, 294),
    ]
    output, status = run.local_tools_metrics(timed)
    assert (output.name, output.ours, output.met) == ("local_output_s", 0.7, True)
    assert (status.name, status.ours, status.met) == ("local_status_s", 1.2, False)
    assert "with 3 stacks of app.py -c outbox=true deployed (294 resources)" in status.method
