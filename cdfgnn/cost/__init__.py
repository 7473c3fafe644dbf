"""Counting: the operation ledger (what a GPU would execute, counted where it is issued).
Pricing the counts is :mod:`cdfgnn.pricing`, a layer above the communicators."""
