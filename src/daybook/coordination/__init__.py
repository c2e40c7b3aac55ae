"""Coordination across runs and processes: entities (a lease and an append-only log per shared
resource, `entity`), budget pools drawn on by many runs (`pool`), and a run's own budget ledger
(`budget`: `ctx.budget` and the summary read from a journal).

May import: `daybook.errors`, `daybook.records`, `daybook.store`, `daybook.journal`,
`daybook.runtime`. Not the other packages of its layer.
"""
