"""The nag evaluation's scoring counts what benchmarks/nag_eval.py says it counts (the apps' synth and the
tools' runs are `make bench`'s job; tests/nag/test_nag_evaluation.py checks idempotent_nag on the apps)."""

from __future__ import annotations

import json
import re

from benchmarks.nag_eval import OUT, Finding, samples, score
from idempotent_nag import RULES

NAG, SERVERLESS, OURS = "cdk-nag AwsSolutions", "serverless-rules", "idempotent_nag"


def test_a_finding_is_found_only_by_a_rule_that_says_it_on_the_construct_it_is_planted_in():
    result = score(
        [
            Finding(NAG, "no-dead-letter-queue", "AwsSolutions-SQS3", "Queue/Resource"),
            Finding(NAG, "no-dead-letter-queue", "AwsSolutions-SQS3", "SubscriptionDeadLetterQueue/Resource"),
            Finding(NAG, "no-dead-letter-queue", "AwsSolutions-IAM4", "Consumer/ServiceRole/Resource"),
            # another claim on the planted construct: a false finding, not the plant
            Finding(
                SERVERLESS, "unbounded-stream-retries", "ES1001", "Relay/DynamoDBEventSource:Orders/Resource"
            ),
            Finding(SERVERLESS, "correct-orders", "ES6000", "DeadLetterQueue/Resource"),
        ]
    )
    planted = len(result["found_by"])
    nag, serverless = result["tools"][NAG], result["tools"][SERVERLESS]
    assert (nag["found"], nag["missed"], nag["false"], nag["other_findings"]) == (1, planted - 1, 1, 1)
    assert (serverless["found"], serverless["missed"], serverless["false"]) == (0, planted, 2)
    assert result["found_by"]["no-dead-letter-queue: QueueDeadLetterQueue"] == [NAG]


def test_a_misconfiguration_reported_on_two_constructs_is_found_once():
    result = score(
        [
            Finding(
                OURS, "filtered-shared-queue", "FilteredSharedQueue", "Consumer/SqsEventSource:Queue/Resource"
            ),
            Finding(
                OURS, "filtered-shared-queue", "FilteredSharedQueue", "Refunds/SqsEventSource:Queue/Resource"
            ),
        ]
    )
    assert (result["tools"][OURS]["found"], result["tools"][OURS]["false"]) == (1, 0)
    assert result["found_by"]["filtered-shared-queue: FilteredSharedQueue"] == [OURS]


PAGE = "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html"


def finding(rule: str, verdict: str) -> dict[str, str]:
    return {
        "rule": rule,
        "level": "error",
        "resource": "S/Q/Resource",
        "verdict": verdict,
        "why": "w",
        "aws": PAGE,
    }


def test_the_sample_apps_table_counts_the_findings_and_shows_each_with_its_verdict_and_page():
    app = {"repository": "aws-samples/examples", "commit": "0123456789abcdef", "language": "Python"}
    lines = samples(
        [
            {
                **app,
                "path": "python/a",
                "findings": [finding("QueueDeadLetterQueue", "true"), finding("X", "false")],
            },
            {**app, "path": "python/b", "findings": []},
        ]
    )
    text = " ".join(lines)
    assert "2 apps nobody here wrote, from aws-samples/examples," in text
    assert "2 findings, 1 true, 1 false" in text
    a, page = "| python/a (examples, 01234567, Python) |", f"([services-sqs-errorhandling]({PAGE})) |"
    assert lines[-3:] == [
        f"{a} QueueDeadLetterQueue (error) | S/Q/Resource | true: w {page}",
        f"{a} X (error) | S/Q/Resource | false: w {page}",
        "| python/b (examples, 01234567, Python) | none | | |",
    ]


def test_the_published_evaluation_judges_every_finding_on_15_or_more_public_apps_against_an_aws_page():
    published = json.loads((OUT / "nag_eval.json").read_text())["samples"]
    assert len(published) >= 15
    ids = {rule.id for rule in RULES}
    for app in published:
        assert app["repository"] in ("aws-samples/aws-cdk-examples", "aws-samples/serverless-patterns")
        assert re.fullmatch(r"[0-9a-f]{40}", app["commit"]), app
        for found in app["findings"]:
            assert found["rule"] in ids and found["verdict"] in ("true", "false"), found
            assert found["aws"].startswith("https://docs.aws.amazon.com/"), found
