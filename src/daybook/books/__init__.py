"""The books: what was decided, what was done, what is owed, and what is still open.

Owns the effect ledger (`effects`: every effect with its status history, and naming an effect by
key or by run and step), the decision ledger read back (`why`), the obligation ledger
(`obligation`: `ctx.obligation`/`fulfil`/`cancel` and the list across runs), open effects
(`unknowns`: the operator's list and `ctx.barrier`), resolution by hand (`resolve`) and
reconciliation with the counterparties (`reconcile`).

May import: `daybook.errors`, `daybook.records`, `daybook.store`, `daybook.journal`,
`daybook.runtime`. Not the other packages of its layer (`gates`, `coordination`, `tx`).
"""
