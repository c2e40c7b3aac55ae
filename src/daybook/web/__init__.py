"""The local web inspector (coming): runs, timelines, approvals and steering over the same store.

The top layer beside the CLI: may import anything in daybook; nothing in daybook imports it.
"""
