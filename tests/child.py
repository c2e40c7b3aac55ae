"""An agent process for crash and race tests: runs or resumes a workflow, optionally killing
itself with SIGKILL at a chosen journal write.

    child.py DB start RUN_ID WORKFLOW ARGS_JSON [--kill-before KIND:N | --kill-after KIND:N]
    child.py DB resume RUN_ID [--ready-go] [--app MODULE|FILE.py]
    child.py DB cancel RUN_ID   (cancel the run, unwinding its effects)
    child.py DB threads RUN_PREFIX RUNS ARGS_JSON   (RUNS payments runs in parallel threads)

KIND:N means the N-th (1-based) journal row of that kind written by this process ('any' counts
every kind). --ready-go: print `ready` with the store open, then wait for a line on stdin.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import agents
from crashpoint import kill_at_journal_write, ready_then_go, report, take

from daybook import Daybook
from daybook.demo.agent import treasury


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    inline = take(rest, "--inline-wait")
    app = take(rest, "--app")  # the code that defines the run's workflow (agents.py is imported)
    book = Daybook(db, lease_ttl=2.0, inline_wait=2.0 if inline is None else float(inline))
    kill_at_journal_write(book, rest)
    ready_then_go(rest)

    def run() -> object:
        if action == "threads":
            count, args = int(rest[0]), json.loads(rest[1])
            threads = [
                threading.Thread(
                    target=book.run, args=(agents.payments, *args), kwargs={"run_id": f"{run_id}-{i}"}
                )
                for i in range(count)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return "ok"
        if action == "start":
            wf = treasury if rest[0] == "treasury" else getattr(agents, rest[0])
            return book.run(wf, *json.loads(rest[1]), run_id=run_id)
        if action == "cancel":
            done = book.cancel(run_id, compensate=True)
            return None if done is None else {"compensated": done.compensated}
        return book.resume(run_id, app=app)

    report(run)


main()
