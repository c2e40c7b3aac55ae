"""An agent process for crash and race tests: runs or resumes a workflow, optionally killing
itself with SIGKILL at a chosen journal write.

    child.py DB start RUN_ID WORKFLOW ARGS_JSON [--kill-before KIND:N | --kill-after KIND:N]
    child.py DB resume RUN_ID
    child.py DB threads RUN_PREFIX RUNS ARGS_JSON   (RUNS payments runs in parallel threads)

KIND:N means the N-th (1-based) journal row of that kind written by this process ('any' counts
every kind).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import agents

from daybook import Daybook, DaybookError, RunLeased
from daybook.demo.agent import treasury


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    kill: tuple[str, str, int] | None = None
    for flag in ("--kill-before", "--kill-after"):
        if flag in rest:
            i = rest.index(flag)
            kind, n = rest[i + 1].split(":")
            kill = (flag, kind, int(n))
            del rest[i : i + 2]
    inline = 2.0
    if "--inline-wait" in rest:
        i = rest.index("--inline-wait")
        inline = float(rest[i + 1])
        del rest[i : i + 2]
    book = Daybook(db, lease_ttl=2.0, inline_wait=inline)
    if kill is not None:
        flag, kind, n = kill
        real = book.store.append
        seen = {"n": 0}

        lock = threading.Lock()

        def append(event):  # type: ignore[no-untyped-def]
            mine = 0
            if kind in ("any", event.kind):
                with lock:  # parallel runs (the group-commit test) append from many threads
                    seen["n"] += 1
                    mine = seen["n"]
            if mine == n and flag == "--kill-before":
                os.kill(os.getpid(), signal.SIGKILL)
            real(event)
            if mine == n and flag == "--kill-after":
                os.kill(os.getpid(), signal.SIGKILL)

        book.store.append = append  # type: ignore[method-assign]
    try:
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
            result = "ok"
        elif action == "start":
            wf = treasury if rest[0] == "treasury" else getattr(agents, rest[0])
            args = json.loads(rest[1])
            result = book.run(wf, *args, run_id=run_id)
        else:
            result = book.resume(run_id)
    except RunLeased as exc:
        print(json.dumps({"leased": str(exc)}))
        sys.exit(4)
    except DaybookError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        sys.exit(3)
    print(json.dumps({"result": result}))


main()
