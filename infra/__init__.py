"""CDK infrastructure of Geo Rebalancer: one Construct per concern, composed by :class:`infra.rebalancer.GeoRebalancer`,
the construct to put in a stack of your own (the app's stack, :mod:`infra.stack`, holds one)."""
