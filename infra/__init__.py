"""CDK infrastructure of Geo Rebalancer: one Construct per concern, composed by :mod:`infra.stack`."""
