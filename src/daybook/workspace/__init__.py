"""Workspaces: the stateful world a coding or UI agent acts on, with drift checks and rewind.

`checkout.py` owns `Checkout` (edits with drift checks, leases, worktrees), `screen.py` owns
`Screen` (UI acts checked by view hash), `snapshot.py` the per-run hidden git ref of snapshots,
`rewind.py` the rewind onto a journal branch, `methods.py` the facade's `rewind` and `snapshots`.

It may import the layers below the facade (context, recovery and steering, coordination,
runtime, journal, store, records, errors) and never `daybook.book` or anything above it; its
handles reach workflows as the public names `daybook.Checkout`, `daybook.Screen`.
"""
