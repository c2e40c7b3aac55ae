"""Transactions. Today: atomic multi-record commits with one audit entry (`commit`, seed 001)
and reading what they left (`audit`: records, the commit log, orphans).

Coming here (Atomix, seed 000): epochs, per-resource frontiers and the commit rule; effect classes
that buffer, compensate or gate inside a transaction; speculative branches where only the
winner's effects persist.

May import: `daybook.errors`, `daybook.records`, `daybook.store`, `daybook.journal`,
`daybook.runtime`. Not the other packages of its layer.
"""
