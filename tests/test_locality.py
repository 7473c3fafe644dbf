"""Column locality of an aggregation matrix (cdfgnn.partition.locality): the curve's
properties, its interpolation, and the twins' per-part curves."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdfgnn.partition.locality import GRID_STEPS, arc_share, combine, grid, share_at


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 49), min_size=1, max_size=400), st.integers(50, 80),
       st.integers(0, 50))
def test_curve_is_a_concentration_curve(cols, num_cols, loops):
    """share(1) = 1, non-increasing in k, never below the uniform q, and the top column's
    reads at the grid's end when it reaches one column."""
    curve = arc_share(np.asarray(cols), num_cols, self_loops=loops)
    assert len(curve) == GRID_STEPS + 1 and curve[0] == 1.0
    assert all(a >= b for a, b in zip(curve, curve[1:]))
    q = grid()
    assert all(c >= qk - 1e-5 for c, qk in zip(curve, q))
    reads = np.bincount(cols, minlength=num_cols)
    reads[:loops] += 1
    assert curve[-1] == pytest.approx(reads.max() / reads.sum(), abs=1e-5)


def test_uniform_and_skewed_reads():
    uniform = arc_share(np.arange(4096) % 1024, 1024)
    assert uniform[:11] == pytest.approx(list(grid()[:11]), abs=1e-5)
    assert share_at(uniform, 0.3) == pytest.approx(0.3, abs=0.03)
    # one column takes half the reads
    skewed = arc_share(np.r_[np.zeros(1000, int), np.arange(1000) % 1000], 1000)
    assert share_at(skewed, 1 / 1000) == pytest.approx(0.5005, abs=1e-3)
    assert share_at(None, 0.25) == 0.25          # no curve: uniform
    assert share_at(skewed, 1.0) == 1.0 and share_at(skewed, 0.0) == 0.0
    assert arc_share(np.zeros(0, int), 0) is None


def test_combine_weighs_by_arcs():
    a, b = [1.0, 0.9, 0.8], [1.0, 0.5, 0.25]
    assert combine([a, b], [3, 1]) == pytest.approx([1.0, 0.8, 0.6625])
    assert combine([a, None], [1, 5]) == a
    assert combine([None], [1]) is None


def test_twin_parts_carry_their_curves():
    """METIS counts of a twin keep, per part, the curve of its aggregation matrix (its
    rows, their halo columns, a self loop per row); halo columns are read rarely, so the
    busiest half of the columns takes most of the reads."""
    from cdfgnn.twins.halo import twin_halo
    th = twin_halo("synth-arxiv", 4, nodes=4000, cache_dir=None)
    assert len(th.arc_share) == 4
    for curve in th.arc_share:
        assert curve[0] == 1.0 and curve[1] > 0.6
    whole = twin_halo("synth-arxiv", 1, nodes=4000, cache_dir=None).arc_share[0]
    assert whole[0] == 1.0 and 0.5 < whole[1] < 1.0
