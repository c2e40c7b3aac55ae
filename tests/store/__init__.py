"""The store conformance suite: one contract per protocol part, run on every backend."""
