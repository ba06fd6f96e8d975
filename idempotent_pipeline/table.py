"""IdempotencyTable: the DynamoDB table whose composite key makes a write happen once."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct
from idempotent_runtime import contract
from idempotent_runtime.contract import ConfigurationError

from idempotent_pipeline._rules import Rule, boolean, enforce, instance, options_of, text
from idempotent_pipeline.options import TableOptions

TABLE_REMOVAL_POLICIES = (
    RemovalPolicy.RETAIN,
    RemovalPolicy.DESTROY,
    RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
)
_NAMES = ("partition_key_name", "sort_key_name", "time_to_live_attribute")


def _blank(name: object) -> bool:
    return not str(name).strip()


RULES = (
    *(
        Rule((prop,), _blank, f"TableOptions.{prop} must be a non-empty attribute name; got {{{prop}!r}}")
        for prop in _NAMES
    ),
    *(
        Rule(
            (prop,),
            lambda name: str(name).startswith(contract.ATTRIBUTE_PREFIX),
            f"TableOptions.{prop} must not begin with {contract.ATTRIBUTE_PREFIX!r} (the runtime's own "
            f"attributes); got {{{prop}!r}}",
        )
        for prop in _NAMES
    ),
    Rule(
        ("partition_key_name", "sort_key_name"),
        lambda partition, sort: partition == sort,
        "TableOptions.partition_key_name and sort_key_name must differ; both are {partition_key_name!r}",
    ),
    Rule(
        ("time_to_live_attribute", "partition_key_name", "sort_key_name"),
        lambda ttl, partition, sort: ttl in (partition, sort),
        "TableOptions.time_to_live_attribute must differ from the key attributes; got "
        "{time_to_live_attribute!r} (keys {partition_key_name!r}, {sort_key_name!r})",
    ),
    Rule(
        ("removal_policy",),
        lambda policy: policy not in TABLE_REMOVAL_POLICIES,
        "TableOptions.removal_policy must be RETAIN, DESTROY or RETAIN_ON_UPDATE_OR_DELETE (DynamoDB "
        "tables do "
        "not support SNAPSHOT); got {removal_policy}",
    ),
)


class IdempotencyTable(Construct):
    """A DynamoDB table with a string partition key, a string sort key and a TTL attribute; on-demand billing,
    point-in-time recovery, encryption at rest, RETAIN by default.

    The consumer takes this construct, so the key names travel with the table. For a table that exists
    already use :meth:`from_table`.

    Attributes: ``table`` (``dynamodb.ITable``), ``partition_key_name``, ``sort_key_name``,
    ``time_to_live_attribute``, ``encryption_key`` (``kms.IKey`` or None).

    :param options: :class:`TableOptions`. Default: ``TableOptions()``.
    """

    def __init__(self, scope: Construct, id: str, *, options: TableOptions | None = None) -> None:
        super().__init__(scope, id)
        options = options_of("options", options, TableOptions)
        key = instance("TableOptions.encryption_key", options.encryption_key, kms.IKey, "a kms.IKey")
        recovery = boolean("TableOptions.point_in_time_recovery", options.point_in_time_recovery)
        protection = boolean("TableOptions.deletion_protection", options.deletion_protection)
        _check_names(self, options, removal_policy=options.removal_policy)
        self.partition_key_name: str = options.partition_key_name
        self.sort_key_name: str = options.sort_key_name
        self.time_to_live_attribute: str = options.time_to_live_attribute
        self.encryption_key: kms.IKey | None = key
        # AWS::DynamoDB::Table (dynamodb.Table), not TableV2's AWS::DynamoDB::GlobalTable: the same table for
        # one region, and a type local CloudFormation emulators can create.
        self.table: dynamodb.ITable = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(
                name=options.partition_key_name, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=options.sort_key_name, type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=options.time_to_live_attribute,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=bool(recovery)
            ),
            encryption=(
                dynamodb.TableEncryption.CUSTOMER_MANAGED
                if key is not None
                else dynamodb.TableEncryption.DEFAULT
            ),
            encryption_key=key,
            removal_policy=options.removal_policy,
            deletion_protection=bool(protection),
        )

    @classmethod
    def from_table(
        cls,
        scope: Construct,
        id: str,
        table: dynamodb.ITable,
        *,
        partition_key_name: str = contract.DEFAULT_PARTITION_KEY,
        sort_key_name: str = contract.DEFAULT_SORT_KEY,
        time_to_live_attribute: str = contract.DEFAULT_TTL_ATTRIBUTE,
    ) -> IdempotencyTable:
        """An existing table (string partition and sort key) with its key and TTL attribute names.

        Import it with its key when it has a customer-managed one, e.g.
        ``dynamodb.Table.from_table_attributes(scope, "Orders", table_name="orders", encryption_key=key)``, so
        the consumer is granted the key. A table defined in the app is checked against the names.
        """
        return _ExistingIdempotencyTable(
            scope,
            id,
            instance("table", table, dynamodb.ITable, "a dynamodb.ITable"),
            TableOptions(
                partition_key_name=partition_key_name,
                sort_key_name=sort_key_name,
                time_to_live_attribute=time_to_live_attribute,
            ),
        )


class _ExistingIdempotencyTable(IdempotencyTable):
    """:meth:`IdempotencyTable.from_table`: the names and key of a table defined elsewhere."""

    def __init__(self, scope: Construct, id: str, table: dynamodb.ITable, options: TableOptions) -> None:
        Construct.__init__(self, scope, id)
        _check_names(self, options, removal_policy=RemovalPolicy.RETAIN)
        if isinstance(table, dynamodb.Table):
            _check_schema(table, options)
        self.partition_key_name = options.partition_key_name
        self.sort_key_name = options.sort_key_name
        self.time_to_live_attribute = options.time_to_live_attribute
        self.encryption_key = table.encryption_key
        self.table = table


def _check_names(scope: Construct, options: TableOptions, *, removal_policy: RemovalPolicy) -> None:
    values = {prop: text(f"TableOptions.{prop}", getattr(options, prop)) for prop in _NAMES}
    values["removal_policy"] = removal_policy
    enforce(scope, RULES, values)


def _check_schema(table: dynamodb.Table, options: TableOptions) -> None:
    """For a table defined in this app, the names the runtime is told must be the table's keys."""
    schema = table.schema_v2()
    wanted = (
        ("partition_key_name", options.partition_key_name, list(schema.partition_keys)),
        ("sort_key_name", options.sort_key_name, list(schema.sort_keys)),
    )
    for prop, name, attributes in wanted:
        if len(attributes) != 1:
            raise ConfigurationError(
                f"table must have one string partition key and one string sort key; {table.node.path} has "
                f"{len(attributes)} {prop.removesuffix('_name').replace('_', ' ')} attribute(s)"
            )
        attribute = attributes[0]
        if attribute.name != name:
            raise ConfigurationError(
                f"{prop} must match the table's key attribute {attribute.name!r}; got {name!r}"
            )
        if attribute.type != dynamodb.AttributeType.STRING:
            raise ConfigurationError(
                f"table key {attribute.name!r} must be of type string; got {attribute.type.name}"
            )
