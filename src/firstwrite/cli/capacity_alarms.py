"""CloudWatch alarms for the idempotency table, as a CloudFormation template (``--alarms``).

:func:`template` returns the YAML text: alarms on DynamoDB's throttling metrics
(``ThrottledRequests`` per operation the layer calls, ``ReadThrottleEvents``,
``WriteThrottleEvents``), on consumed against provisioned capacity (metric math over
``Consumed*CapacityUnits`` and ``Provisioned*CapacityUnits``, when ``BillingMode`` is
PROVISIONED), on
``ReplicationLatency`` (for a global table, when a replica region is given), and on the layer's
own counters that mean something went wrong (docs/operating-on-aws.md, "What to alert on"),
read from the CloudWatch namespace the application publishes them to. Every alarm notifies the
``AlarmTopicArn`` parameter's SNS topic. Pure text, no I/O.
"""

from __future__ import annotations

__all__ = ["LAYER_ALARMS", "template"]

# The layer's counters worth waking someone for: (logical id, metric, what it means).
LAYER_ALARMS = (
    (
        "LostClaims",
        "firstwrite_lost_claims_total",
        "a worker finished after its lease was taken over",
    ),
    (
        "TtlDeleteBeforeRetry",
        "dynamo_ttl_delete_before_retry_total",
        "a retry came back after TTL removed its record",
    ),
    ("LateRetries", "firstwrite_late_retries_total", "a retry came back after its retention"),
    (
        "CrossRegionDuplicates",
        "dynamo_cross_region_duplicate_detected_total",
        "a key was served outside its home region",
    ),
)
# The data-plane operations the layer calls (ThrottledRequests has an Operation dimension).
OPERATIONS = ("PutItem", "UpdateItem", "GetItem", "TransactWriteItems")


def _alarm(logical_id: str, description: str, body: str) -> str:
    return (
        f"  {logical_id}:\n"
        "    Type: AWS::CloudWatch::Alarm\n"
        "    Properties:\n"
        f"      AlarmName: !Sub '${{TableName}}-{logical_id}'\n"
        f"      AlarmDescription: '{description}'\n"
        "      AlarmActions: [!Ref AlarmTopicArn]\n"
        "      TreatMissingData: notBreaching\n" + body
    )


def _metric(
    namespace: str, name: str, dimensions: str, statistic: str, threshold: float, period: int = 60
) -> str:
    return (
        f"      Namespace: {namespace}\n"
        f"      MetricName: {name}\n"
        + (f"      Dimensions: {dimensions}\n" if dimensions else "")
        + f"      Statistic: {statistic}\n"
        f"      Period: {period}\n"
        "      EvaluationPeriods: 5\n"
        "      DatapointsToAlarm: 3\n"
        f"      Threshold: {threshold:g}\n"
        "      ComparisonOperator: GreaterThanThreshold\n"
    )


def _conditional(alarm: str, condition: str) -> str:
    return alarm.replace("    Type:", f"    Condition: {condition}\n    Type:", 1)


def _utilization(side: str) -> str:
    return (
        "      EvaluationPeriods: 5\n"
        "      DatapointsToAlarm: 3\n"
        "      Threshold: !Ref UtilizationPercent\n"
        "      ComparisonOperator: GreaterThanThreshold\n"
        "      Metrics:\n"
        "        - Id: consumed\n"
        "          ReturnData: false\n"
        "          MetricStat:\n"
        "            Metric:\n"
        "              Namespace: AWS/DynamoDB\n"
        f"              MetricName: Consumed{side}CapacityUnits\n"
        "              Dimensions: [{Name: TableName, Value: !Ref TableName}]\n"
        "            Period: 60\n"
        "            Stat: Sum\n"
        "        - Id: provisioned\n"
        "          ReturnData: false\n"
        "          MetricStat:\n"
        "            Metric:\n"
        "              Namespace: AWS/DynamoDB\n"
        f"              MetricName: Provisioned{side}CapacityUnits\n"
        "              Dimensions: [{Name: TableName, Value: !Ref TableName}]\n"
        "            Period: 60\n"
        "            Stat: Average\n"
        "        - Id: utilization\n"
        "          Label: percent of provisioned\n"
        "          Expression: 100 * (consumed / 60) / provisioned\n"
        "          ReturnData: true\n"
    )


def template(
    table: str, *, billing_mode: str = "PAY_PER_REQUEST", utilization_percent: float = 80.0
) -> str:
    """The CloudFormation template (YAML) of the alarms for ``table``: its parameters default
    to ``table``, ``billing_mode`` and ``utilization_percent``."""
    table_dimension = "[{Name: TableName, Value: !Ref TableName}]"
    parts = [
        "AWSTemplateFormatVersion: '2010-09-09'\n"
        "Description: CloudWatch alarms for the firstwrite idempotency table "
        "(firstwrite capacity --alarms)\n"
        "Parameters:\n"
        "  TableName:\n"
        "    Type: String\n"
        f"    Default: {table}\n"
        "  AlarmTopicArn:\n"
        "    Type: String\n"
        "    Description: the SNS topic every alarm notifies\n"
        "  ReplicaRegion:\n"
        "    Type: String\n"
        "    Default: ''\n"
        "    Description: a replica region of the global table (empty for none)\n"
        "  ReplicationLatencyMs:\n"
        "    Type: Number\n"
        "    Default: 60000\n"
        "  BillingMode:\n"
        "    Type: String\n"
        f"    Default: {billing_mode}\n"
        "    AllowedValues: [PROVISIONED, PAY_PER_REQUEST]\n"
        "  UtilizationPercent:\n"
        "    Type: Number\n"
        f"    Default: {utilization_percent:g}\n"
        "    Description: consumed capacity above this share of provisioned alarms\n"
        "  LayerNamespace:\n"
        "    Type: String\n"
        "    Default: firstwrite\n"
        "    Description: the CloudWatch namespace the layer's metrics are published to\n"
        "Conditions:\n"
        "  HasReplica: !Not [!Equals [!Ref ReplicaRegion, '']]\n"
        "  IsProvisioned: !Equals [!Ref BillingMode, PROVISIONED]\n"
        "Resources:\n"
    ]
    for operation in OPERATIONS:
        parts.append(
            _alarm(
                f"ThrottledRequests{operation}",
                f"{operation} calls throttled (capacity or a hot partition)",
                _metric(
                    "AWS/DynamoDB",
                    "ThrottledRequests",
                    "[{Name: TableName, Value: !Ref TableName}, "
                    f"{{Name: Operation, Value: {operation}}}]",
                    "Sum",
                    0,
                ),
            )
        )
    for side in ("Read", "Write"):
        parts.append(
            _alarm(
                f"{side}ThrottleEvents",
                f"{side.lower()} requests throttled",
                _metric("AWS/DynamoDB", f"{side}ThrottleEvents", table_dimension, "Sum", 0),
            )
        )
    for side in ("Write", "Read"):
        alarm = _alarm(
            f"Consumed{side}Capacity",
            f"consumed {side.lower()} capacity above UtilizationPercent of provisioned",
            _utilization(side),
        )
        parts.append(_conditional(alarm, "IsProvisioned"))
    replication = _alarm(
        "ReplicationLatency",
        "the replica lags behind (global table)",
        "      Namespace: AWS/DynamoDB\n"
        "      MetricName: ReplicationLatency\n"
        "      Dimensions: [{Name: TableName, Value: !Ref TableName}, "
        "{Name: ReceivingRegion, Value: !Ref ReplicaRegion}]\n"
        "      Statistic: Average\n"
        "      Period: 60\n"
        "      EvaluationPeriods: 5\n"
        "      DatapointsToAlarm: 3\n"
        "      Threshold: !Ref ReplicationLatencyMs\n"
        "      ComparisonOperator: GreaterThanThreshold\n",
    )
    parts.append(_conditional(replication, "HasReplica"))
    for logical_id, metric, meaning in LAYER_ALARMS:
        parts.append(
            _alarm(
                logical_id,
                meaning,
                _metric("!Ref LayerNamespace", metric, "", "Sum", 0),
            )
        )
    return "".join(parts)
