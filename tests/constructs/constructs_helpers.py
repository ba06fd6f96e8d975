"""Helpers of the construct tests (imported by name: tests/constructs is on sys.path under pytest)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE_BIN = REPO / "node_modules" / ".bin"
VENV_BIN = REPO / ".venv" / "bin"


def _node_major() -> str:
    node = shutil.which("node")
    if node is None:
        return ""
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().lstrip("v").split(".")[0]


def _silence_node_banner() -> None:
    """jsii prints an end-of-life banner unless the variable lists the running Node major version."""
    major = _node_major()
    for name in (
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION",
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION",
    ):
        listed = [v for v in os.environ.get(name, "").split(",") if v]
        if major and major not in listed:
            os.environ[name] = ",".join([*listed, major])
    os.environ.setdefault("AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE", "1")
    os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")


_silence_node_banner()

import aws_cdk as cdk  # noqa: E402  (after the environment above: jsii reads it at start)
from aws_cdk import assertions  # noqa: E402
from aws_cdk import aws_sqs as sqs  # noqa: E402

from idempotent_pipeline import ConsumerOptions, IdempotencyTable, IdempotentConsumer  # noqa: E402

# app.py checks every synth with cdk-nag 3, attached through Validations (aws-cdk-lib 2.257 on).
needs_reference_app = pytest.mark.skipif(
    not hasattr(cdk, "Validations"),
    reason="the reference app needs aws-cdk-lib with Validations (cdk-nag 3); the newest environment runs it",
)


def cdk_json_context() -> dict[str, Any]:
    """The feature flags and context of cdk.json, so in-process apps synthesize like `npx cdk synth`."""
    return json.loads((REPO / "cdk.json").read_text())["context"]


def reference_stack(
    context: dict[str, str], name: str = "Reference", app: cdk.App | None = None
) -> cdk.Stack:
    """app.py's ReferenceStack with cdk.json's context and ``context``, in ``app`` (default: a new one)."""
    import app as reference_app

    app = app or cdk.App(context=cdk_json_context())
    settings = reference_app.settings_from({**cdk_json_context(), **context}.get)
    return reference_app.ReferenceStack(app, name, settings=settings)


# Most test stacks give their alarms no action; test_constructs_alarm_actions.py checks the warning that says
# so, on stacks of its own.
NO_ALARM_ACTION = "idempotent-pipeline:alarms-without-action"


def quiet_alarms(stack: cdk.Stack) -> cdk.Stack:
    cdk.Annotations.of(stack).acknowledge_warning(NO_ALARM_ACTION, "tests: alarm actions are tested apart")
    return stack


def new_stack(name: str = "TestStack") -> cdk.Stack:
    """A stack in a fresh app with the repository's feature flags (cheap once jsii runs)."""
    app = cdk.App(context=cdk_json_context())
    return quiet_alarms(cdk.Stack(app, name))


def template_of(stack: cdk.Stack) -> assertions.Template:
    return assertions.Template.from_stack(stack)


def built_alone(block: Any, id: str) -> tuple[Any, assertions.Template]:
    """A block with its defaults alone in a stack, and the stack's template."""
    stack = new_stack()
    return block(stack, id), template_of(stack)


def resources(template: assertions.Template, type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template.to_json()["Resources"].items() if v["Type"] == type_}


def only(template: assertions.Template, type_: str) -> dict[str, Any]:
    found = resources(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.values()))


def resources_of(statement: dict[str, Any]) -> list[Any]:
    """A statement's resources as a list, without the ``{"Ref": "AWS::NoValue"}`` that older aws-cdk-lib
    releases add to a table grant (for its absent indexes) and CloudFormation drops."""
    listed = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    return [r for r in listed if r != {"Ref": "AWS::NoValue"}]


def policy_statements(template: assertions.Template) -> list[dict[str, Any]]:
    statements = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def actions_of(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def cdk_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(VENV_BIN), str(NODE_BIN), env.get("PATH", "")])
    return env


def function_asset_dir(stack: Any, handler: str | None = None) -> Path:
    """The directory of the (single, or the one with ``handler``) Lambda code asset in the stack's
    synthesized cloud assembly."""
    import aws_cdk as cdk

    template = stack.node.root.synth().get_stack_by_name(stack.stack_name).template
    functions = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and handler in (None, r["Properties"].get("Handler"))
    ]
    assert len(functions) == 1, functions
    key = functions[0]["Properties"]["Code"]["S3Key"]
    asset_hash = key.removesuffix(".zip")
    root = stack.node.root
    assert isinstance(root, cdk.App)
    directory = Path(root.outdir) / f"asset.{asset_hash}"
    assert directory.is_dir(), f"no asset directory {directory}"
    return directory


def files_under(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}


# cfn-lint rules ignored on CDK output, each with its reason:
CFN_LINT_IGNORED = {
    # W3005 "dependency already enforced by a GetAtt": CDK adds an explicit DependsOn from the function to its
    # role's default policy and role; harmless redundancy that CDK generates, not something we wrote.
    "W3005": "redundant DependsOn generated by CDK",
}


def cfn_lint_findings(template: dict[str, Any]) -> list[str]:
    """cfn-lint's findings on ``template`` (the floor's environment has no cfn-lint: the test stops there,
    skipped, after its other checks; the newest environment runs it)."""
    pytest.importorskip("cfnlint", reason="cfn-lint is installed in the newest environment, which runs it")
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template), config=ManualArgs(ignore_checks=sorted(CFN_LINT_IGNORED)))
    return [f"{m.rule.id} {m.message}" for m in matches]


def add_nag_checks(app: cdk.App) -> None:
    """cdk-nag's AwsSolutions checks on ``app``: through ``Validations`` (cdk-nag 3), or on an aws-cdk-lib
    without it as an Aspect (cdk-nag 2, which writes a CSV report per stack)."""
    from cdk_nag import AwsSolutionsChecks

    if hasattr(cdk, "Validations"):
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    else:
        cdk.Aspects.of(app).add(AwsSolutionsChecks())


def nag_findings(outdir: Path) -> list[tuple[str, str, list[str]]]:
    """The cdk-nag findings of a synthesized app (its validation report, or cdk-nag 2's CSV reports; none
    when there is no report)."""
    report_path = outdir / "validation-report.json"
    if not report_path.exists():
        return [
            (row["Rule ID"], row["Rule Level"], [row["Resource ID"]])
            for report in sorted(outdir.glob("AwsSolutions-*-NagReport.csv"))
            for row in csv.DictReader(report.read_text().splitlines())
            if row["Compliance"] == "Non-Compliant"
        ]
    report = json.loads(report_path.read_text())
    return [
        (v["ruleName"], v["severity"], [c["constructPath"] for c in v["violatingConstructs"]])
        for plugin in report["pluginReports"]
        for v in plugin["violations"]
    ]


def synth_with_nag(outdir: Path, build: Any, name: str = "Checked") -> dict[str, Any]:
    """Build a stack with ``build(stack)`` in an app with cdk.json's flags and cdk-nag; its template.

    With cdk-nag 3 the synth fails (RuntimeError, ValidationFailed) on any nag finding; the report is in
    ``outdir`` either way (:func:`nag_findings`).
    """
    app = cdk.App(context=cdk_json_context(), outdir=str(outdir))
    stack = quiet_alarms(cdk.Stack(app, name))
    build(stack)
    add_nag_checks(app)
    return app.synth().get_stack_by_name(name).template


def warnings_of(stack: cdk.Stack) -> list[tuple[str, str]]:
    """(construct path, message) of every synth warning of a stack (synthesizes it)."""
    found = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    return [(w.id, str(w.entry.data)) for w in found]


def env_of(template: assertions.Template) -> dict[str, Any]:
    return only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]


def alarms_of(template: assertions.Template) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in resources(template, "AWS::CloudWatch::Alarm").items()}


def logical_id(template: assertions.Template, type_: str, part: str) -> str:
    found = [k for k in resources(template, type_) if part in k]
    assert len(found) == 1, (type_, part, found)
    return found[0]


# arn:<partition>:cloudwatch:<region>:<account>:alarm:* of the stack the topic is in
ALARMS_OF_THIS_ACCOUNT = {
    "Fn::Join": [
        "",
        [
            "arn:",
            {"Ref": "AWS::Partition"},
            ":cloudwatch:",
            {"Ref": "AWS::Region"},
            ":",
            {"Ref": "AWS::AccountId"},
            ":alarm:*",
        ],
    ]
}


def cloudwatch_may_publish(template: dict[str, Any], topic: str) -> bool:
    """Whether the policy of topic ``topic`` (a logical id) lets CloudWatch alarms of this account publish: an
    SNS topic policy replaces SNS's default one, so without this statement every alarm action fails."""
    for policy in template["Resources"].values():
        if policy["Type"] != "AWS::SNS::TopicPolicy" or {"Ref": topic} not in policy["Properties"]["Topics"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if (
                statement["Effect"] == "Allow"
                and statement.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
                and "sns:Publish" in actions_of(statement)
                and statement["Resource"] == {"Ref": topic}
                and statement["Condition"]
                == {
                    "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                    "ArnLike": {"aws:SourceArn": ALARMS_OF_THIS_ACCOUNT},
                }
            ):
                return True
    return False


def fifo_queue(stack: cdk.Stack, id: str = "Queue", **props: Any) -> sqs.Queue:
    """A FIFO queue whose visibility timeout suits the consumer's default function timeout."""
    props.setdefault("visibility_timeout", cdk.Duration.minutes(3))
    return sqs.Queue(stack, id, fifo=True, **props)


def build_consumer(
    stack: cdk.Stack,
    *,
    queue: sqs.IQueue | None = None,
    table: IdempotencyTable | None = None,
    dead_letter_queue: sqs.IQueue | None = None,
    alarm_options: Any = None,
    **options: Any,
) -> IdempotentConsumer:
    """A consumer on a new FIFO queue (no DLQ) and IdempotencyTable; ``options`` are ConsumerOptions."""
    return IdempotentConsumer(
        stack,
        "Consumer",
        queue=queue or fifo_queue(stack),
        table=table or IdempotencyTable(stack, "Table"),
        dead_letter_queue=dead_letter_queue,
        options=ConsumerOptions(**options),
        alarm_options=alarm_options,
    )
