"""Steering a run while it runs. Today: updates, requests with an answer applied once
(`update`: `ctx.handle_update` and the caller's side).

Coming here (seed 003): pause and resume, revision by addition, revision or retraction, and
editing a past turn on a journal branch (shared with `daybook.recovery`).

May import: everything below it (`errors`, `records`, `store`, `journal`, `runtime`) and the
layer under it (`books`, `tx`, `coordination`, `gates`).
"""
