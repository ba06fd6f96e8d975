"""The nag evaluation's scoring counts what benchmarks/nag_eval.py says it counts (the apps' synth and the
tools' runs are `make bench`'s job; tests/nag/test_nag_evaluation.py checks idempotent_nag on the apps)."""

from __future__ import annotations

from benchmarks.nag_eval import Finding, score

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
