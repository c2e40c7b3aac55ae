"""Running workflows: start, attach, claim, resume, finish, replay, versions, signals.

Owns the runner (`runner.Runner`), a handle's leases and reservations (`claim`), owner ids and
heartbeats (`lease`), run creation (`start`), how a body ended (`finish`), continue-as-new
chains (`chain`), pure replay (`replay`), code versions under live runs (`versions`), a run's
inbox (`inbox`), the workflow registry and loading a run's code (`workflow`).

May import: `daybook.errors`, `daybook.records`, `daybook.store`, `daybook.journal`. It builds a
run's `ctx` through a factory it is given, so it never imports the facets above it.
"""
