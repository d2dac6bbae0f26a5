"""The geo-stream teardown: a CloudFormation custom resource that deletes the deployment's geo streams with the stack."""
