"""``local request METHOD URL`` does what API Gateway does with a deployed REST API's URL: the stage, the most
specific resource (literal, then ``{name}``, a greedy ``{name+}`` last), the method (else ``ANY``), and the
function of the Lambda proxy integration run with API Gateway's proxy event; its answer is the response, and
a function that fails or answers in another shape is API Gateway's 502. A stack deployed through
CloudFormation, as an app deploys it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idempotent_cli.main import main as cli_main
from idempotent_local.emulator import Emulator
from tests.local.stack_helpers import deploy

# Answers with the event it got (what API Gateway handed over), or fails as the path asks.
ECHO = """
import json


def handler(event, context):
    if event["path"].endswith("/raise"):
        raise RuntimeError("the function failed")
    if event["path"].endswith("/malformed"):
        return "not a proxy response"
    body = {k: event[k] for k in ("resource", "path", "httpMethod", "pathParameters", "stageVariables",
                                  "queryStringParameters", "multiValueQueryStringParameters", "body",
                                  "isBase64Encoded")}
    body["header"] = (event["headers"] or {}).get("X-Trace")
    body["stage"] = event["requestContext"]["stage"]
    return {"statusCode": 201 if event["httpMethod"] == "POST" else 200,
            "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}
"""


def _resource(parent: dict[str, Any], part: str) -> dict[str, Any]:
    return {
        "Type": "AWS::ApiGateway::Resource",
        "Properties": {"RestApiId": {"Ref": "Api"}, "ParentId": parent, "PathPart": part},
    }


def _method(resource: str, verb: str, integration: dict[str, Any] | None = None) -> dict[str, Any]:
    proxy = {
        "Type": "AWS_PROXY",
        "IntegrationHttpMethod": "POST",
        "Uri": {
            "Fn::Sub": "arn:aws:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/"
            "${Echo.Arn}/invocations"
        },
    }
    return {
        "Type": "AWS::ApiGateway::Method",
        "Properties": {
            "RestApiId": {"Ref": "Api"},
            "ResourceId": {"Ref": resource}
            if resource != "root"
            else {"Fn::GetAtt": ["Api", "RootResourceId"]},
            "HttpMethod": verb,
            "AuthorizationType": "NONE",
            "Integration": integration or proxy,
        },
    }


TEMPLATE = {
    "Resources": {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {"AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": []}},
        },
        "Echo": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": "index.handler",
                "Runtime": "python3.12",
                "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                "Code": {"ZipFile": ECHO},
            },
        },
        "Api": {"Type": "AWS::ApiGateway::RestApi", "Properties": {"Name": "shop"}},
        "Orders": _resource({"Fn::GetAtt": ["Api", "RootResourceId"]}, "orders"),
        "Order": _resource({"Ref": "Orders"}, "{order_id}"),
        "Anything": _resource({"Fn::GetAtt": ["Api", "RootResourceId"]}, "{proxy+}"),
        "Health": _resource({"Fn::GetAtt": ["Api", "RootResourceId"]}, "health"),
        "PostOrders": _method("Orders", "POST"),
        "GetOrder": _method("Order", "GET"),
        "AnyAnything": _method("Anything", "ANY"),
        "GetHealth": _method("Health", "GET", {"Type": "MOCK"}),
        "Deployment": {
            "Type": "AWS::ApiGateway::Deployment",
            "DependsOn": ["PostOrders", "GetOrder", "AnyAnything", "GetHealth"],
            "Properties": {"RestApiId": {"Ref": "Api"}},
        },
        "Stage": {
            "Type": "AWS::ApiGateway::Stage",
            "Properties": {
                "RestApiId": {"Ref": "Api"},
                "DeploymentId": {"Ref": "Deployment"},
                "StageName": "prod",
                "Variables": {"flavour": "green"},
            },
        },
    }
}


@pytest.fixture
def base_url(clean_emulator: Emulator) -> str:
    ids = deploy(clean_emulator, TEMPLATE, stack="Shop")
    return f"https://{ids['Api']}.execute-api.us-east-1.amazonaws.com/prod"


def _request(
    emulator: Emulator, capsys: pytest.CaptureFixture[str], method: str, url: str, *options: str
) -> tuple[int, str, str]:
    code = cli_main(["local", "request", method, url, *options, "--state-dir", emulator.state_dir])
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def test_a_post_reaches_the_function_of_its_resource_with_api_gateways_proxy_event(
    clean_emulator: Emulator, base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _request(
        clean_emulator,
        capsys,
        "POST",
        f"{base_url}/orders?tag=a&tag=b&note=caf%C3%A9",
        "--data",
        '{"order_id": "ü-1"}\n',
        "--header",
        "X-Trace: t-1",
    )

    assert code == 0, out + err
    assert err.splitlines()[0].startswith("HTTP 201 (POST /orders -> ")
    assert json.loads(out) == {
        "resource": "/orders",
        "path": "/orders",
        "httpMethod": "POST",
        "pathParameters": None,
        "stageVariables": {"flavour": "green"},
        "queryStringParameters": {"tag": "b", "note": "café"},  # the last value of a repeated name
        "multiValueQueryStringParameters": {"tag": ["a", "b"], "note": ["café"]},
        "body": '{"order_id": "ü-1"}\n',  # as sent, trailing newline included
        "isBase64Encoded": False,
        "header": "t-1",
        "stage": "prod",
    }


def test_the_most_specific_resource_wins_and_a_greedy_one_takes_the_rest(
    clean_emulator: Emulator, base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _request(clean_emulator, capsys, "GET", f"{base_url}/orders/o%2F1")
    assert code == 0
    order = json.loads(out)
    assert (order["resource"], order["pathParameters"]) == ("/orders/{order_id}", {"order_id": "o/1"})

    code, out, _ = _request(clean_emulator, capsys, "DELETE", f"{base_url}/orders/o-1/lines/2")
    assert code == 0  # no DELETE on /orders/{order_id}, and /orders/o-1/lines/2 is deeper: {proxy+}, ANY
    anything = json.loads(out)
    assert (anything["resource"], anything["httpMethod"], anything["pathParameters"]) == (
        "/{proxy+}",
        "DELETE",
        {"proxy": "orders/o-1/lines/2"},
    )


def test_what_api_gateway_would_not_route_is_refused_with_the_reason(
    clean_emulator: Emulator, base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api = base_url.split("//")[1].split(".")[0]
    code, _, err = _request(clean_emulator, capsys, "GET", f"{base_url}/orders")
    assert (code, err.strip()) == (1, f"error: /orders of REST API {api} has no GET method (POST)")

    code, _, err = _request(clean_emulator, capsys, "GET", base_url.replace("/prod", "/test") + "/orders")
    assert code == 1 and err.startswith(f"error: no stage 'test' of REST API {api} in the emulator")

    code, _, err = _request(clean_emulator, capsys, "GET", f"{base_url}/health")
    assert code == 1 and "integrates MOCK" in err and "only Lambda proxy integrations" in err

    code, _, err = _request(clean_emulator, capsys, "GET", "https://example.com/prod/orders")
    assert code == 1 and err.startswith("error: not a REST API URL: 'https://example.com/prod/orders'")


@pytest.mark.parametrize(
    ("path", "reason"),
    [("raise", "the function failed: "), ("malformed", "malformed Lambda proxy response: 'not a proxy")],
)
def test_a_function_that_fails_or_answers_another_shape_is_a_502(
    clean_emulator: Emulator, base_url: str, capsys: pytest.CaptureFixture[str], path: str, reason: str
) -> None:
    code, out, err = _request(clean_emulator, capsys, "PUT", f"{base_url}/orders/o-1/{path}")

    assert code == 1
    assert json.loads(out) == {"message": "Internal server error"}  # what API Gateway answers
    status, why = err.splitlines()[:2]
    assert status.startswith("HTTP 502 (PUT /{proxy+} -> ")
    assert why.startswith(f"local: {reason}"), err
