"""Graph generators shared by test modules (pytest puts tests/ on sys.path)."""
from __future__ import annotations

import numpy as np


def planted_edges(blocks: int, size: int, p_in: float, p_out: float, seed: int = 0,
                  ) -> tuple[np.ndarray, np.ndarray, int]:
    """Dense blocks with sparse links between them: (src, dst, n), src < dst, unique."""
    rng = np.random.default_rng(seed)
    n = blocks * size
    b = np.repeat(np.arange(blocks), size)
    iu, ju = np.triu_indices(n, 1)
    keep = rng.random(iu.size) < np.where(b[iu] == b[ju], p_in, p_out)
    return iu[keep].astype(np.int64), ju[keep].astype(np.int64), n
