"""The durable agent loop (`loop`): observe, ask the model, gate, verify, act, judge, compensate.

May import: `daybook.context` and everything below it. Not `daybook.book`, adapters or the CLI.
"""
