"""The local cloud: deploy and run a CDK app that uses the constructs on this machine, without an AWS account.

``idempotent-pipeline local deploy`` (``make deploy`` for the reference stack): a moto server on loopback
whose core (:mod:`.emulator`, :mod:`.clock`, names in :mod:`.names`) knows none of its services; the services
— the taught CloudFormation types (:mod:`.cloudformation`), the named changes where moto differs from AWS
(:mod:`.patches`), the control API (:mod:`.control_api`) — register with it in the emulator's process
(:mod:`.server`); the pinned CDK CLI (:mod:`.cdk`); an event-source runner that invokes the deployed functions
as Lambda's event source mappings would (:mod:`.runner`: :mod:`.pollers`, :mod:`.functions`,
:mod:`.accounting`); and a demo that accounts for every message (:mod:`.demo`). The emulator needs the
``local`` extra (moto's server); without it every command says how to install it (:mod:`.extra`). See
docs/local-cloud.md.
"""
