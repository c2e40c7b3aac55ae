"""Dispatch: which run a worker takes next and what starts runs on its own.

`queues` (named queues with a concurrency limit, global and per worker, a rate limit, priority
and partition keys, all enforced by the store's claim), `schedules` (cron schedules whose every
firing starts exactly one run), `search` (run search with filters and paging) and `attributes`
(`ctx.set_attributes`, the search attributes a run sets on itself). `methods` is the book side:
the `Daybook` methods for all of them.

May import: `daybook.errors`, `daybook.records`, `daybook.store`, `daybook.journal`,
`daybook.runtime`.
"""
