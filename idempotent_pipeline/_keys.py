"""Key policy statements AWS services need on customer-managed keys, and the warning for an imported key.

CDK adds a statement only to the policy of a key defined in the app (``kms.Key``); an imported key's policy
is out of its reach. Without the statement the service cannot use the key, and for SNS that means dropped
messages, so synth names the statement to add.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Aws, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import IConstruct

from idempotent_pipeline._rules import warn

# One warning id per key, so acknowledging one (say, the alarm topic's) never silences another (the queue's,
# without which SNS drops messages).
QUEUE_KEY_WARNING = "idempotent-pipeline:imported-key:queue"
TOPIC_KEY_WARNING = "idempotent-pipeline:imported-key:topic"
ALARM_TOPIC_KEY_WARNING = "idempotent-pipeline:imported-key:alarm-topic"


def is_imported(key: kms.IKey | None) -> bool:
    return key is not None and not isinstance(key, kms.Key)


def require_statement(
    scope: IConstruct, key: kms.IKey, *, warning_id: str, prop: str, statement: str, consequence: str
) -> None:
    """Warn that an imported key's policy must hold ``statement`` (nothing to do for a key of the app)."""
    if not is_imported(key):
        return
    warn(
        scope,
        warning_id,
        f"{prop} is an imported key ({key.key_arn}): CDK cannot change its key policy. The policy must "
        f"{statement}; without that {consequence}",
    )


SNS_TO_QUEUE_STATEMENT = (
    'allow {"Service": "sns.amazonaws.com"} the actions kms:GenerateDataKey and kms:Decrypt on "*", with '
    'the condition {"ArnEquals": {"aws:SourceArn": "<the topic ARN>"}}'
)
PRODUCERS_STATEMENT = (
    "let the producers use it (kms:GenerateDataKey*, kms:Decrypt): keep the account's IAM delegation "
    "statement so grant_publish works, and allow each AWS service that sends here by its service principal"
)


def allow_cloudwatch_alarms(scope: IConstruct, key: kms.IKey, prop: str) -> None:
    """CloudWatch encrypts alarm notifications for a KMS-encrypted topic with the topic's key."""
    actions = ("kms:Decrypt", "kms:GenerateDataKey*")
    if is_imported(key):
        require_statement(
            scope,
            key,
            warning_id=ALARM_TOPIC_KEY_WARNING,
            prop=prop,
            statement=(
                'allow {"Service": "cloudwatch.amazonaws.com"} the actions kms:Decrypt and '
                'kms:GenerateDataKey* on "*", with the condition {"StringEquals": {"aws:SourceAccount": '
                '"<this account>"}}'
            ),
            consequence="CloudWatch cannot notify the alarm topic, and alarms fire unseen",
        )
        return
    # aws:SourceAccount, not the alarms' ARNs: the alarms name the topic, the topic names the key.
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AllowCloudWatchAlarmsToNotifyTheEncryptedTopic",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=list(actions),
            resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
        )
    )


def grant_through(
    grantee: iam.IGrantable,
    key: kms.IKey | str,
    actions: Sequence[str],
    service: str,
    context: Mapping[str, str] | None = None,
) -> iam.Grant:
    """``actions`` on ``key`` (a key or its ARN), only as ``service`` (``sqs``, ``dynamodb``, ``states``)
    uses it on the grantee's behalf (``kms:ViaService``; with ``context``, only under that encryption
    context): the role cannot decrypt with the key directly."""
    conditions = {"kms:ViaService": f"{service}.{Aws.REGION}.{Aws.URL_SUFFIX}"}
    conditions.update({f"kms:EncryptionContext:{name}": value for name, value in (context or {}).items()})
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=list(actions),
        resource_arns=[key if isinstance(key, str) else key.key_arn],
        conditions={"StringEquals": conditions},
    )


def state_machine_key(state_machine: IConstruct) -> str | None:
    """The ARN of the customer managed key of a state machine this app defines (its
    ``encryption_configuration``), or None: an AWS owned key, an imported state machine, a key given by id."""
    config = getattr(state_machine.node.default_child, "encryption_configuration", None)
    arn = getattr(config, "kms_key_id", None)
    if getattr(config, "type", None) != "CUSTOMER_MANAGED_KMS_KEY" or not isinstance(arn, str):
        return None
    return arn if Token.is_unresolved(arn) or arn.startswith("arn:") else None
