"""Recovery: undoing what a run did. Today: compensation (`compensation`: `ctx.compensate`, each
confirmed effect undone by its inverse, exactly once, with an honest `stuck`).

Coming here (DART, seed 004): semantic rollback of one failed subtask instance to its latest
admissible checkpoint, on a journal branch that supersedes a range of steps and deletes nothing.

May import: everything below it (`errors`, `records`, `store`, `journal`, `runtime`) and the
layer under it (`books`, `tx`, `coordination`, `gates`).
"""
