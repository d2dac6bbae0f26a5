"""Closed-loop simulation of the control loop (``python -m partitioner simulate``, :mod:`partitioner.commands.simulate`).

One idea per module:

* :mod:`~partitioner.simulate.places`: the bundled GeoNames places and the helpers that turn them into load;
* :mod:`~partitioner.simulate.windows`: a window (events, cost) and series of windows (a directory, or drawn);
* :mod:`~partitioner.simulate.scenarios`: the built-in days (``global-day``, ``metro-day``, ``cost-day``);
* :mod:`~partitioner.simulate.strategies`: what is compared (floor, static, rebuild, reactive, default, counts);
* :mod:`~partitioner.simulate.loop`: the timeline (latency, live specs, true load, flips);
* :mod:`~partitioner.simulate.swaps`: what a swap costs (whole fleet or carry-over);
* :mod:`~partitioner.simulate.summary`: the per-strategy figures (the ``--json`` document);
* :mod:`~partitioner.simulate.session`: one run of several strategies and the floor;
* :mod:`~partitioner.simulate.render`, :mod:`~partitioner.simulate.figure`: text and PNG.
"""

from partitioner.simulate.scenarios import Scenario, scenario
from partitioner.simulate.session import SimSettings, Simulation, simulate
from partitioner.simulate.windows import SimulationError, Window

__all__ = ["Scenario", "SimSettings", "Simulation", "SimulationError", "Window", "scenario", "simulate"]
