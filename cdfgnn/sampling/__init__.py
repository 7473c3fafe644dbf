"""The sampled track's data layer: batch sampling, the deterministic epoch schedule and
its files, and the feature store that pulls remote rows (no models, no training).

Layer: above ``comm`` (a feature store pulls through a communicator), below
``models`` and ``methods`` (sampled methods, :mod:`cdfgnn.methods.sampled`, plan
their data path with it; :mod:`cdfgnn.train.minibatch` runs the steps).
"""
