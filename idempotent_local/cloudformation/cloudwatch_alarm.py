"""``AWS::CloudWatch::Alarm``: moto 5.2.5 skips the type."""

from __future__ import annotations

from typing import Any

from moto.core.common_models import CloudFormationModel

from idempotent_local.cloudformation._common import Declared, StackResource, as_bool, properties


def _delete_alarm(props: dict[str, Any], name: str, account_id: str, region_name: str) -> None:
    from moto.cloudwatch.models import cloudwatch_backends

    cloudwatch_backends[account_id][region_name].delete_alarms([name])


class _AlarmResource(StackResource):
    def __init__(self, name: str, arn: str, properties: dict[str, Any]) -> None:
        super().__init__(name, properties, _delete_alarm)
        self.arn = arn

    def get_cfn_attribute(self, attribute_name: str) -> str:
        if attribute_name == "Arn":
            return self.arn
        return super().get_cfn_attribute(attribute_name)


class CloudWatchAlarm(Declared, CloudFormationModel):
    """``AWS::CloudWatch::Alarm`` on a single metric, through moto's ``put_metric_alarm``."""

    TYPE, NAME = "AWS::CloudWatch::Alarm", "AlarmName"
    GET_ATT = {"Arn": "arn"}  # exactly AWS's (answered by the stack's _AlarmResource)

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> _AlarmResource:
        from moto.cloudwatch.models import cloudwatch_backends

        props = properties(cloudformation_json)
        name = props.get("AlarmName", resource_name)
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=name,
            namespace=props.get("Namespace", ""),
            metric_name=props.get("MetricName", ""),
            comparison_operator=props["ComparisonOperator"],
            evaluation_periods=int(props["EvaluationPeriods"]),
            period=int(props.get("Period", 60)),
            threshold=float(props.get("Threshold", 0)),
            statistic=props.get("Statistic", ""),
            description=props.get("AlarmDescription", ""),
            dimensions=[{"Name": d["Name"], "Value": d["Value"]} for d in props.get("Dimensions", [])],
            alarm_actions=props.get("AlarmActions", []),
            datapoints_to_alarm=int(props["DatapointsToAlarm"]) if "DatapointsToAlarm" in props else None,
            extended_statistic=props.get("ExtendedStatistic"),
            ok_actions=props.get("OKActions", []),
            insufficient_data_actions=props.get("InsufficientDataActions", []),
            unit=props.get("Unit"),
            actions_enabled=as_bool(props.get("ActionsEnabled", True)),
            treat_missing_data=props.get("TreatMissingData"),
            evaluate_low_sample_count_percentile=props.get("EvaluateLowSampleCountPercentile"),
            threshold_metric_id=props.get("ThresholdMetricId"),
        )
        return _AlarmResource(name, alarm.alarm_arn, props)

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: _AlarmResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> _AlarmResource:
        """In place: the alarm is put again under its name (a new AlarmName replaces it: see ``_updates``)."""
        return cls.create_from_cloudformation_json(
            original_resource.physical_id, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        from moto.cloudwatch.models import cloudwatch_backends

        cloudwatch_backends[account_id][region_name].delete_alarms([resource_name])
