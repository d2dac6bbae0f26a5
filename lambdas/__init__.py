"""Lambda handlers of Geo Rebalancer: partitioner, router, deploy (deployer + ECS lifecycle hooks)."""
