"""A child process for tests/test_tx_speculate_commits.py: a speculation of K no-op branches
(the first wins), killed with SIGKILL at a store call, then resumed.

    spec_child.py DB start RUN_ID K [--kill-tx before|after:METHOD:N]
    spec_child.py DB resume RUN_ID
"""

from __future__ import annotations

import json
import sys
from typing import Any

from crashpoint import kill_at_call, take

import daybook


@daybook.workflow(name="spec_many")
def spec_many(ctx: daybook.Context, k: int) -> Any:
    branches = {f"b{j}": (lambda c, j=j: {"j": j}) for j in range(k)}
    return ctx.speculate(branches, choose=lambda r: min(r, key=lambda name: r[name]["j"]))


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    book = daybook.Daybook(db, lease_ttl=2.0)
    spec = take(rest, "--kill-tx")
    if spec is not None:
        when, method, n = spec.split(":")
        real = getattr(book.store, method)
        setattr(book.store, method, kill_at_call(real, int(n), before=when == "before"))
    if action == "start":
        result = book.run(spec_many, int(rest[0]), run_id=run_id)
    else:
        result = book.resume(run_id, wait=10)
    print(json.dumps({"result": result}))


if __name__ == "__main__":
    main()
