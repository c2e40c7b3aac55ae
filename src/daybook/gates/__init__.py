"""Approval gates: `ctx.gate` inside a run (`gate`), and outside it the registered approvers, the
gates waiting for them and the verdicts they give (`approval`).

May import: `daybook.errors`, `daybook.records`, `daybook.store`, `daybook.journal`,
`daybook.runtime`. Not the other packages of its layer.
"""
