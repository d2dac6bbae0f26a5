"""The worker's ports to the outside, injectable so tests and the scale simulation can replace them.

* :mod:`~geo_service.adapters.aws`: the AWS adapter (S3, Kinesis, DynamoDB);
* :mod:`~geo_service.adapters.logs`: structured JSON logs on stdout (the Lambdas' Powertools schema);
* :mod:`~geo_service.adapters.metrics`: CloudWatch EMF metric lines on stdout;
* :mod:`~geo_service.adapters.timebase`: clocks, waits and background threads.
"""
