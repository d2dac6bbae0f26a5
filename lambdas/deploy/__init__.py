"""Blue/green deploy: the DeployController state machine, the deployer and the ECS lifecycle hook."""
