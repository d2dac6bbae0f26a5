"""Quadkey and grid geometry, the bottom layer of the partitioner (it imports only :mod:`geokernel.errors`).

* :mod:`~geokernel.geo.tiles`: web-mercator tiles and quadkeys, scalar and vectorised;
* :mod:`~geokernel.geo.graph`: 8-neighbour adjacency and connected components of grid cells;
* :mod:`~geokernel.geo.shape`: filling a region's notches and holes, listing its cells as quadtree squares;
* :mod:`~geokernel.geo.rings`: the union of quadtree squares as polygons.
"""
