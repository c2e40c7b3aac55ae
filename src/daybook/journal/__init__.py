"""The journal in motion: how a run's steps are recorded live and returned on replay.

Owns the execution cursor (`execution`), the recorded primitives of `ctx` (`decision`, `effect`,
`wait`, facet objects over the `facet.Facet` base), an effect's lifecycle from
intent to settled outcome (`lifecycle`, driven by `driver`), the internal stops that unwind a
workflow (`stop`), the tool and its counterparty profile (`tool`; `wire` reads the network
clients' errors by name), the model-client protocol
(`llm`), strict mode's guards (`strict`) and following a run's journal as it grows (`follow`).

May import: `daybook.errors`, `daybook.records`, `daybook.store`. Nothing above.
"""
