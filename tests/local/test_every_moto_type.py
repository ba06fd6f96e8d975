"""Every CloudFormation type the emulator creates deploys and deletes through a change set, as the CDK CLI
deploys: the types moto lists (``CloudFormationModel.__subclasses__()``, about a hundred), several of which
fail on plain moto 5.2.5 (an SSM parameter without a name, an API Gateway method with a MOCK integration, a
route table the stack cannot delete, ...), and the types the emulator adds
(``idempotent_local.cloudformation``). A type moto does not know, or a custom resource, is left out of the
stack with a note instead of failing it; when a pipeline needs it, ``local status`` says which resource needs
it and exits 1."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idempotent_cli.main import main as cli_main
from idempotent_local.emulator import Emulator
from idempotent_local.stacks import deployed_stacks
from tests.local.moto_type_templates import TEMPLATES, function

NESTED = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {}}}}


def _creatable_types() -> set[str]:
    """What the emulator's CloudFormation can create: moto's model map with the taught types in it."""
    from moto.cloudformation import parsing

    from idempotent_local import cloudformation

    cloudformation.teach()
    # "?" is moto's stand-in for custom resources, AWS::SERVICE::RESOURCE a class of moto's that names no type
    return set(parsing.get_model_map()) - {"?", "AWS::SERVICE::RESOURCE"}


def test_every_type_the_emulator_creates_has_a_template_here() -> None:
    assert _creatable_types() == set(TEMPLATES)


def _deploy(emulator: Emulator, name: str, resources: dict[str, Any]) -> dict[str, Any]:
    cloudformation = emulator.client("cloudformation")
    change_set = cloudformation.create_change_set(
        StackName=name,
        ChangeSetName="deploy",
        ChangeSetType="CREATE",
        TemplateBody=json.dumps({"Resources": resources}),
    )
    cloudformation.execute_change_set(ChangeSetName=change_set["Id"], StackName=name)
    return dict(cloudformation.describe_stacks(StackName=name)["Stacks"][0])


@pytest.fixture(scope="module")
def prepared(state_dir: Any) -> Emulator:
    """The emulator with what templates read from S3: a layer's zip and a nested stack's template."""
    from idempotent_local import emulator as emulators

    emulator, _ = emulators.start(state_dir)
    emulator.reset()
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket="layers")
    s3.put_object(Bucket="layers", Key="layer.zip", Body=b"PK\x05\x06" + b"\0" * 18)  # an empty zip
    s3.create_bucket(Bucket="templates")
    s3.put_object(Bucket="templates", Key="nested.json", Body=json.dumps(NESTED).encode())
    return emulator


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
def test_a_template_of_the_type_deploys_and_deletes(prepared: Emulator, kind: str) -> None:
    name = "Every-" + kind.replace("::", "-")
    resources = json.loads(
        json.dumps(TEMPLATES[kind]).replace(
            "NESTED_TEMPLATE_URL", f"{prepared.endpoint}/templates/nested.json"
        )
    )
    stack = _deploy(prepared, name, resources)
    failed = [
        e.get("ResourceStatusReason")
        for e in prepared.client("cloudformation").describe_stack_events(StackName=name)["StackEvents"]
        if e["ResourceStatus"].endswith("FAILED")
    ]
    assert (stack["StackStatus"], failed) == ("CREATE_COMPLETE", [])
    (summary,) = [s for s in deployed_stacks(prepared) if s.name == name]
    assert (summary.problems(), summary.notes, summary.resources) == ([], [], len(resources))
    prepared.client("cloudformation").delete_stack(StackName=name)
    deleted = prepared.client("cloudformation").describe_stacks(StackName=stack["StackId"])["Stacks"][0]
    assert deleted["StackStatus"] == "DELETE_COMPLETE"


def _function(**environment: Any) -> dict[str, Any]:
    return function(Environment={"Variables": environment})


def _with_custom_resources(needed_by_pipeline: bool) -> dict[str, Any]:
    """A queue polled by a function (a pipeline), a custom resource, a type moto does not know
    (``AWS::Lambda::Url``), and, when ``needed_by_pipeline``, the function reading the custom resource."""
    role = TEMPLATES["AWS::IAM::Role"]["Subject"]
    reads = {"SETTING": {"Fn::GetAtt": ["Setting", "Value"]}} if needed_by_pipeline else {}
    return {
        "Role": role,
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Handler": _function(**reads),
        "Mapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": {"Ref": "Handler"},
                "EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]},
            },
        },
        "Provider": _function(),
        "Setting": {
            "Type": "Custom::Setting",
            "Properties": {"ServiceToken": {"Fn::GetAtt": ["Provider", "Arn"]}, "Name": "greeting"},
        },
        "Url": {
            "Type": "AWS::Lambda::Url",
            "Properties": {"TargetFunctionArn": {"Ref": "Provider"}, "AuthType": "NONE"},
        },
    }


def test_a_custom_resource_and_an_unknown_type_are_notes_when_no_pipeline_needs_them(
    clean_emulator: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = _deploy(clean_emulator, "Notes", _with_custom_resources(needed_by_pipeline=False))

    assert stack["StackStatus"] == "CREATE_COMPLETE"  # moto waits forever for a custom resource's answer
    (summary,) = deployed_stacks(clean_emulator)
    assert summary.problems() == []
    assert summary.notes == [
        "Setting (Custom::Setting) was not created: the emulator does not run custom resources (their "
        "provider runs during a deploy)",
        "Url (AWS::Lambda::Url) was not created: the emulator does not know this type",
    ]
    assert cli_main(["local", "status", "--state-dir", clean_emulator.state_dir]) == 0
    assert "Url (AWS::Lambda::Url) was not created" in capsys.readouterr().out


def test_a_left_out_resource_a_pipeline_needs_is_a_problem_naming_what_needs_it(
    clean_emulator: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    _deploy(clean_emulator, "Needed", _with_custom_resources(needed_by_pipeline=True))

    (summary,) = deployed_stacks(clean_emulator)
    assert summary.problems() == [
        "Setting (Custom::Setting) was not created: the emulator does not run custom resources (their "
        "provider runs during a deploy); the pipeline's Handler (AWS::Lambda::Function) refers to it and was "
        "created without it"
    ]
    configuration = clean_emulator.client("lambda").get_function_configuration(
        FunctionName=clean_emulator.client("cloudformation").describe_stack_resource(
            StackName="Needed", LogicalResourceId="Handler"
        )["StackResourceDetail"]["PhysicalResourceId"]
    )
    assert "SETTING" not in configuration.get("Environment", {}).get("Variables", {})  # as the problem says
    assert cli_main(["local", "status", "--state-dir", clean_emulator.state_dir]) == 1
    assert "! Setting (Custom::Setting) was not created" in capsys.readouterr().out
