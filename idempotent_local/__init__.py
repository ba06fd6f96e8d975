"""The local cloud: deploy and run a CDK app that uses the constructs on this machine, without an AWS account.

``idempotent-pipeline local deploy`` (``make deploy`` for the reference stack): a moto server on loopback
(:mod:`.emulator`), taught the CloudFormation types a pipeline needs (:mod:`.cloudformation`, one module per
type) and changed where moto differs from AWS (:mod:`.patches`, named, per moto version) — both loaded only
in the emulator's process; the pinned CDK CLI (:mod:`.cdk`); an event-source runner that invokes the deployed
functions as Lambda's SQS event source mapping would (:mod:`.runner`, :mod:`.worker`, :mod:`.events`); and a
demo that accounts for every message (:mod:`.demo`). The emulator needs the ``local`` extra (moto's server);
without it every command says how to install it (:mod:`.extra`). See docs/local-cloud.md.
"""
