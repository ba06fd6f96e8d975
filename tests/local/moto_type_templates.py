"""A small template per CloudFormation type the emulator creates, each with what the type needs beside it:
the resource under test is ``Subject``. ``AWS::Lambda::LayerVersion`` reads its content from the bucket
``layers`` (key ``layer.zip``), which the test creates first."""

from __future__ import annotations

import json
from typing import Any

ROLE = {
    "Type": "AWS::IAM::Role",
    "Properties": {
        "AssumeRolePolicyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "lambda.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
    },
}
VPC = {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}
SUBNET = {
    "Type": "AWS::EC2::Subnet",
    "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.0.0/24", "AvailabilityZone": "us-east-1a"},
}
SUBNET2 = {
    "Type": "AWS::EC2::Subnet",
    "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.1.0/24", "AvailabilityZone": "us-east-1b"},
}
SG = {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": "d", "VpcId": {"Ref": "Vpc"}}}
AMI = "ami-12c6146b"
INSTANCE = {
    "Type": "AWS::EC2::Instance",
    "Properties": {"ImageId": AMI, "InstanceType": "t3.micro", "SubnetId": {"Ref": "Subnet"}},
}


def function(**properties: Any) -> dict[str, Any]:
    """A function (its role: the resource ``Role``) whose inline code answers its event."""
    code = {"ZipFile": "def handler(e, c):\n    return e\n"}
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Handler": "index.handler",
            "Runtime": "python3.12",
            "Role": {"Fn::GetAtt": ["Role", "Arn"]},
            "Code": code,
            **properties,
        },
    }


def subscription(topic: str, queue: str, **properties: Any) -> dict[str, Any]:
    """An SQS subscription of the template's ``queue`` to its ``topic``."""
    endpoint = {"Fn::GetAtt": [queue, "Arn"]}
    return {
        "Type": "AWS::SNS::Subscription",
        "Properties": {"Protocol": "sqs", "TopicArn": {"Ref": topic}, "Endpoint": endpoint, **properties},
    }


def deny_without_tls(action: str, resource: Any, principal: Any) -> dict[str, Any]:
    """A policy document that denies ``action`` on ``resource`` to requests without TLS (enforce_ssl's)."""
    statement = {"Effect": "Deny", "Principal": principal, "Action": action, "Resource": resource}
    return {
        "Version": "2012-10-17",
        "Statement": [{**statement, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}],
    }


FUNCTION = function()
REST_API = {"Type": "AWS::ApiGateway::RestApi", "Properties": {"Name": "api"}}
API_METHOD = {
    "Type": "AWS::ApiGateway::Method",
    "Properties": {
        "RestApiId": {"Ref": "Api"},
        "ResourceId": {"Fn::GetAtt": ["Api", "RootResourceId"]},
        "HttpMethod": "GET",
        "AuthorizationType": "NONE",
        "Integration": {"Type": "MOCK"},
    },
}
LAUNCH_CONFIG = {
    "Type": "AWS::AutoScaling::LaunchConfiguration",
    "Properties": {"ImageId": AMI, "InstanceType": "t3.micro"},
}
ASG = {
    "Type": "AWS::AutoScaling::AutoScalingGroup",
    "Properties": {
        "MinSize": "0",
        "MaxSize": "1",
        "LaunchConfigurationName": {"Ref": "LaunchConfig"},
        "AvailabilityZones": ["us-east-1a"],
    },
}
COMPUTE_ENV = {
    "Type": "AWS::Batch::ComputeEnvironment",
    "Properties": {"Type": "UNMANAGED", "ServiceRole": {"Fn::GetAtt": ["Role", "Arn"]}},
}
JOB_QUEUE = {
    "Type": "AWS::Batch::JobQueue",
    "Properties": {
        "Priority": 1,
        "ComputeEnvironmentOrder": [{"Order": 1, "ComputeEnvironment": {"Ref": "ComputeEnv"}}],
    },
}
LB2 = {
    "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
    "Properties": {"Subnets": [{"Ref": "Subnet"}, {"Ref": "Subnet2"}], "SecurityGroups": [{"Ref": "Sg"}]},
}
TG = {
    "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
    "Properties": {"Port": 80, "Protocol": "HTTP", "VpcId": {"Ref": "Vpc"}, "TargetType": "instance"},
}
LISTENER = {
    "Type": "AWS::ElasticLoadBalancingV2::Listener",
    "Properties": {
        "LoadBalancerArn": {"Ref": "Lb"},
        "Port": 80,
        "Protocol": "HTTP",
        "DefaultActions": [{"Type": "forward", "TargetGroupArn": {"Ref": "Tg"}}],
    },
}
IGW = {"Type": "AWS::EC2::InternetGateway", "Properties": {}}
ROUTE_TABLE = {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": {"Ref": "Vpc"}}}
ECS_CLUSTER = {"Type": "AWS::ECS::Cluster", "Properties": {}}
TASK_DEF = {
    "Type": "AWS::ECS::TaskDefinition",
    "Properties": {"ContainerDefinitions": [{"Name": "web", "Image": "nginx", "Memory": 128}]},
}
EFS = {"Type": "AWS::EFS::FileSystem", "Properties": {}}
ZONE = {"Type": "AWS::Route53::HostedZone", "Properties": {"Name": "example.com"}}
EMR_CLUSTER = {
    "Type": "AWS::EMR::Cluster",
    "Properties": {
        "Name": "c",
        "JobFlowRole": "EMR_EC2_DefaultRole",
        "ServiceRole": "EMR_DefaultRole",
        "ReleaseLabel": "emr-6.10.0",
        "Instances": {"MasterInstanceGroup": {"InstanceCount": 1, "InstanceType": "m5.xlarge"}},
    },
}
SM_MODEL = {
    "Type": "AWS::SageMaker::Model",
    "Properties": {
        "ExecutionRoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
        "PrimaryContainer": {"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/img:latest"},
    },
}
SM_ENDPOINT_CONFIG = {
    "Type": "AWS::SageMaker::EndpointConfig",
    "Properties": {
        "ProductionVariants": [
            {
                "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                "VariantName": "v",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.t2.medium",
                "InitialVariantWeight": 1,
            }
        ]
    },
}
REDSHIFT_SUBNETS = {
    "Type": "AWS::Redshift::ClusterSubnetGroup",
    "Properties": {"Description": "d", "SubnetIds": [{"Ref": "Subnet"}]},
}
RDS_SUBNETS = {
    "Type": "AWS::RDS::DBSubnetGroup",
    "Properties": {"DBSubnetGroupDescription": "d", "SubnetIds": [{"Ref": "Subnet"}, {"Ref": "Subnet2"}]},
}
VOLUME = {"Type": "AWS::EC2::Volume", "Properties": {"AvailabilityZone": "us-east-1a", "Size": 10}}
TGW = {"Type": "AWS::EC2::TransitGateway", "Properties": {}}
VPN_GW = {"Type": "AWS::EC2::VPNGateway", "Properties": {"Type": "ipsec.1"}}
THING_TYPE = {"Type": "AWS::IoT::ThingType", "Properties": {"ThingTypeName": "tt"}}
KEY = {
    "Type": "AWS::KMS::Key",
    "Properties": {
        "KeyPolicy": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": "arn:aws:iam::000000000000:root"},
                    "Action": "kms:*",
                    "Resource": "*",
                }
            ],
        }
    },
}
USER = {"Type": "AWS::IAM::User", "Properties": {}}
STATE_MACHINE = {
    "Type": "AWS::StepFunctions::StateMachine",
    "Properties": {
        "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
        "DefinitionString": '{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}',
    },
}
DB_INSTANCE = {
    "Type": "AWS::RDS::DBInstance",
    "Properties": {
        "Engine": "postgres",
        "DBInstanceClass": "db.t3.micro",
        "AllocatedStorage": "20",
        "MasterUsername": "admin1",
        "MasterUserPassword": "password123",
    },
}
NOTEBOOK = {
    "Type": "AWS::SageMaker::NotebookInstance",
    "Properties": {"InstanceType": "ml.t2.medium", "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]}},
}

LOGS_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "es.amazonaws.com"},
                "Action": "logs:PutLogEvents",
                "Resource": "*",
            }
        ],
    }
)

TEMPLATES: dict[str, dict[str, Any]] = {
    "AWS::ApiGateway::RestApi": {"Subject": REST_API},
    "AWS::ApiGateway::Resource": {
        "Api": REST_API,
        "Subject": {
            "Type": "AWS::ApiGateway::Resource",
            "Properties": {
                "RestApiId": {"Ref": "Api"},
                "ParentId": {"Fn::GetAtt": ["Api", "RootResourceId"]},
                "PathPart": "orders",
            },
        },
    },
    "AWS::ApiGateway::Method": {"Api": REST_API, "Subject": API_METHOD},
    "AWS::ApiGateway::Deployment": {
        "Api": REST_API,
        "Method": API_METHOD,
        "Subject": {
            "Type": "AWS::ApiGateway::Deployment",
            "DependsOn": "Method",
            "Properties": {"RestApiId": {"Ref": "Api"}, "StageName": "prod"},
        },
    },
    "AWS::AutoScaling::LaunchConfiguration": {"Subject": LAUNCH_CONFIG},
    "AWS::AutoScaling::AutoScalingGroup": {"LaunchConfig": LAUNCH_CONFIG, "Subject": ASG},
    "AWS::AutoScaling::ScheduledAction": {
        "LaunchConfig": LAUNCH_CONFIG,
        "Group": ASG,
        "Subject": {
            "Type": "AWS::AutoScaling::ScheduledAction",
            "Properties": {
                "AutoScalingGroupName": {"Ref": "Group"},
                "DesiredCapacity": 1,
                "Recurrence": "0 * * * *",
            },
        },
    },
    "AWS::Batch::ComputeEnvironment": {"Role": ROLE, "Subject": COMPUTE_ENV},
    "AWS::Batch::JobQueue": {"Role": ROLE, "ComputeEnv": COMPUTE_ENV, "Subject": JOB_QUEUE},
    "AWS::Batch::JobDefinition": {
        "Subject": {
            "Type": "AWS::Batch::JobDefinition",
            "Properties": {
                "Type": "container",
                "ContainerProperties": {"Image": "busybox", "Vcpus": 1, "Memory": 128},
            },
        }
    },
    "AWS::CDK::Metadata": {
        "Subject": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:deflate64:x"}}
    },
    # A nested stack: its template is read from the emulator's S3 (the test puts it there).
    "AWS::CloudFormation::Stack": {
        "Subject": {
            "Type": "AWS::CloudFormation::Stack",
            "Properties": {"TemplateURL": "NESTED_TEMPLATE_URL", "Parameters": {}},
        }
    },
    "AWS::CloudWatch::Alarm": {
        "Subject": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "ComparisonOperator": "GreaterThanThreshold",
                "EvaluationPeriods": 1,
                "MetricName": "Errors",
                "Namespace": "AWS/Lambda",
                "Period": 60,
                "Statistic": "Sum",
                "Threshold": 1,
            },
        }
    },
    "AWS::CloudWatch::Dashboard": {
        "Subject": {"Type": "AWS::CloudWatch::Dashboard", "Properties": {"DashboardBody": '{"widgets":[]}'}}
    },
    "AWS::DataPipeline::Pipeline": {
        "Subject": {
            "Type": "AWS::DataPipeline::Pipeline",
            "Properties": {
                "Name": "p",
                "PipelineObjects": [
                    {
                        "Id": "Default",
                        "Name": "Default",
                        "Fields": [{"Key": "workerGroup", "StringValue": "w"}],
                    }
                ],
            },
        }
    },
    "AWS::DynamoDB::Table": {
        "Subject": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        }
    },
    "AWS::EC2::VPC": {"Subject": VPC},
    "AWS::EC2::Subnet": {"Vpc": VPC, "Subject": SUBNET},
    "AWS::EC2::SecurityGroup": {"Vpc": VPC, "Subject": SG},
    "AWS::EC2::SecurityGroupIngress": {
        "Vpc": VPC,
        "Sg": SG,
        "Subject": {
            "Type": "AWS::EC2::SecurityGroupIngress",
            "Properties": {
                "GroupId": {"Fn::GetAtt": ["Sg", "GroupId"]},
                "IpProtocol": "tcp",
                "FromPort": 443,
                "ToPort": 443,
                "CidrIp": "0.0.0.0/0",
            },
        },
    },
    "AWS::EC2::InternetGateway": {"Subject": IGW},
    "AWS::EC2::VPCGatewayAttachment": {
        "Vpc": VPC,
        "Igw": IGW,
        "Subject": {
            "Type": "AWS::EC2::VPCGatewayAttachment",
            "Properties": {"VpcId": {"Ref": "Vpc"}, "InternetGatewayId": {"Ref": "Igw"}},
        },
    },
    "AWS::EC2::RouteTable": {"Vpc": VPC, "Subject": ROUTE_TABLE},
    "AWS::EC2::Route": {
        "Vpc": VPC,
        "Igw": IGW,
        "Rt": ROUTE_TABLE,
        "Subject": {
            "Type": "AWS::EC2::Route",
            "Properties": {
                "RouteTableId": {"Ref": "Rt"},
                "DestinationCidrBlock": "0.0.0.0/0",
                "GatewayId": {"Ref": "Igw"},
            },
        },
    },
    "AWS::EC2::SubnetRouteTableAssociation": {
        "Vpc": VPC,
        "Subnet": SUBNET,
        "Rt": ROUTE_TABLE,
        "Subject": {
            "Type": "AWS::EC2::SubnetRouteTableAssociation",
            "Properties": {"SubnetId": {"Ref": "Subnet"}, "RouteTableId": {"Ref": "Rt"}},
        },
    },
    "AWS::EC2::EIP": {"Subject": {"Type": "AWS::EC2::EIP", "Properties": {"Domain": "vpc"}}},
    "AWS::EC2::NatGateway": {
        "Vpc": VPC,
        "Subnet": SUBNET,
        "Eip": {"Type": "AWS::EC2::EIP", "Properties": {"Domain": "vpc"}},
        "Subject": {
            "Type": "AWS::EC2::NatGateway",
            "Properties": {
                "SubnetId": {"Ref": "Subnet"},
                "AllocationId": {"Fn::GetAtt": ["Eip", "AllocationId"]},
            },
        },
    },
    "AWS::EC2::NetworkInterface": {
        "Vpc": VPC,
        "Subnet": SUBNET,
        "Subject": {"Type": "AWS::EC2::NetworkInterface", "Properties": {"SubnetId": {"Ref": "Subnet"}}},
    },
    "AWS::EC2::Instance": {"Vpc": VPC, "Subnet": SUBNET, "Subject": INSTANCE},
    "AWS::EC2::LaunchTemplate": {
        "Subject": {
            "Type": "AWS::EC2::LaunchTemplate",
            "Properties": {"LaunchTemplateData": {"ImageId": AMI, "InstanceType": "t3.micro"}},
        }
    },
    "AWS::EC2::Volume": {"Subject": VOLUME},
    "AWS::EC2::VolumeAttachment": {
        "Vpc": VPC,
        "Subnet": SUBNET,
        "Instance": INSTANCE,
        "Volume": VOLUME,
        "Subject": {
            "Type": "AWS::EC2::VolumeAttachment",
            "Properties": {
                "InstanceId": {"Ref": "Instance"},
                "VolumeId": {"Ref": "Volume"},
                "Device": "/dev/sdh",
            },
        },
    },
    "AWS::EC2::FlowLog": {
        "Vpc": VPC,
        "Role": ROLE,
        "Subject": {
            "Type": "AWS::EC2::FlowLog",
            "Properties": {
                "ResourceId": {"Ref": "Vpc"},
                "ResourceType": "VPC",
                "TrafficType": "ALL",
                "LogGroupName": "flow",
                "DeliverLogsPermissionArn": {"Fn::GetAtt": ["Role", "Arn"]},
            },
        },
    },
    "AWS::EC2::SpotFleet": {
        "Role": ROLE,
        "Subject": {
            "Type": "AWS::EC2::SpotFleet",
            "Properties": {
                "SpotFleetRequestConfigData": {
                    "IamFleetRole": {"Fn::GetAtt": ["Role", "Arn"]},
                    "TargetCapacity": 1,
                    "LaunchSpecifications": [{"ImageId": AMI, "InstanceType": "t3.micro"}],
                }
            },
        },
    },
    "AWS::EC2::TransitGateway": {"Subject": TGW},
    "AWS::EC2::VPCEndpoint": {
        "Vpc": VPC,
        "Subject": {
            "Type": "AWS::EC2::VPCEndpoint",
            "Properties": {"VpcId": {"Ref": "Vpc"}, "ServiceName": "com.amazonaws.us-east-1.s3"},
        },
    },
    "AWS::EC2::VPCPeeringConnection": {
        "Vpc": VPC,
        "Peer": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.1.0.0/16"}},
        "Subject": {
            "Type": "AWS::EC2::VPCPeeringConnection",
            "Properties": {"VpcId": {"Ref": "Vpc"}, "PeerVpcId": {"Ref": "Peer"}},
        },
    },
    "AWS::EC2::VPNGateway": {"Subject": VPN_GW},
    "AWS::ECR::Repository": {"Subject": {"Type": "AWS::ECR::Repository", "Properties": {}}},
    "AWS::ECS::Cluster": {"Subject": ECS_CLUSTER},
    "AWS::ECS::TaskDefinition": {"Subject": TASK_DEF},
    "AWS::ECS::Service": {
        "Cluster": ECS_CLUSTER,
        "TaskDef": TASK_DEF,
        "Subject": {
            "Type": "AWS::ECS::Service",
            "Properties": {
                "Cluster": {"Ref": "Cluster"},
                "TaskDefinition": {"Ref": "TaskDef"},
                "DesiredCount": 0,
            },
        },
    },
    "AWS::EFS::FileSystem": {"Subject": EFS},
    "AWS::EFS::AccessPoint": {
        "Fs": EFS,
        "Subject": {"Type": "AWS::EFS::AccessPoint", "Properties": {"FileSystemId": {"Ref": "Fs"}}},
    },
    "AWS::EFS::MountTarget": {
        "Vpc": VPC,
        "Subnet": SUBNET,
        "Sg": SG,
        "Fs": EFS,
        "Subject": {
            "Type": "AWS::EFS::MountTarget",
            "Properties": {
                "FileSystemId": {"Ref": "Fs"},
                "SubnetId": {"Ref": "Subnet"},
                "SecurityGroups": [{"Ref": "Sg"}],
            },
        },
    },
    "AWS::EMR::Cluster": {"Subject": EMR_CLUSTER},
    "AWS::EMR::InstanceGroupConfig": {
        "Cluster": EMR_CLUSTER,
        "Subject": {
            "Type": "AWS::EMR::InstanceGroupConfig",
            "Properties": {
                "JobFlowId": {"Ref": "Cluster"},
                "InstanceCount": 1,
                "InstanceRole": "TASK",
                "InstanceType": "m5.xlarge",
            },
        },
    },
    "AWS::EMR::SecurityConfiguration": {
        "Subject": {
            "Type": "AWS::EMR::SecurityConfiguration",
            "Properties": {
                "SecurityConfiguration": {
                    "EncryptionConfiguration": {
                        "EnableInTransitEncryption": False,
                        "EnableAtRestEncryption": False,
                    }
                }
            },
        }
    },
    "AWS::ElasticLoadBalancing::LoadBalancer": {
        "Subject": {
            "Type": "AWS::ElasticLoadBalancing::LoadBalancer",
            "Properties": {
                "AvailabilityZones": ["us-east-1a"],
                "Listeners": [{"LoadBalancerPort": "80", "InstancePort": "80", "Protocol": "HTTP"}],
            },
        }
    },
    "AWS::ElasticLoadBalancingV2::LoadBalancer": {
        "Vpc": VPC,
        "Subnet": SUBNET,
        "Subnet2": SUBNET2,
        "Sg": SG,
        "Subject": LB2,
    },
    "AWS::ElasticLoadBalancingV2::TargetGroup": {"Vpc": VPC, "Subject": TG},
    "AWS::ElasticLoadBalancingV2::Listener": {
        "Vpc": VPC,
        "Subnet": SUBNET,
        "Subnet2": SUBNET2,
        "Sg": SG,
        "Lb": LB2,
        "Tg": TG,
        "Subject": LISTENER,
    },
    "AWS::ElasticLoadBalancingV2::ListenerRule": {
        "Vpc": VPC,
        "Subnet": SUBNET,
        "Subnet2": SUBNET2,
        "Sg": SG,
        "Lb": LB2,
        "Tg": TG,
        "Listener": LISTENER,
        "Subject": {
            "Type": "AWS::ElasticLoadBalancingV2::ListenerRule",
            "Properties": {
                "ListenerArn": {"Ref": "Listener"},
                "Priority": 1,
                "Conditions": [{"Field": "path-pattern", "Values": ["/x"]}],
                "Actions": [{"Type": "forward", "TargetGroupArn": {"Ref": "Tg"}}],
            },
        },
    },
    "AWS::Events::EventBus": {"Subject": {"Type": "AWS::Events::EventBus", "Properties": {"Name": "bus"}}},
    "AWS::Events::Rule": {
        "Subject": {
            "Type": "AWS::Events::Rule",
            "Properties": {"ScheduleExpression": "rate(1 hour)", "State": "ENABLED"},
        }
    },
    "AWS::Events::Archive": {
        "Subject": {
            "Type": "AWS::Events::Archive",
            "Properties": {"SourceArn": "arn:aws:events:us-east-1:000000000000:event-bus/default"},
        }
    },
    "AWS::IAM::Role": {"Subject": ROLE},
    "AWS::IAM::Policy": {
        "Role": ROLE,
        "Subject": {
            "Type": "AWS::IAM::Policy",
            "Properties": {
                "PolicyName": "p",
                "Roles": [{"Ref": "Role"}],
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}],
                },
            },
        },
    },
    "AWS::IAM::ManagedPolicy": {
        "Subject": {
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}],
                }
            },
        }
    },
    "AWS::IAM::InstanceProfile": {
        "Role": ROLE,
        "Subject": {"Type": "AWS::IAM::InstanceProfile", "Properties": {"Roles": [{"Ref": "Role"}]}},
    },
    "AWS::IAM::User": {"Subject": USER},
    "AWS::IAM::AccessKey": {
        "User": USER,
        "Subject": {"Type": "AWS::IAM::AccessKey", "Properties": {"UserName": {"Ref": "User"}}},
    },
    "AWS::IoT::ThingType": {"Subject": THING_TYPE},
    "AWS::IoT::Thing": {"Subject": {"Type": "AWS::IoT::Thing", "Properties": {}}},
    "AWS::IoT::Policy": {
        "Subject": {
            "Type": "AWS::IoT::Policy",
            "Properties": {
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "iot:Connect", "Resource": "*"}],
                }
            },
        }
    },
    "AWS::IoT::BillingGroup": {"Subject": {"Type": "AWS::IoT::BillingGroup", "Properties": {}}},
    "AWS::IoT::JobTemplate": {
        "Subject": {
            "Type": "AWS::IoT::JobTemplate",
            "Properties": {"JobTemplateId": "jt", "Description": "d", "Document": "{}"},
        }
    },
    "AWS::IoT::RoleAlias": {
        "Role": ROLE,
        "Subject": {
            "Type": "AWS::IoT::RoleAlias",
            "Properties": {"RoleArn": {"Fn::GetAtt": ["Role", "Arn"]}},
        },
    },
    "AWS::KMS::Key": {"Subject": KEY},
    "AWS::KMS::Alias": {
        "Key": KEY,
        "Subject": {
            "Type": "AWS::KMS::Alias",
            "Properties": {"AliasName": "alias/every-type", "TargetKeyId": {"Ref": "Key"}},
        },
    },
    "AWS::Kinesis::Stream": {"Subject": {"Type": "AWS::Kinesis::Stream", "Properties": {"ShardCount": 1}}},
    "AWS::Lambda::Function": {"Role": ROLE, "Subject": FUNCTION},
    "AWS::Lambda::Version": {
        "Role": ROLE,
        "Function": FUNCTION,
        "Subject": {"Type": "AWS::Lambda::Version", "Properties": {"FunctionName": {"Ref": "Function"}}},
    },
    "AWS::Lambda::Permission": {
        "Role": ROLE,
        "Function": FUNCTION,
        "Subject": {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "Action": "lambda:InvokeFunction",
                "FunctionName": {"Fn::GetAtt": ["Function", "Arn"]},
                "Principal": "apigateway.amazonaws.com",
            },
        },
    },
    "AWS::Lambda::LayerVersion": {
        "Subject": {
            "Type": "AWS::Lambda::LayerVersion",
            "Properties": {"Content": {"S3Bucket": "layers", "S3Key": "layer.zip"}},
        }
    },
    "AWS::Lambda::EventSourceMapping": {
        "Role": ROLE,
        "Function": FUNCTION,
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Subject": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": {"Ref": "Function"},
                "EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]},
            },
        },
    },
    "AWS::Logs::LogGroup": {"Subject": {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 7}}},
    "AWS::Logs::ResourcePolicy": {
        "Subject": {
            "Type": "AWS::Logs::ResourcePolicy",
            "Properties": {
                "PolicyName": "p",
                "PolicyDocument": LOGS_POLICY,
            },
        }
    },
    "AWS::RDS::DBParameterGroup": {
        "Subject": {
            "Type": "AWS::RDS::DBParameterGroup",
            "Properties": {
                "Description": "d",
                "Family": "postgres16",
                "Parameters": {"max_connections": "100"},
            },
        }
    },
    "AWS::RDS::DBSecurityGroup": {
        "Subject": {
            "Type": "AWS::RDS::DBSecurityGroup",
            "Properties": {"GroupDescription": "d", "DBSecurityGroupIngress": [{"CIDRIP": "10.0.0.0/16"}]},
        }
    },
    "AWS::RDS::DBSubnetGroup": {"Vpc": VPC, "Subnet": SUBNET, "Subnet2": SUBNET2, "Subject": RDS_SUBNETS},
    "AWS::RDS::DBInstance": {"Subject": DB_INSTANCE},
    "AWS::Redshift::ClusterParameterGroup": {
        "Subject": {
            "Type": "AWS::Redshift::ClusterParameterGroup",
            "Properties": {"Description": "d", "ParameterGroupFamily": "redshift-1.0"},
        }
    },
    "AWS::Redshift::ClusterSubnetGroup": {"Vpc": VPC, "Subnet": SUBNET, "Subject": REDSHIFT_SUBNETS},
    "AWS::Redshift::Cluster": {
        "Subject": {
            "Type": "AWS::Redshift::Cluster",
            "Properties": {
                "ClusterType": "single-node",
                "NodeType": "dc2.large",
                "DBName": "db",
                "MasterUsername": "admin",
                "MasterUserPassword": "Password123",
            },
        }
    },
    "AWS::Route53::HostedZone": {"Subject": ZONE},
    "AWS::Route53::RecordSet": {
        "Zone": ZONE,
        "Subject": {
            "Type": "AWS::Route53::RecordSet",
            "Properties": {
                "HostedZoneId": {"Ref": "Zone"},
                "Name": "www.example.com",
                "Type": "A",
                "TTL": "60",
                "ResourceRecords": ["10.0.0.1"],
            },
        },
    },
    "AWS::Route53::RecordSetGroup": {
        "Zone": ZONE,
        "Subject": {
            "Type": "AWS::Route53::RecordSetGroup",
            "Properties": {
                "HostedZoneId": {"Ref": "Zone"},
                "RecordSets": [
                    {"Name": "api.example.com", "Type": "A", "TTL": "60", "ResourceRecords": ["10.0.0.2"]}
                ],
            },
        },
    },
    "AWS::Route53::HealthCheck": {
        "Subject": {
            "Type": "AWS::Route53::HealthCheck",
            "Properties": {
                "HealthCheckConfig": {
                    "Type": "HTTP",
                    "FullyQualifiedDomainName": "example.com",
                    "Port": 80,
                    "ResourcePath": "/",
                }
            },
        }
    },
    "AWS::S3::Bucket": {"Subject": {"Type": "AWS::S3::Bucket", "Properties": {}}},
    "AWS::SNS::Topic": {"Subject": {"Type": "AWS::SNS::Topic", "Properties": {}}},
    "AWS::SNS::Subscription": {
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {}},
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Subject": subscription("Topic", "Queue"),
    },
    "AWS::SNS::TopicPolicy": {
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {}},
        "Subject": {
            "Type": "AWS::SNS::TopicPolicy",
            "Properties": {
                "Topics": [{"Ref": "Topic"}],
                "PolicyDocument": deny_without_tls("sns:Publish", {"Ref": "Topic"}, "*"),
            },
        },
    },
    "AWS::SQS::Queue": {"Subject": {"Type": "AWS::SQS::Queue", "Properties": {}}},
    "AWS::SQS::QueuePolicy": {
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Subject": {
            "Type": "AWS::SQS::QueuePolicy",
            "Properties": {
                "Queues": [{"Ref": "Queue"}],
                "PolicyDocument": deny_without_tls("sqs:*", {"Fn::GetAtt": ["Queue", "Arn"]}, {"AWS": "*"}),
            },
        },
    },
    "AWS::SSM::Parameter": {
        "Subject": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": "hello"}}
    },
    "AWS::SSM::Document": {
        "Subject": {
            "Type": "AWS::SSM::Document",
            "Properties": {
                "DocumentType": "Command",
                "Content": {
                    "schemaVersion": "2.2",
                    "description": "d",
                    "mainSteps": [
                        {"action": "aws:runShellScript", "name": "run", "inputs": {"runCommand": ["echo hi"]}}
                    ],
                },
            },
        }
    },
    "AWS::SageMaker::Model": {"Role": ROLE, "Subject": SM_MODEL},
    "AWS::SageMaker::EndpointConfig": {"Role": ROLE, "Model": SM_MODEL, "Subject": SM_ENDPOINT_CONFIG},
    "AWS::SageMaker::Endpoint": {
        "Role": ROLE,
        "Model": SM_MODEL,
        "Config": SM_ENDPOINT_CONFIG,
        "Subject": {
            "Type": "AWS::SageMaker::Endpoint",
            "Properties": {"EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]}},
        },
    },
    "AWS::SageMaker::NotebookInstance": {"Role": ROLE, "Subject": NOTEBOOK},
    "AWS::SageMaker::NotebookInstanceLifecycleConfig": {
        "Subject": {
            "Type": "AWS::SageMaker::NotebookInstanceLifecycleConfig",
            "Properties": {"OnStart": [{"Content": "ZWNobyBoaQ=="}]},
        }
    },
    "AWS::StepFunctions::StateMachine": {"Role": ROLE, "Subject": STATE_MACHINE},
}
TEMPLATES.update(
    {
        "AWS::S3::BucketPolicy": {
            "Bucket": {"Type": "AWS::S3::Bucket"},
            "Subject": {
                "Type": "AWS::S3::BucketPolicy",
                "Properties": {
                    "Bucket": {"Ref": "Bucket"},
                    "PolicyDocument": deny_without_tls(
                        "s3:*", [{"Fn::GetAtt": ["Bucket", "Arn"]}], {"AWS": "*"}
                    ),
                },
            },
        },
        "AWS::SecretsManager::Secret": {
            "Subject": {"Type": "AWS::SecretsManager::Secret", "Properties": {"GenerateSecretString": {}}}
        },
        "AWS::ApiGateway::Stage": {
            "Api": REST_API,
            "Method": API_METHOD,
            "Deployment": {
                "Type": "AWS::ApiGateway::Deployment",
                "DependsOn": "Method",
                "Properties": {"RestApiId": {"Ref": "Api"}},
            },
            "Subject": {
                "Type": "AWS::ApiGateway::Stage",
                "Properties": {
                    "RestApiId": {"Ref": "Api"},
                    "DeploymentId": {"Ref": "Deployment"},
                    "StageName": "prod",
                },
            },
        },
    }
)

TEMPLATES["AWS::ApiGateway::Account"] = {
    "Role": ROLE,
    "Subject": {
        "Type": "AWS::ApiGateway::Account",
        "Properties": {"CloudWatchRoleArn": {"Fn::GetAtt": ["Role", "Arn"]}},
    },
}
