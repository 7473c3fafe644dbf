"""GNN models on a local partition; aggregation goes through a Propagator."""
from cdfgnn.models.gnn import GNN
from cdfgnn.models.layers import LAYERS, GCNLayer, SAGELayer

MODELS = sorted(LAYERS)

__all__ = ["GNN", "GCNLayer", "SAGELayer", "LAYERS", "MODELS"]
