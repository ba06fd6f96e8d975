"""Event source mappings' pollers, one per mapping, on one small base (:mod:`.poller`): SQS queues
(:mod:`.sqs_poller`) and DynamoDB streams (:mod:`.stream_poller`)."""
