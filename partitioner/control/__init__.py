"""The control loop's decisions (above :mod:`partitioner.builders`): when a new spec is worth publishing.

* :mod:`~partitioner.control.policy`: the reactive rebalance policy (watermarks, cooldown, minimum change);
* :mod:`~partitioner.control.predictive`: the predictive policy (fleet sized for the forecast load);
* :mod:`~partitioner.control.controller`: one control step, what the partitioner Lambda and the simulator run.
"""
