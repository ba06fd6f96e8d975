"""End to end on loopback: `idempotent-pipeline local deploy --demo` (as `make deploy` runs it; the real CDK
CLI) puts the reference stack into the emulator, wired, and runs the demo; `local diff` shows a changed prop;
a redeploy with changed props and code updates the stack in place and the runner runs the new code; destroy
removes it and stops the emulator.

The tests of this module run in order and share one deployment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from stack_helpers import local_deploy

from benchmarks import volume_bench
from idempotent_cli.main import main as cli_main
from idempotent_local import demo
from idempotent_local import emulator as emulators
from idempotent_local.demo import DemoError, Report, SampleTraffic, find_pipelines, run_demo
from idempotent_local.emulator import Emulator
from idempotent_local.runner import EventSourceRunner
from idempotent_local.stacks import deployed_stacks

# One deployment shared by the module's tests: they run on one xdist worker (make test: --dist loadfile).
pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
STACK = "IdempotentPipeline"

if not (ROOT / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


@dataclass
class Deployment:
    emulator: Emulator
    state_dir: Path
    output: Path
    template: dict[str, Any]
    physical: dict[str, str]  # logical id -> physical id
    outputs: dict[str, str]
    printed: str  # what the first `deploy` printed
    exit_status: int
    report: Report  # the demo that `deploy` ran

    @property
    def where(self) -> list[str]:
        """The command line's options that name this deployment: its emulator, app and cloud assembly."""
        return ["--state-dir", str(self.state_dir), "--app-dir", str(ROOT), "--output", str(self.output)]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == kind}

    def physical_of_type(self, kind: str) -> list[str]:
        return [self.physical[k] for k in self.of_type(kind)]


def main(args: list[str]) -> int:
    return cli_main(["local", *args])


def _read(emulator: Emulator, output: Path) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    template = json.loads((output / f"{STACK}.template.json").read_text())
    cloudformation = emulator.client("cloudformation")
    resources = cloudformation.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
    stack = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]
    return (
        template,
        {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources},
        {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
    )


@pytest.fixture(scope="module")
def deployment(state_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    emulator, _ = emulators.start(state_dir)
    emulator.reset()  # other tests leave resources behind
    output = tmp_path_factory.mktemp("cdk.out")
    # The whole `deploy` command, demo included, as `make deploy` runs it; the report it printed is kept.
    reports: list[Report] = []

    def recording_run_demo(*args: Any, **kwargs: Any) -> Report:
        reports.append(run_demo(*args, **kwargs))
        return reports[-1]

    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(demo, "run_demo", recording_run_demo)
        patch.delenv("MAKELEVEL", raising=False)  # as a user runs it (make's own run prints make targets)
        status = local_deploy(state_dir, output, demo=True)
    assert len(reports) == 1, printed.getvalue()
    yield Deployment(
        emulator, state_dir, output, *_read(emulator, output), printed.getvalue(), status, reports[0]
    )


def _queue_attributes(emulator: Emulator, url: str) -> dict[str, str]:
    return emulator.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def _pipeline_of(emulator: Emulator, table_name: str) -> Any:
    """The deployed pipeline (:func:`find_pipelines`) that writes to ``table_name``."""
    with EventSourceRunner(emulator) as runner:
        (pipeline,) = [p for p in find_pipelines(emulator, runner) if p.table_name == table_name]
    return pipeline


def test_every_resource_of_the_template_exists_in_the_emulator(deployment: Deployment) -> None:
    (stack,) = deployed_stacks(deployment.emulator)
    assert (stack.name, stack.status, stack.problems()) == (STACK, "CREATE_COMPLETE", [])
    assert set(deployment.physical) == set(deployment.template["Resources"])
    assert set(deployment.outputs) == {
        "TopicArn",
        "QueueUrl",
        "DeadLetterQueueUrl",
        "SubscriptionDeadLetterQueueUrl",
        "TableName",
        "FunctionName",
    }


def test_the_volume_benchmark_publishes_and_drains_through_the_deployed_stack(deployment: Deployment) -> None:
    """`make bench`'s volume row, small: its publisher call and drain work on the stack as deployed."""
    pipeline = _pipeline_of(deployment.emulator, deployment.outputs["TableName"])
    drained = volume_bench.publish_and_drain(deployment.emulator, pipeline, 40, groups=4)
    assert (drained.messages, drained.deliveries) == (40, 40)


def test_raw_subscription_delivers_from_the_topic_to_the_queue(deployment: Deployment) -> None:
    sns, sqs = deployment.emulator.client("sns"), deployment.emulator.client("sqs")
    (subscription,) = deployment.physical_of_type("AWS::SNS::Subscription")
    attributes = sns.get_subscription_attributes(SubscriptionArn=subscription)["Attributes"]
    queue_arn = _queue_attributes(deployment.emulator, deployment.outputs["QueueUrl"])["QueueArn"]
    assert (attributes["TopicArn"], attributes["Endpoint"], attributes["Protocol"]) == (
        deployment.outputs["TopicArn"],
        queue_arn,
        "sqs",
    )
    assert attributes["RawMessageDelivery"] == "true"
    sns.publish(
        TopicArn=deployment.outputs["TopicArn"],
        Message='{"probe": true}',
        MessageGroupId="probe",
        MessageDeduplicationId="probe",
    )
    (message,) = sqs.receive_message(QueueUrl=deployment.outputs["QueueUrl"], WaitTimeSeconds=1)["Messages"]
    assert message["Body"] == '{"probe": true}'
    sqs.delete_message(QueueUrl=deployment.outputs["QueueUrl"], ReceiptHandle=message["ReceiptHandle"])


def test_queue_policies_are_set_from_the_template(deployment: Deployment) -> None:
    for logical, resource in deployment.of_type("AWS::SQS::QueuePolicy").items():
        (queue_ref,) = resource["Properties"]["Queues"]
        url = deployment.physical[queue_ref["Ref"]]
        policy = json.loads(_queue_attributes(deployment.emulator, url)["Policy"])
        assert len(policy["Statement"]) == len(resource["Properties"]["PolicyDocument"]["Statement"]), logical
    policy = json.loads(_queue_attributes(deployment.emulator, deployment.outputs["QueueUrl"])["Policy"])
    conditions = json.dumps([s.get("Condition") for s in policy["Statement"]])
    assert deployment.outputs["TopicArn"] in conditions  # SendMessage only from this topic


def test_redrive_policy_points_at_the_dead_letter_queue(deployment: Deployment) -> None:
    dlq_arn = _queue_attributes(deployment.emulator, deployment.outputs["DeadLetterQueueUrl"])["QueueArn"]
    (queue,) = [
        r for r in deployment.of_type("AWS::SQS::Queue").values() if "RedrivePolicy" in r["Properties"]
    ]
    redrive = json.loads(
        _queue_attributes(deployment.emulator, deployment.outputs["QueueUrl"])["RedrivePolicy"]
    )
    assert redrive == {
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": queue["Properties"]["RedrivePolicy"]["maxReceiveCount"],
    }


def test_time_to_live_is_enabled_on_the_table(deployment: Deployment) -> None:
    (table,) = deployment.of_type("AWS::DynamoDB::Table").values()
    ttl = deployment.emulator.client("dynamodb").describe_time_to_live(
        TableName=deployment.outputs["TableName"]
    )
    assert ttl["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": table["Properties"]["TimeToLiveSpecification"]["AttributeName"],
    }


def test_event_source_mapping_reports_batch_item_failures(deployment: Deployment) -> None:
    (spec,) = deployment.of_type("AWS::Lambda::EventSourceMapping").values()
    (mapping,) = deployment.emulator.client("lambda").list_event_source_mappings(
        FunctionName=deployment.outputs["FunctionName"]
    )["EventSourceMappings"]
    queue_arn = _queue_attributes(deployment.emulator, deployment.outputs["QueueUrl"])["QueueArn"]
    assert mapping["EventSourceArn"] == queue_arn
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == spec["Properties"]["BatchSize"]


def test_alarms_exist(deployment: Deployment) -> None:
    names = deployment.physical_of_type("AWS::CloudWatch::Alarm")
    alarms = deployment.emulator.client("cloudwatch").describe_alarms(AlarmNames=names)["MetricAlarms"]
    assert sorted(a["AlarmName"] for a in alarms) == sorted(names)
    assert len(names) == 10
    # SNS could put a message in neither the queue nor the subscription's DLQ: the one loss left to see.
    assert "NumberOfNotificationsFailedToRedriveToDlq" in {a["MetricName"] for a in alarms}


def test_deploy_prints_each_step_and_the_demos_balanced_report(deployment: Deployment) -> None:
    assert deployment.exit_status == 0, deployment.printed
    steps = [line for line in deployment.printed.splitlines() if line.startswith("==> [")]
    assert [line[: len("==> [1/5]")] for line in steps] == [f"==> [{n}/5]" for n in range(1, 6)]
    assert "starting the local AWS emulator" in steps[0]
    assert "cdk bootstrap" in steps[1]
    assert "cdk deploy" in steps[2]
    assert "running the pipeline" in steps[4]
    assert f"    {STACK}: CREATE_COMPLETE," in deployment.printed
    assert "was not created" not in deployment.printed
    (balance,) = [line for line in deployment.printed.splitlines() if "delivered = items" in line]
    assert balance.endswith("26 = 20 + 3 + 3: nothing lost, nothing doubled")
    (conflicts,) = [line for line in deployment.printed.splitlines() if "conflicts (same key" in line]
    assert conflicts.split()[-6:] == ["2", "quarantined", "to", "the", "dead-letter", "queue"]
    assert "make " not in deployment.printed  # not run by make: the hints are the command line's
    assert "    idempotent-pipeline local demo" in deployment.printed


def test_demo_accounts_for_every_published_message(deployment: Deployment) -> None:
    report = deployment.report
    assert report.function == deployment.outputs["FunctionName"]
    assert (report.published, report.deduplicated_by_fifo, report.delivered) == (31, 5, 26)
    assert (report.items_written, report.duplicates_absorbed, report.dead_lettered) == (20, 3, 3)
    assert (report.conflicts_published, report.conflicts, report.on_conflict) == (2, 2, "quarantine")
    assert (report.undeliverable, report.missing_keys) == (0, [])
    assert report.balanced
    # The function's own counters (Embedded Metric Format) agree with what the demo measured.
    assert report.function_metrics == {
        "processed": 20,
        "duplicates": 3,
        "failed": 0,
        "quarantined": 3,
        "conflicts": 2,
        "misconfigured": 0,
    }
    kinds = sorted(
        (letter.kind, letter.body.startswith("this is not JSON")) for letter in report.dead_letters
    )
    assert kinds == [("conflict", False), ("conflict", False), ("invalid", True)]
    (poison,) = [letter for letter in report.dead_letters if letter.kind == "invalid"]
    assert "json" in poison.reason
    assert all('"revision": 2' in letter.body for letter in report.dead_letters if letter.kind == "conflict")


def test_demo_counts_every_dead_letter_even_behind_a_busy_message_group(deployment: Deployment) -> None:
    # Twelve poison messages in one FIFO group: a receive shows at most ten of them while they are in
    # flight; the demo counts from the queue's totals and still balances.
    traffic = SampleTraffic(groups=1, per_group=3, retried=1, changed=0, poison=12)
    report = run_demo(deployment.emulator, traffic=traffic)
    assert (report.dead_lettered, report.balanced) == (12, True)
    assert report.published == traffic.published == 3 + 1 + 3 + 0 + 12
    assert len(report.dead_letters) <= 12
    assert {letter.group_id for letter in report.dead_letters} == {f"demo-{report.run_id}-poison"}


def test_a_message_sns_cannot_deliver_lands_in_the_subscription_dead_letter_queue(
    deployment: Deployment,
) -> None:
    sns, sqs = deployment.emulator.client("sns"), deployment.emulator.client("sqs")
    attributes = {f"a{n}": {"DataType": "String", "StringValue": str(n)} for n in range(11)}
    sns.publish(
        TopicArn=deployment.outputs["TopicArn"],
        Message='{"x": "too", "y": "many attributes"}',
        MessageGroupId="undeliverable",
        MessageAttributes=attributes,  # raw delivery to SQS takes at most 10
    )
    queue = _queue_attributes(deployment.emulator, deployment.outputs["QueueUrl"])
    assert queue["ApproximateNumberOfMessages"] == queue["ApproximateNumberOfMessagesNotVisible"] == "0"
    url = deployment.outputs["SubscriptionDeadLetterQueueUrl"]
    (letter,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"])[
        "Messages"
    ]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=letter["ReceiptHandle"])
    assert letter["Body"] == '{"x": "too", "y": "many attributes"}'
    assert letter["Attributes"]["MessageGroupId"] == "undeliverable"
    assert letter["MessageAttributes"]["ErrorCode"]["StringValue"] == "InvalidParameterValue"


def test_the_cdk_cli_printed_no_node_banners(deployment: Deployment) -> None:
    for name in ("cdk-bootstrap.log", "cdk-deploy.log"):
        log = (deployment.state_dir / name).read_text()
        assert "NodeVersionSupportWarning" not in log, name
        assert "end-of-life" not in log, name
        assert "IdempotentPipeline" in log or "Bootstrapping" in log or "bootstrapped" in log, name


def test_output_prints_one_stack_output_for_scripts(deployment: Deployment) -> None:
    where = ["--state-dir", str(deployment.state_dir), "--app-dir", str(ROOT)]
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        assert main(["output", "TopicArn", *where]) == 0
        assert main(["output", "TopicArn", "--stack", "IdempotentPipeline", *where]) == 0
        assert main(["output", "TopicArm", *where]) == 1
        assert main(["output", "TopicArn", "--stack", "Nope", *where]) == 1
    topic = deployment.outputs["TopicArn"]
    assert printed.getvalue() == f"{topic}\n{topic}\n"
    assert "no deployed stack has an output 'TopicArm'" in errors.getvalue()
    assert "IdempotentPipeline.TopicArn" in errors.getvalue()  # the outputs there are, to pick from
    assert "no stack named 'Nope'" in errors.getvalue()


def test_env_points_a_shell_at_the_emulator_and_keeps_node_quiet_there(deployment: Deployment) -> None:
    where = ["--state-dir", str(deployment.state_dir), "--app-dir", str(ROOT)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["env", *where]) == 0
    exported = dict(line.removeprefix("export ").split("=", 1) for line in printed.getvalue().splitlines())
    assert exported["AWS_ENDPOINT_URL"] == deployment.emulator.endpoint
    assert "AWS_PROFILE" not in exported
    # What the tool gives its own processes, so a plain `npx cdk diff` after `eval` prints no banner.
    major = os.popen("node -p 'process.versions.node.split(\".\")[0]'").read().strip()
    assert exported["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] == major
    assert exported["AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED"] == "true"
    assert not [name for name in exported if name.startswith("NPM_CONFIG_") or name.startswith("CDK_")]


def test_env_points_a_shell_only_at_what_exists_and_env_unset_undoes_it(emulator: Emulator) -> None:
    local = f"{sys.executable} -m idempotent_local"
    where = f"--state-dir {emulator.state_dir}"
    script = (
        f'eval "$({local} env {where})"; env > after-env.txt; '
        f'eval "$({local} env --unset)"; env > after-unset.txt'
    )
    work = Path(emulator.state_dir) / "shell"
    work.mkdir(exist_ok=True)
    before = {**os.environ, "AWS_PROFILE": "mine", "KEPT": "yes"}
    subprocess.run(["bash", "-c", script], cwd=work, env=before, check=True)

    def read(name: str) -> dict[str, str]:
        lines = (work / name).read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    after_env, after_unset = read("after-env.txt"), read("after-unset.txt")
    assert after_env["AWS_ENDPOINT_URL"] == emulator.endpoint
    # No file that does not exist: the AWS CLI's own profile files stay as they were.
    assert "AWS_CONFIG_FILE" not in after_env and "AWS_SHARED_CREDENTIALS_FILE" not in after_env
    set_by_env = {
        name
        for name in after_env
        if name.startswith(("AWS_", "JSII_")) and after_env[name] != before.get(name)
    }
    assert "AWS_ACCESS_KEY_ID" in set_by_env
    assert not set_by_env & set(after_unset)  # all undone ...
    assert (after_unset["AWS_PROFILE"], after_unset["KEPT"]) == ("mine", "yes")  # ... and nothing else


def test_diff_shows_a_changed_prop_against_what_is_deployed(deployment: Deployment) -> None:
    printed = io.StringIO()
    args = ["diff", "--state-dir", str(deployment.state_dir), "--app-dir", str(ROOT)]
    args += ["--output", str(deployment.output), "-c", "max_receive_count=7"]
    with contextlib.redirect_stdout(printed):
        assert main(args) == 0
    assert "There were no differences" not in printed.getvalue()
    assert "AWS::SQS::Queue" in printed.getvalue()
    assert "RedrivePolicy" in printed.getvalue()


def test_diff_fails_when_the_synth_fails(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["diff", "--state-dir", str(deployment.state_dir), "--app-dir", str(ROOT)]
    args += ["--output", str(deployment.output), "-c", "batch_size=five"]
    assert main(args) == 1
    assert "context batch_size must be an integer; got 'five'" in capsys.readouterr().err


STAMP = """
def stamp(message):
    return {**message.json_object(), "stamped_by": "redeployed code"}
"""


def test_redeploy_with_changed_props_and_code_updates_the_stack(
    deployment: Deployment, tmp_path: Path
) -> None:
    lambda_ = deployment.emulator.client("lambda")
    code_before = lambda_.get_function_configuration(FunctionName=deployment.outputs["FunctionName"])
    (tmp_path / "stamping.py").write_text(STAMP)
    changes = ["max_receive_count=7", "memory_size=256", "processor=stamping:stamp"]
    assert local_deploy(deployment.state_dir, deployment.output, *changes, f"code_directory={tmp_path}") == 0
    template, physical, outputs = _read(deployment.emulator, deployment.output)
    cloudformation = deployment.emulator.client("cloudformation")
    assert cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"] == "UPDATE_COMPLETE"
    redrive = json.loads(_queue_attributes(deployment.emulator, outputs["QueueUrl"])["RedrivePolicy"])
    in_template = [
        r["Properties"]["RedrivePolicy"]["maxReceiveCount"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in r["Properties"]
    ]
    assert in_template == [redrive["maxReceiveCount"]] == [7]
    configuration = deployment.emulator.client("lambda").get_function_configuration(
        FunctionName=outputs["FunctionName"]
    )
    assert configuration["MemorySize"] == 256
    assert configuration["Environment"]["Variables"]["PROCESSOR"] == "stamping:stamp"
    assert configuration["CodeSha256"] != code_before["CodeSha256"]  # the new code asset is deployed
    assert physical == deployment.physical  # updated in place, nothing replaced
    # Still wired, and the runner runs the new code: every item of this run carries its stamp.
    report = run_demo(deployment.emulator)
    assert report.balanced
    items = deployment.emulator.client("dynamodb").scan(TableName=outputs["TableName"])["Items"]
    stamped = [item for item in items if item.get("stamped_by") == {"S": "redeployed code"}]
    assert len(stamped) == report.items_written == 20


STANDARD = "StandardPipeline"


def test_a_standard_pipeline_deploys_and_runs_through_the_runner_and_the_demo(deployment: Deployment) -> None:
    context = [f"stack_name={STANDARD}", "fifo=false"]
    assert local_deploy(deployment.state_dir, deployment.output, *context) == 0
    cloudformation = deployment.emulator.client("cloudformation")
    stack = cloudformation.describe_stacks(StackName=STANDARD)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    for name in ("QueueUrl", "DeadLetterQueueUrl", "SubscriptionDeadLetterQueueUrl"):
        assert not outputs[name].endswith(".fifo"), name
        assert outputs[name].rsplit("/", 1)[-1].startswith(f"{STANDARD}-"), name  # CloudFormation's name
    assert not outputs["TopicArn"].endswith(".fifo")
    variables = deployment.emulator.client("lambda").get_function_configuration(
        FunctionName=outputs["FunctionName"]
    )["Environment"]["Variables"]
    assert variables["QUEUE_TYPE"] == "standard"
    pipeline = _pipeline_of(deployment.emulator, outputs["TableName"])

    report = run_demo(deployment.emulator, pipeline=pipeline)

    assert not report.fifo
    # No deduplication window: the producer retries arrive too, and are duplicates.
    assert (report.published, report.deduplicated_by_fifo, report.delivered) == (31, 0, 31)
    assert (report.items_written, report.duplicates_absorbed, report.conflicts, report.dead_lettered) == (
        20,
        8,
        2,
        3,
    )
    assert report.balanced, report.render()
    destroyed = main(
        ["destroy", STANDARD, "--keep-emulator", *deployment.where, "-c", context[0], "-c", context[1]]
    )
    assert destroyed == 0
    assert [s.name for s in deployed_stacks(deployment.emulator)] == [STACK]


def test_a_versioned_pipeline_keeps_the_newest_state_and_counts_older_ones_stale(
    deployment: Deployment,
) -> None:
    context = ["stack_name=IdempotentVersioned", "fifo=false", "mode=versioned", "version_field=meta.version"]
    assert local_deploy(deployment.state_dir, deployment.output, *context) == 0
    cloudformation = deployment.emulator.client("cloudformation")
    stack = cloudformation.describe_stacks(StackName="IdempotentVersioned")["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    sns = deployment.emulator.client("sns")
    # From several producers, out of order: each state published and consumed in turn.
    states = [(3, "c"), (1, "a"), (3, "c"), (2, "b"), (3, "other")]
    with EventSourceRunner(deployment.emulator) as runner:
        mappings = [m for m in runner.mappings() if m.function_name == outputs["FunctionName"]]
        for version, name in states:
            body = {"x": "e-1", "y": "profile", "meta": {"version": version}, "name": name}
            sns.publish(TopicArn=outputs["TopicArn"], Message=json.dumps(body))
            runner.drain(mappings=mappings)
    outcomes = list(runner.stats.outcomes.values())
    assert outcomes == ["processed", "stale", "duplicate", "stale", "quarantined"]
    assert runner.stats.describe_totals().startswith(
        "5 messages: 1 processed, 1 duplicate, 2 stale, 1 quarantined"
    )
    items = deployment.emulator.client("dynamodb").scan(TableName=outputs["TableName"])["Items"]
    (item,) = [i for i in items if i["pk"] == {"S": "e-1"}]  # (besides the conflict's quarantine record)
    assert (item["name"], item["idempotency:version"]) == ({"S": "c"}, {"N": "3"})
    dead = deployment.emulator.client("sqs").receive_message(
        QueueUrl=outputs["DeadLetterQueueUrl"], MessageAttributeNames=["All"], MaxNumberOfMessages=10
    )["Messages"]
    assert [json.loads(m["Body"])["name"] for m in dead] == ["other"]
    destroyed = main(
        [
            "destroy",
            "IdempotentVersioned",
            "--keep-emulator",
            *deployment.where,
            *[arg for c in context for arg in ("-c", c)],
        ]
    )
    assert destroyed == 0


def test_a_topic_dropped_by_a_redeploy_and_added_back_by_the_next_is_back_and_delivers(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    # As a user iterating on an app: deploy, deploy -c topic=false, deploy (a stack of its own).
    name = "Toggled"
    cloudformation, sns = deployment.emulator.client("cloudformation"), deployment.emulator.client("sns")
    for topic in ("true", "false", "true"):
        assert (
            local_deploy(deployment.state_dir, deployment.output, f"stack_name={name}", f"topic={topic}") == 0
        )
        stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        if topic == "false":
            assert "TopicArn" not in outputs
            assert not [t for t in sns.list_topics()["Topics"] if f"{name}-" in t["TopicArn"]]
    printed = capsys.readouterr().out
    assert printed.count(f"    {name}: UPDATE_COMPLETE,") == 2
    assert "    ! " not in printed  # every resource the stack lists exists
    assert sns.get_topic_attributes(TopicArn=outputs["TopicArn"])["Attributes"]["TopicArn"]
    sns.publish(TopicArn=outputs["TopicArn"], Message='{"back": true}', MessageGroupId="back")
    sqs = deployment.emulator.client("sqs")
    (message,) = sqs.receive_message(QueueUrl=outputs["QueueUrl"], WaitTimeSeconds=1)["Messages"]
    assert message["Body"] == '{"back": true}'
    assert main(["destroy", name, "--keep-emulator", *deployment.where, "-c", f"stack_name={name}"]) == 0


def test_the_cli_demo_refuses_a_pipeline_with_a_processor_before_publishing(deployment: Deployment) -> None:
    found = _pipeline_of(deployment.emulator, deployment.outputs["TableName"])

    def waiting() -> int:
        attributes = _queue_attributes(deployment.emulator, deployment.outputs["QueueUrl"])
        return int(attributes["ApproximateNumberOfMessages"])

    before = waiting()
    with pytest.raises(DemoError, match=r"runs PROCESSOR=orders:handle: the demo.s sample"):
        run_demo(
            deployment.emulator,
            pipeline=dataclasses.replace(found, processor="orders:handle"),
            with_processor=False,  # what `local demo` without --anyway and `local deploy --demo` pass
        )
    assert waiting() == before  # nothing published


def test_destroy_removes_the_stack_and_stops_the_emulator(deployment: Deployment) -> None:
    emulator = deployment.emulator
    assert emulators.find(deployment.state_dir) == emulator
    # What is left once the stack is gone, read while the emulator still runs: only what the stack retains
    # (the table and both dead-letter queues hold user data).
    retained: list[list[str]] = []
    queues: list[list[str]] = []
    real_stop = emulators.stop

    def stop_after_looking(state_dir: Path | str, **kwargs: Any) -> bool:
        # (the standard pipeline's retained table and queues, destroyed before, are left out)
        tables = emulator.client("dynamodb").list_tables()["TableNames"]
        retained.append([name for name in tables if name.startswith(f"{STACK}-")])
        urls = emulator.client("sqs").list_queues().get("QueueUrls", [])
        queues.append(sorted(url for url in urls if url.rsplit("/", 1)[-1].startswith(f"{STACK}-")))
        assert [s.name for s in deployed_stacks(emulator)] == []
        assert emulator.client("sns").list_subscriptions()["Subscriptions"] == []
        assert emulator.client("lambda").list_event_source_mappings()["EventSourceMappings"] == []
        return real_stop(state_dir, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(emulators, "stop", stop_after_looking)
        status = main(["destroy", *deployment.where])
    assert status == 0
    # The table and the dead letters are kept (RemovalPolicy.RETAIN, the constructs' default), as in AWS.
    assert retained == [[deployment.outputs["TableName"]]]
    dead_letter_queues = [
        deployment.outputs[k] for k in ("DeadLetterQueueUrl", "SubscriptionDeadLetterQueueUrl")
    ]
    assert [[url.rsplit("/", 1)[-1] for url in found] for found in queues] == [
        sorted(url.rsplit("/", 1)[-1] for url in dead_letter_queues)
    ]
    # Plain `destroy` stops the emulator: no state file, no process.
    assert emulators.find(deployment.state_dir) is None
    assert not (deployment.state_dir / emulators.STATE_FILE).exists()
    with pytest.raises(ProcessLookupError):
        os.kill(emulator.pid, 0)


def test_a_demo_whose_processor_rejects_the_sample_says_why_the_numbers_do_not_add_up() -> None:
    # An app from `idempotent-pipeline init` runs a processor that needs fields the sample orders lack.
    report = Report(
        function="shop-consumer", run_id="r1", fifo=True, published=2, deduplicated_by_fifo=0,
        expected_deduplicated=0, undeliverable=0, delivered=2, deliveries=2, items_written=0,
        duplicates_absorbed=0, conflicts_published=0, conflicts=0, on_conflict="quarantine",
        dead_lettered=2, missing_keys=[["o-1", "1"], ["o-2", "1"]], processor="orders:handle",
    )  # fmt: skip
    assert not report.balanced
    text = report.render()
    assert "PROCESSOR=orders:handle decides what a message must hold" in text
    assert "run `idempotent-pipeline local run` instead" in text
    assert "decides what a message" not in dataclasses.replace(report, processor="").render()
