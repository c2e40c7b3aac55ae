"""Adapters: ready-made tools for the systems agents act on, each with its effect class declared.

`http` (a JSON API behind Idempotency-Key), `files` (staged writes, atomic rename on commit),
`sql` (statements buffered in one database transaction), `email` (a durable outbox released to
SMTP) and `git` (commits on a working branch). Import the one you need; none is loaded by
`import daybook`, so the core stays light.

May import: public `daybook` names only (`from daybook import Context, tool, ...`; an
import-linter contract in pyproject.toml), never daybook's rooms, never each other. The one
exception left: `files` registers its staged writes with `daybook.tx.atomix.treat`, until the
effect class declared on the tool replaces that registry.
"""
