#!/usr/bin/env python3
"""The reference stack: one IdempotentPipeline, configurable through CDK context, checked by cdk-nag.

    npx cdk synth                                   # templates into cdk.out/
    npx cdk synth -c mode=guarded -c processor=orders:handle -c code_directory=src
    npx cdk synth -c partition_key_name=order_id -c sort_key_name=line_id -c ttl_seconds=86400

Every context key, its type and default is in CONTEXT below; values from ``-c`` arrive as strings and are
parsed, values in cdk.json keep their JSON type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy
from constructs import Construct

from idempotent_pipeline import ConfigurationError, IdempotentPipeline


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"context {key} must be a non-empty string; got {value!r}")
    return value


def _integer(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigurationError(f"context {key} must be an integer; got {value!r}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigurationError(f"context {key} must be an integer; got {value!r}") from None


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigurationError(f"context {key} must be true or false; got {value!r}")


def _removal_policy(key: str, value: Any) -> RemovalPolicy:
    policies = {
        "retain": RemovalPolicy.RETAIN,
        "destroy": RemovalPolicy.DESTROY,
        "snapshot": RemovalPolicy.SNAPSHOT,
    }
    text = str(value).strip().lower()
    if text not in policies:
        raise ConfigurationError(f"context {key} must be one of retain, destroy, snapshot; got {value!r}")
    return policies[text]


def _seconds(key: str, value: Any) -> Duration:
    return Duration.seconds(_integer(key, value))


# context key -> (IdempotentPipeline prop, parser). Keys left unset take the construct's default.
CONTEXT: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "partition_key_name": ("partition_key_name", _text),
    "sort_key_name": ("sort_key_name", _text),
    "time_to_live_attribute": ("time_to_live_attribute", _text),
    "ttl_seconds": ("ttl", _seconds),
    "mode": ("mode", _text),
    "key_source": ("key_source", _text),
    "partition_key_field": ("partition_key_field", _text),
    "sort_key_field": ("sort_key_field", _text),
    "processor": ("processor", _text),
    "code_directory": ("code_directory", _text),
    "lease_seconds": ("lease_duration", _seconds),
    "timeout_seconds": ("timeout", _seconds),
    "visibility_timeout_seconds": ("visibility_timeout", _seconds),
    "batch_size": ("batch_size", _integer),
    "max_receive_count": ("max_receive_count", _integer),
    "max_concurrency": ("max_concurrency", _integer),
    "reserved_concurrent_executions": ("reserved_concurrent_executions", _integer),
    "memory_size": ("memory_size", _integer),
    "high_throughput": ("high_throughput", _boolean),
    "content_based_deduplication": ("content_based_deduplication", _boolean),
    "removal_policy": ("removal_policy", _removal_policy),
    "max_workers": ("max_workers", _integer),
    "log_level": ("log_level", _text),
    "metrics_namespace": ("metrics_namespace", _text),
}
DEFAULT_STACK_NAME = "IdempotentPipeline"


def pipeline_props(context: Callable[[str], Any]) -> dict[str, Any]:
    """IdempotentPipeline props from the context keys that are set.

    ``context`` looks a key up, e.g. ``app.node.get_all_context().get``.
    """
    props = {}
    for key, (prop, parse) in CONTEXT.items():
        value = context(key)
        if value is not None:
            props[prop] = parse(key, value)
    return props


class ReferenceStack(cdk.Stack):
    """One IdempotentPipeline and outputs naming what a publisher and an operator need."""

    def __init__(
        self, scope: Construct, id: str, *, pipeline_props: Mapping[str, Any], **kwargs: Any
    ) -> None:
        super().__init__(scope, id, description="idempotent-pipeline reference stack", **kwargs)
        self.pipeline = IdempotentPipeline(self, "Pipeline", **pipeline_props)
        outputs = {
            "TopicArn": self.pipeline.topic.topic_arn,
            "QueueUrl": self.pipeline.queue.queue_url,
            "DeadLetterQueueUrl": self.pipeline.dead_letter_queue.queue_url,
            "TableName": self.pipeline.table.table_name,
            "FunctionName": self.pipeline.function.function_name,
        }
        for name, value in outputs.items():
            cdk.CfnOutput(self, name, value=value)


def build_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> cdk.App:
    """The reference app: ``context`` adds to what the CDK CLI passes (cdk.json and ``-c``)."""
    app = cdk.App(context=dict(context or {}), outdir=outdir)
    # One read of the whole context (cdk.json, -c and the argument): each lookup is a jsii round trip.
    settings = app.node.get_all_context()
    stack_name = settings.get("stack_name") or DEFAULT_STACK_NAME
    ReferenceStack(app, _text("stack_name", stack_name), pipeline_props=pipeline_props(settings.get))
    nag = settings.get("nag")
    if _boolean("nag", True if nag is None else nag):
        # cdk-nag is a development dependency: imported only when the checks are on.
        from cdk_nag import AwsSolutionsChecks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    build_app().synth()
