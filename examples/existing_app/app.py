#!/usr/bin/env python3
"""An app a team already has — a bucket for uploads, a REST API in front of a function, a parameter and a
secret — with an IdempotentPipeline added: the API's function publishes each order to the pipeline's topic,
and the pipeline stores each order line exactly once.

    idempotent-pipeline local deploy                      # on this machine (README "An app you already have")
    npx cdk deploy                                        # to the AWS account of your credentials
"""

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from idempotent_pipeline import ConsumerOptions, IdempotentPipeline, TableOptions

HERE = Path(__file__).resolve().parent


class Shopfront(cdk.Stack):
    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        # What the app had before the pipeline.
        uploads = s3.Bucket(
            self,
            "Uploads",
            enforce_ssl=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            auto_delete_objects=True,  # a custom resource: the local cloud names it, and does not run it
        )
        greeting = ssm.StringParameter(self, "Greeting", string_value="thank you for your order")
        api_key = secretsmanager.Secret(self, "PartnerApiKey")
        # The pipeline: one document per (order, line), however often SNS and SQS deliver it.
        pipeline = IdempotentPipeline(
            self,
            "Orders",
            table_options=TableOptions(partition_key_name="order_id", sort_key_name="line_id"),
            consumer_options=ConsumerOptions(partition_key_field="order_id", sort_key_field="line_id"),
        )
        handler = lambda_.Function(
            self,
            "Api",
            runtime=lambda_.Runtime.PYTHON_3_12,
            handler="handler.handle",
            code=lambda_.Code.from_asset(str(HERE / "api")),
            environment={
                "TOPIC_ARN": pipeline.topic.topic_arn,
                "BUCKET": uploads.bucket_name,
                "GREETING_PARAMETER": greeting.parameter_name,
                "API_KEY_SECRET": api_key.secret_arn,
            },
        )
        pipeline.grant_publish(handler)
        uploads.grant_read_write(handler)
        greeting.grant_read(handler)
        api_key.grant_read(handler)
        api = apigateway.LambdaRestApi(self, "ShopApi", handler=handler, proxy=False)
        api.root.add_resource("orders").add_method("POST")
        cdk.CfnOutput(self, "ApiUrl", value=api.url)
        cdk.CfnOutput(self, "TopicArn", value=pipeline.topic.topic_arn)
        cdk.CfnOutput(self, "TableName", value=pipeline.table.table_name)
        cdk.CfnOutput(self, "BucketName", value=uploads.bucket_name)


app = cdk.App()
Shopfront(app, "Shopfront")
app.synth()
