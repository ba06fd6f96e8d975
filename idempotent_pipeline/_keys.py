"""Key policy statements AWS services need on customer-managed keys, and the warning for an imported key;
a block's function with its role and its log group, which may be under such a key.

CDK adds a statement only to the policy of a key defined in the app (``kms.Key``); an imported key's policy
is out of its reach. Without the statement the service cannot use the key, and for SNS that means dropped
messages, so synth names the statement to add.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from idempotent_pipeline._rules import warn

# One warning id per key, so acknowledging one (say, the alarm topic's) never silences another (the queue's,
# without which SNS drops messages).
QUEUE_KEY_WARNING = "idempotent-pipeline:imported-key:queue"
TOPIC_KEY_WARNING = "idempotent-pipeline:imported-key:topic"
ALARM_TOPIC_KEY_WARNING = "idempotent-pipeline:imported-key:alarm-topic"
LOG_GROUP_KEY_WARNING = "idempotent-pipeline:imported-key:log-group"


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


# Where a statement is written in words (an imported key's warning), and where in the template.
_IN_WORDS = {"partition": "<partition>", "region": "<region>", "account": "<this account>"}


@dataclass(frozen=True)
class ServiceUse:
    """What an AWS service needs in the policy of a customer managed key it encrypts with on our behalf, once:
    the statement, and in words for the warning on an imported key. ``service`` and ``condition`` take the
    partition, region and account (``{region}``)."""

    sid: str
    service: str
    actions: tuple[str, ...]
    condition: Callable[[Mapping[str, str]], dict[str, dict[str, str]]]
    consequence: str
    warning_id: str

    def in_words(self) -> str:
        actions = ", ".join(self.actions[:-1]) + " and " + self.actions[-1]
        service = self.service.format(**_IN_WORDS)
        condition = json.dumps(self.condition(_IN_WORDS))
        return (
            f'allow {{"Service": "{service}"}} the actions {actions} on "*", with the condition {condition}'
        )


# CloudWatch encrypts alarm notifications for a KMS-encrypted topic with the topic's key. aws:SourceAccount,
# not the alarms' ARNs: the alarms name the topic, the topic names the key.
CLOUDWATCH_ALARMS = ServiceUse(
    "AllowCloudWatchAlarmsToNotifyTheEncryptedTopic",
    "cloudwatch.amazonaws.com",
    ("kms:Decrypt", "kms:GenerateDataKey*"),
    lambda at: {"StringEquals": {"aws:SourceAccount": at["account"]}},
    "CloudWatch cannot notify the alarm topic, and alarms fire unseen",
    ALARM_TOPIC_KEY_WARNING,
)
# CloudWatch Logs encrypts a log group's events under the encryption context of the group's ARN ("Encrypt log
# data in CloudWatch Logs using AWS KMS"): any group of this account and region, since the group's own ARN
# would make the key and the group name each other.
LOG_GROUPS = "arn:{partition}:logs:{region}:{account}:log-group:*"
CLOUDWATCH_LOGS = ServiceUse(
    "AllowCloudWatchLogsToEncryptLogGroups",
    "logs.{region}.amazonaws.com",
    ("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"),
    lambda at: {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": LOG_GROUPS.format(**at)}},
    "CloudWatch Logs refuses the log group (creating it fails) and the function's logs are lost",
    LOG_GROUP_KEY_WARNING,
)


def allow(scope: IConstruct, key: kms.IKey, prop: str, use: ServiceUse) -> None:
    """``use``'s statement in the policy of a key of the app; for an imported key, a warning naming it."""
    if is_imported(key):
        require_statement(
            scope,
            key,
            warning_id=use.warning_id,
            prop=prop,
            statement=use.in_words(),
            consequence=use.consequence,
        )
        return
    here = {"partition": Aws.PARTITION, "region": Aws.REGION, "account": Aws.ACCOUNT_ID}
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid=use.sid,
            principals=[iam.ServicePrincipal(use.service.format(**here))],
            actions=list(use.actions),
            resources=["*"],
            conditions=use.condition(here),
        )
    )


def grant(
    grantee: iam.IGrantable,
    actions: Sequence[str],
    resource: str,
    key: kms.IKey | None = None,
    key_actions: Sequence[str] = (),
    service: str = "",
) -> iam.Grant:
    """``actions`` on ``resource`` and, when it has a customer managed ``key``, ``key_actions`` on the key
    through ``service`` (:func:`grant_through`)."""
    result = iam.Grant.add_to_principal(grantee=grantee, actions=list(actions), resource_arns=[resource])
    if key is not None:
        result = result.combine(grant_through(grantee, key, key_actions, service))
    return result


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


def function(
    scope: Construct, role: str, asset: str, retention: Any, key: kms.IKey | None, owner: str, **props: Any
) -> tuple[iam.Role, logs.LogGroup, lambda_.Function]:
    """A block's function (``Function``, of the code in ``asset``) with a role of its own (``Role``, which
    ``role`` describes) and a log group (``LogGroup``) the role writes to, under ``key`` when given
    (``<owner>.log_encryption_key``), whose policy gets the statement CloudWatch Logs needs."""
    principal = iam.ServicePrincipal("lambda.amazonaws.com")
    made_role = iam.Role(scope, "Role", assumed_by=principal, description=role)
    if key is not None:
        allow(scope, key, f"{owner}.log_encryption_key", CLOUDWATCH_LOGS)
    group = logs.LogGroup(scope, "LogGroup", retention=retention, encryption_key=key)
    code = lambda_.Code.from_asset(asset)
    made = lambda_.Function(scope, "Function", code=code, role=made_role, log_group=group, **props)
    group.grant_write(made_role)
    return made_role, group, made
