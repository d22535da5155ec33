"""The bundled examples (``examples/`` in the repository), installed as ``evalstore.examples`` package
data so that ``evalstore quickstart`` works from a wheel, in an empty folder, with no clone."""
