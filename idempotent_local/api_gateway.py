"""A request to a deployed REST API, as API Gateway serves it through a Lambda proxy integration.

Moto stores REST APIs (resources, methods, integrations, stages) but serves none of them in server mode, and
cannot run a function without Docker. ``local request METHOD URL`` does what API Gateway does with the URL
the stack outputs (``https://ID.execute-api.REGION.amazonaws.com/STAGE/PATH``), reading everything back from
the emulator:

- the stage must exist; the path is matched against the API's resources (a ``{name}`` segment, a greedy
  ``{name+}`` last segment; the most specific resource wins), then the method (else ``ANY``);
- the method's integration must be ``AWS_PROXY`` to a Lambda function (other integrations are not run: the
  error says which it is);
- the function gets API Gateway's proxy event (format 1.0: ``resource``, ``path``, ``httpMethod``,
  ``headers`` and ``multiValueHeaders``, the query string's, ``pathParameters``, ``stageVariables``,
  ``requestContext``, ``body``, ``isBase64Encoded``) and runs as ``local run`` runs functions
  (:meth:`idempotent_local.runner.EventSourceRunner.invoke`): its deployed code, its environment, the
  emulator's endpoint;
- its answer (``statusCode``, ``headers``, ``body``) is the response; a function that raises, times out or
  answers in another shape is API Gateway's ``502 {"message": "Internal server error"}``.

Authorizers, API keys, request validation, mapping templates and throttling are not applied.
"""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any

from idempotent_local.emulator import Emulator
from idempotent_local.errors import LocalCloudError
from idempotent_local.names import ACCOUNT_ID

# https://API.execute-api.REGION.amazonaws.com/STAGE/PATH, as a stack outputs it.
API_URL = re.compile(
    r"https?://(?P<api>[a-z0-9]+)\.execute-api\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?P<rest>/.*)?"
)
PROXY_URI = re.compile(r":lambda:path/\d{4}-\d{2}-\d{2}/functions/(?P<function>arn:[^/]+)/invocations$")
INTERNAL_ERROR = {"message": "Internal server error"}


class RequestError(LocalCloudError):
    """The request cannot reach a function: no such API, stage, resource or method, or not a Lambda proxy."""


@dataclass(frozen=True)
class Route:
    """Where a request goes: the API's resource and method, and the function its integration invokes."""

    api_id: str
    stage: str
    resource_path: str  # the resource's template, e.g. /orders/{id}
    path: str  # the request's path below the stage, e.g. /orders/o-1
    method: str
    function_arn: str
    path_parameters: dict[str, str] = field(default_factory=dict)
    stage_variables: dict[str, str] = field(default_factory=dict)


def _match(template: str, path: str) -> dict[str, str] | None:
    """The path parameters when ``path`` matches the resource path ``template``, else None."""
    names: list[str] = []
    pattern = ""
    for segment in template.strip("/").split("/") if template != "/" else []:
        parameter = re.fullmatch(r"\{(\w+)(\+?)\}", segment)  # {name}, or {name+}: greedy
        if parameter:
            names.append(parameter.group(1))
            pattern += "/(.+)" if parameter.group(2) else "/([^/]+)"
        else:
            pattern += "/" + re.escape(segment)
    found = re.fullmatch(pattern or "/?", path if pattern else path.rstrip("/") or "/")
    if found is None:
        return None
    return {name: urllib.parse.unquote(value) for name, value in zip(names, found.groups(), strict=True)}


def _specificity(template: str) -> tuple[int, int]:
    """Literal segments first, then single parameters, a greedy one last (API Gateway's preference)."""
    segments = template.strip("/").split("/")
    return (sum(1 for s in segments if not s.startswith("{")), -sum(1 for s in segments if s.endswith("+}")))


def resolve(emulator: Emulator, url: str, method: str) -> Route:
    """The route of ``METHOD URL`` in the emulator's REST APIs (see the module docstring)."""
    parsed = API_URL.fullmatch(url.split("?", 1)[0])
    if parsed is None:
        raise RequestError(
            f"not a REST API URL: {url!r}; expected https://ID.execute-api.REGION.amazonaws.com/STAGE/PATH, "
            "as the stack's output gives it"
        )
    api_id, rest = parsed.group("api"), (parsed.group("rest") or "/")
    stage, _, below = rest.lstrip("/").partition("/")
    client = emulator.client("apigateway")
    try:
        stage_found = client.get_stage(restApiId=api_id, stageName=stage)
    except client.exceptions.ClientError as error:
        raise RequestError(f"no stage {stage!r} of REST API {api_id} in the emulator ({error})") from None
    path = "/" + below
    candidates = []
    for page in client.get_paginator("get_resources").paginate(restApiId=api_id, embed=["methods"]):
        for resource in page["items"]:
            parameters = _match(resource["path"], path)
            if parameters is not None:
                candidates.append((_specificity(resource["path"]), resource, parameters))
    if not candidates:
        raise RequestError(
            f"REST API {api_id} has no resource for {path} (AWS answers 403 Missing Authentication Token)"
        )
    _, resource, parameters = max(candidates, key=lambda c: c[0])
    methods = resource.get("resourceMethods") or {}
    chosen = method.upper() if method.upper() in methods else "ANY" if "ANY" in methods else None
    if chosen is None:
        raise RequestError(
            f"{resource['path']} of REST API {api_id} has no {method.upper()} method "
            f"({', '.join(sorted(methods)) or 'none'})"
        )
    integration = client.get_integration(restApiId=api_id, resourceId=resource["id"], httpMethod=chosen)
    target = PROXY_URI.search(integration.get("uri") or "")
    if integration.get("type") != "AWS_PROXY" or target is None:
        raise RequestError(
            f"{chosen} {resource['path']} of REST API {api_id} integrates {integration.get('type')} "
            f"{integration.get('uri') or ''}: only Lambda proxy integrations (AWS_PROXY) run locally"
        )
    return Route(
        api_id,
        stage,
        resource["path"],
        path,
        method.upper(),
        target.group("function"),
        parameters,
        dict(stage_found.get("variables") or {}),
    )


def proxy_event(
    route: Route, *, query: str = "", headers: dict[str, str] | None = None, body: bytes | None = None
) -> dict[str, Any]:
    """API Gateway's Lambda proxy event (format 1.0) for a request that took ``route``."""
    headers = dict(headers or {})
    multi_query: dict[str, list[str]] = {}
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        multi_query.setdefault(name, []).append(value)
    text: str | None = None
    encoded = False
    if body is not None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode("ascii"), True
    now = time.time()
    return {
        "resource": route.resource_path,
        "path": route.path,
        "httpMethod": route.method,
        "headers": headers or None,
        "multiValueHeaders": {name: [value] for name, value in headers.items()} or None,
        "queryStringParameters": {name: values[-1] for name, values in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": route.path_parameters or None,
        "stageVariables": route.stage_variables or None,
        "requestContext": {
            "resourceId": route.resource_path,
            "resourcePath": route.resource_path,
            "httpMethod": route.method,
            "path": f"/{route.stage}{route.path}",
            "stage": route.stage,
            "accountId": ACCOUNT_ID,
            "apiId": route.api_id,
            "requestId": str(uuid.uuid4()),
            "extendedRequestId": str(uuid.uuid4()),
            "protocol": "HTTP/1.1",
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000),
            "identity": {"sourceIp": "127.0.0.1", "userAgent": headers.get("User-Agent")},
            "domainName": f"{route.api_id}.execute-api.amazonaws.com",
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    error: str | None = None  # why API Gateway answered 502 instead of the function


def response_of(reply: dict[str, Any]) -> Response:
    """API Gateway's response for the function's reply (the runner's: ``result``, or an error)."""
    result = reply.get("result")
    if "result" not in reply:
        why = (
            reply.get("error")
            or reply.get("cold_start")
            or ("timed out" if "timeout" in reply else "crashed")
        )
        return _internal_error(f"the function failed: {why}")
    if not isinstance(result, dict) or not isinstance(result.get("statusCode", 200), int):
        return _internal_error(f"malformed Lambda proxy response: {result!r}")
    body = result.get("body") or ""
    raw = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
    return Response(int(result.get("statusCode", 200)), headers, raw)


def _internal_error(why: str) -> Response:
    """API Gateway's 502 for a function that failed or answered in another shape (``why``: for the user)."""
    return Response(502, {"Content-Type": "application/json"}, json.dumps(INTERNAL_ERROR).encode(), why)


__all__ = ["RequestError", "Response", "Route", "proxy_event", "resolve", "response_of"]
