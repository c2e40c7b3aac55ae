"""Transactions. Atomic multi-record commits with one audit entry (`commit`, seed 001) and
reading what they left (`audit`: records, the commit log, orphans).

Atomix (seed 000): `scope` (scopes, overlap, cover), `frontier` (frontiers and the commit rule
from the store's transaction headers, and waiting for them), `atomix` (one transaction attempt:
begin under a fresh epoch, stage, commit, abort with compensation, retry), `facet` (the
`Transactions` facet of ctx: `ctx.transaction`, and `ctx.effect` made transaction-aware).
Coming: speculative branches where only the winner's effects persist.

May import: `daybook.errors`, `daybook.records`, `daybook.store`, `daybook.journal`,
`daybook.runtime`. Not the other packages of its layer.
"""
