"""The store conformance suite's fixtures: a fresh store of each backend (`db_url`, from
tests/conftest.py), opened raw (no guard); `contract` builds headers and journal rows.

Every test in tests/store/ runs once per backend: a new backend passes when these pass on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from daybook.store import Store, open_store

from .contract import header, started


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


@pytest.fixture
def other(db_url: str, store: Store) -> Iterator[Store]:
    """A second handle on the same store (another process's view)."""
    opened = open_store(db_url)
    yield opened
    opened.close()


@pytest.fixture
def new_run(store: Store) -> Callable[..., str]:
    """Create a run (header and first row) and return its id."""

    def make(run_id: str, status: str = "running", **fields: Any) -> str:
        assert store.create_run(header(run_id, status, **fields), started(run_id))
        return run_id

    return make
