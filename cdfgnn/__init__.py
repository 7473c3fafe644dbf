"""cdfgnn: a reproducible benchmark suite for distributed full-batch GNN training."""

__version__ = "0.1.0"
