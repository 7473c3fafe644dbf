"""Synthetic twins against partition statistics: measuring, fitting, twins of any graph.

Above :mod:`cdfgnn.partition` (it runs METIS) and :mod:`cdfgnn.data` (it generates the
twins); docs/twins.md explains the model and the fit.
"""
