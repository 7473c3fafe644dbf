"""Device cost model: operation ledger, GPU profiles, efficiency constants, pricing."""
