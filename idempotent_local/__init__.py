"""The local cloud: deploy and run a pipeline on this machine, without an AWS account.

``python -m idempotent_local deploy`` (``make deploy``): a moto server on loopback, taught the
CloudFormation types a pipeline needs (:mod:`.cloudformation`, loaded only in the emulator's process), the
real CDK CLI (:mod:`.cdk`), an event-source runner that invokes the deployed functions as Lambda's SQS event
source mapping would (:mod:`.runner`), and a demo that accounts for every message (:mod:`.demo`).
Needs the ``local`` extra (``pip install "idempotent-pipeline[local]"``); see docs/local-cloud.md.
"""
