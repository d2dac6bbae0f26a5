"""Quadkey and grid geometry, the bottom layer of the partitioner (it imports only :mod:`partitioner.errors`).

* :mod:`~partitioner.geo.tiles`: web-mercator tiles and quadkeys, scalar and vectorised;
* :mod:`~partitioner.geo.graph`: 8-neighbour adjacency and connected components of grid cells;
* :mod:`~partitioner.geo.shape`: filling a region's notches and holes, listing its cells as quadtree squares;
* :mod:`~partitioner.geo.rings`: the union of quadtree squares as polygons.
"""
