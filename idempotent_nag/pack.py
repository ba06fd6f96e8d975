"""IdempotentPipelineChecks: the library's rules as a cdk-nag pack, attached to an app through Validations."""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import CfnResource, IPolicyValidationContext, PolicyValidationPluginReport, Stack
from cdk_nag import IApplyRule, NagMessageLevel, NagPack, NagRuleCompliance
from constructs import IConstruct

from idempotent_nag.rules import NagRule, findings
from idempotent_nag.templates import Templates

PACK_NAME = "IdempotentPipeline"


class IdempotentPipelineChecks(NagPack):
    """The checks idempotent-pipeline applies to its own constructs, for any app with SNS, SQS and Lambda.

    ``Validations.of(app).add_plugins(IdempotentPipelineChecks(app))``: after the templates are written,
    every finding is reported with its rule id (``IdempotentPipeline-<rule>``, see :data:`.RULES`), its
    level and the resource's construct path. A finding of level error (a configuration that loses messages
    or processes them twice) fails the synth; one of level warning (stalled or delayed messages, a failure
    left unseen, ...) is reported and the synth goes on. Acknowledge one where you have weighed it:
    ``Validations.of(construct).acknowledge(Acknowledgment(id="IdempotentPipeline-<rule>", reason=...))``.

    :param scope: the app (needed only with ``write_suppressions_to_cloud_formation``).
    :param verbose: add each rule's explanation to its finding. Default: False.
    :param write_suppressions_to_cloud_formation: write acknowledgements into the resources' metadata.
        Default: False.
    """

    def __init__(
        self,
        scope: IConstruct | None = None,
        *,
        verbose: bool | None = None,
        write_suppressions_to_cloud_formation: bool | None = None,
    ) -> None:
        write_suppressions = write_suppressions_to_cloud_formation
        super().__init__(scope, verbose=verbose, write_suppressions_to_cloud_formation=write_suppressions)
        self._pack_name = PACK_NAME
        self._findings: dict[tuple[str, str], list[NagRule[Any]]] | None = None

    @property
    def name(self) -> str:
        return PACK_NAME

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        """Read the app's templates and find what breaks the rules, then report it resource by resource."""
        app = context.app_construct
        templates = Templates.read(
            (s.stack_construct_path, _stack_name(app, s.stack_construct_path), s.template_path)
            for s in context.stack_templates
        )
        self._findings = findings(templates)
        report = super().validate(context)
        # NagPack fails the synth on any finding: only an error fails it here, a warning is reported.
        errors = [v for v in report.violations if v.severity == "error"]
        return PolicyValidationPluginReport(success=not errors, violations=report.violations)

    def _check_resource(self, node: CfnResource) -> None:
        if self._findings is None:
            raise RuntimeError(
                f"{PACK_NAME} reads the synthesized templates: attach it with "
                "Validations.of(app).add_plugins(IdempotentPipelineChecks(app)) and synthesize the app"
            )
        if not self._findings:
            return
        stack = Stack.of(node)
        for rule in self._findings.get((stack.node.path, stack.resolve(node.logical_id)), ()):
            # jsii reads the properties of _Finding; IApplyRule declares them settable, which it never needs.
            self._apply_rule(_Finding(rule, node))  # type: ignore[arg-type]


def _stack_name(app: IConstruct, path: str) -> str:
    """The name of the stack at construct path ``path`` (what another stack's Fn::GetStackOutput names)."""
    node = app
    for part in path.split("/"):
        node = node.node.find_child(part)
    return Stack.of(node).stack_name


@jsii.implements(IApplyRule)
class _Finding:
    """A rule broken by ``node``, in the shape NagPack.applyRule reports."""

    def __init__(self, rule: NagRule[Any], node: CfnResource) -> None:
        self._rule, self._node = rule, node

    @property
    def rule_suffix_override(self) -> str:
        return self._rule.id

    @property
    def info(self) -> str:
        return self._rule.info

    @property
    def explanation(self) -> str:
        return f"{self._rule.explanation} It {self._rule.harm.value[0]}. AWS: {' '.join(self._rule.sources)}"

    @property
    def level(self) -> NagMessageLevel:
        return self._rule.level

    @property
    def node(self) -> CfnResource:
        return self._node

    def rule(self, node: CfnResource) -> NagRuleCompliance:
        return NagRuleCompliance.NON_COMPLIANT
