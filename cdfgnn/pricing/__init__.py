"""The device time model, in one place: counts (:mod:`cdfgnn.cost.ledger`) priced on GPU
and network profiles.

One model serves every caller: ``cdfgnn train --devices`` (each run priced once),
:func:`cdfgnn.pricing.record.reprice` (a record priced again), the claims' device columns,
``cdfgnn compare`` and ``benchmarks/time_model.py``, which builds counts without training
(:mod:`cdfgnn.pricing.estimate`) and prices them with the same functions.

* :mod:`~cdfgnn.pricing.hardware` (``gpus.yaml``): GPU profiles; :mod:`~cdfgnn.pricing
  .devices`: CaPGNN's measured Table 1 profiles (the CPU-measured model's slowdown, RAPA);
* :mod:`~cdfgnn.pricing.efficiency` (``efficiency.yaml``): every fitted constant;
* :mod:`~cdfgnn.pricing.roofline`: a ledger entry's seconds on a GPU;
* :mod:`~cdfgnn.pricing.interconnect`: interconnects as papers write them;
* :mod:`~cdfgnn.pricing.cluster`: GPUs + link profile + topology + constants, resolved
  once; the link efficiency, NIC sharing and staging rules;
* :mod:`~cdfgnn.pricing.epoch`: the full-batch epoch (overlap) rule;
  :mod:`~cdfgnn.pricing.step`: the sampled track's step rule;
* :mod:`~cdfgnn.pricing.record`: a run's counts priced once, and again (``reprice``);
* :mod:`~cdfgnn.pricing.estimate`: counts from a model's shape, without training.

The layer sits above :mod:`cdfgnn.comm` (it prices traffic with its NetworkModel) and
below everything that trains or reports.
"""
