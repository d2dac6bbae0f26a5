"""The sub-commands of ``python -m partitioner`` (the layer under :mod:`partitioner.cli`), one module each.

:mod:`~partitioner.commands.build`, :mod:`~partitioner.commands.measure` (``evaluate``, ``diff``),
:mod:`~partitioner.commands.draw` (``geojson``, ``plot``), :mod:`~partitioner.commands.policy`,
:mod:`~partitioner.commands.simulate` and :mod:`~partitioner.commands.demo`; what they share:
:mod:`~partitioner.commands.io` (``-``, checked paths, atomic writes), :mod:`~partitioner.commands.args`,
:mod:`~partitioner.commands.progress` and :mod:`~partitioner.commands.exits`.
"""
