"""The integration tests (``integ/integ_*.py``) checked offline: each app synthesizes to its committed
snapshot, its stacks delete everything they create, and every AWS SDK call of its assertions is a request the
service's API accepts, expecting a response the API can give (botocore's service models).

Deploying them (``make integ``) needs an AWS account; nothing here does.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.model import ListShape, MapShape, Shape, StructureShape
from botocore.validate import ParamValidator
from idempotent_runtime.contract import HANDLER, Mode, metrics_of

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "integ"))

import harness  # noqa: E402  (integ/ on the path first)

APPS = pytest.mark.parametrize("app", harness.APPS, ids=lambda app: app.stem)
SDK_CALL = "Custom::DeployAssert@SdkCall"
# What each test must do at least: publish, then read the table and the queues.
CALLS = {
    ("SNS", "publish"),
    ("DynamoDB", "getItem"),
    ("SQS", "receiveMessage"),
    ("SQS", "getQueueAttributes"),
}
RETAINED = {"Retain", "RetainExceptOnCreate", "Snapshot"}


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every app synthesized as integ-runner does it, in this process (jsii starts once)."""
    return {app.stem: harness.synthesize(app, tmp_path_factory.mktemp(app.stem)) for app in harness.APPS}


def templates(assembly: Path) -> dict[str, dict[str, Any]]:
    return {path.name: json.loads(path.read_text()) for path in assembly.glob("*.template.json")}


def sdk_calls(assembly: Path) -> list[dict[str, Any]]:
    return [
        resource["Properties"]
        for template in templates(assembly).values()
        for resource in template["Resources"].values()
        if resource["Type"].startswith(SDK_CALL)
    ]


def test_there_is_an_integration_test_per_main_variant():
    assert [app.stem for app in harness.APPS] == [
        "integ_fifo_document",
        "integ_guarded",
        "integ_standard",
        "integ_transaction",
    ]


@APPS
def test_the_committed_snapshot_is_what_the_app_synthesizes(app, synthesized):
    changed = harness.differences(app, synthesized[app.stem])
    assert not changed, (
        f"integ/{harness.snapshot_dir(app).name} is out of date: run `{harness.REGENERATE}` and commit it "
        "(asset hashes and the assertions' salts do not count)\n" + "\n".join(changed)
    )


@APPS
def test_the_snapshot_holds_no_asset_directories(app):
    snapshot = harness.snapshot_dir(app)
    assert (snapshot / "manifest.json").is_file()
    assert not list(snapshot.glob("asset.*"))


def test_a_template_change_is_a_difference_but_a_new_runtime_or_synth_time_is_not(tmp_path, synthesized):
    original = synthesized[harness.APPS[0].stem]
    copy = tmp_path / "assembly"
    shutil.copytree(original, copy, ignore=shutil.ignore_patterns("asset.*"))
    case = next(iter(json.loads((copy / "integ.json").read_text())["testCases"].values()))
    (stack,) = case["stacks"]
    files = json.loads((copy / f"{stack}.assets.json").read_text())["files"]
    (code,) = [asset_hash for asset_hash, asset in files.items() if asset["source"]["packaging"] == "zip"]
    for path in copy.glob("*.json"):  # another runtime: its code has another hash everywhere
        path.write_text(path.read_text().replace(code, "f" * 64))
    assertion_stack = copy / f"{case['assertionStackName']}.template.json"
    assertions = json.loads(assertion_stack.read_text())
    for resource in assertions["Resources"].values():  # another synth time: other salts
        if resource["Type"].startswith(SDK_CALL):
            resource["Properties"]["salt"] = "1"
    assertion_stack.write_text(json.dumps(assertions))
    assert harness.compared(copy) == harness.compared(original)

    test_stack = copy / f"{stack}.template.json"
    template = json.loads(test_stack.read_text())
    (table,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    table["Properties"]["BillingMode"] = "PROVISIONED"
    test_stack.write_text(json.dumps(template))
    assert harness.compared(copy) != harness.compared(original)


@APPS
def test_an_integration_test_leaves_nothing_in_the_account(app, synthesized):
    kept = [
        f"{name}: {logical_id} ({resource['Type']})"
        for name, template in templates(synthesized[app.stem]).items()
        for logical_id, resource in template["Resources"].items()
        if {resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")} & RETAINED
        or resource.get("Properties", {}).get("DeletionProtectionEnabled")
    ]
    assert not kept


@APPS
def test_every_check_waits_so_a_check_that_never_holds_fails_the_deployment(app, synthesized):
    checks = [call for call in sdk_calls(synthesized[app.stem]) if "expected" in call]
    assert checks
    assert all("stateMachineArn" in call for call in checks)


def _decoded(parameters: dict[str, Any]) -> dict[str, Any]:
    """The request the assertion provider sends: each value is JSON text, a deploy-time value (a resource's
    name, URL or ARN, resolved by CloudFormation) stands in as a string."""
    return {
        name: json.loads(value) if isinstance(value, str) else "resolved-at-deploy"
        for name, value in parameters.items()
    }


def _problems(expected: Any, shape: Shape, where: str) -> list[str]:
    """Where ``expected`` (integ-tests-alpha's encoded matchers) asks for something ``shape`` cannot hold."""
    if isinstance(expected, dict) and len(expected) == 1:
        (key,) = expected
        if key in ("$ObjectLike", "$ArrayWith"):
            return _problems(expected[key], shape, where)
        if key in ("$StringLike", "$SerializedJson"):
            return (
                [] if shape.type_name == "string" else [f"{where}: a string matcher on a {shape.type_name}"]
            )
    if isinstance(shape, StructureShape):
        if not isinstance(expected, dict):
            return [f"{where}: expects {type(expected).__name__}, the API returns a structure"]
        problems = []
        for name, value in expected.items():
            if name not in shape.members:
                problems.append(f"{where}: no member {name!r} (members: {sorted(shape.members)})")
            else:
                problems += _problems(value, shape.members[name], f"{where}.{name}")
        return problems
    if isinstance(shape, MapShape):
        if not isinstance(expected, dict):
            return [f"{where}: expects {type(expected).__name__}, the API returns a map"]
        return [
            p for name, value in expected.items() for p in _problems(value, shape.value, f"{where}.{name}")
        ]
    if isinstance(shape, ListShape):
        if not isinstance(expected, list):
            return [f"{where}: expects {type(expected).__name__}, the API returns a list"]
        return [
            p for i, value in enumerate(expected) for p in _problems(value, shape.member, f"{where}[{i}]")
        ]
    if shape.type_name == "string" and not isinstance(expected, str):
        return [f"{where}: expects {expected!r}, the API returns a string"]
    return []


@APPS
def test_every_sdk_call_is_a_valid_request_expecting_what_the_api_returns(app, synthesized):
    session = botocore.session.get_session()
    calls = sdk_calls(synthesized[app.stem])
    assert {(call["service"], call["api"]) for call in calls} >= CALLS
    for call in calls:
        service = session.get_service_model(call["service"].lower())
        operation = service.operation_model(call["api"][0].upper() + call["api"][1:])
        report = ParamValidator().validate(_decoded(call["parameters"]), operation.input_shape)
        assert not report.has_errors(), f"{call['service']}.{call['api']}: {report.generate_report()}"
        if "expected" in call:
            problems = _problems(json.loads(call["expected"]), operation.output_shape, call["api"])
            assert not problems, problems


def test_the_readme_costs_what_the_tests_deploy(synthesized):
    resources = [
        resource
        for assembly in synthesized.values()
        for template in templates(assembly).values()
        for resource in template["Resources"].values()
    ]

    def count(type_: str) -> int:
        return sum(resource["Type"] == type_ for resource in resources)

    # Each consumer sends the counters of its mode (its function's IDEMPOTENCY_MODE, document by default).
    metrics = sum(
        len(
            metrics_of(
                Mode(
                    r["Properties"]
                    .get("Environment", {})
                    .get("Variables", {})
                    .get("IDEMPOTENCY_MODE", "document")
                )
            )
        )
        for r in resources
        if r.get("Properties", {}).get("Handler") == HANDLER
    )
    calls = [r["Properties"] for r in resources if r["Type"].startswith(SDK_CALL)]
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Proof on a real account", 1)[1].split("\n## ", 1)[0]
    for phrase in (
        f"{metrics} custom metrics",
        f"{count('AWS::CloudWatch::Alarm')} alarms",
        f"{count('AWS::StepFunctions::StateMachine')} waiting checks",
        f"{len(calls)} calls created",
        f"{sum(call['api'] == 'publish' for call in calls)} SNS publishes",
    ):
        assert phrase in section
