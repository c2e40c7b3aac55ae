"""A contending agent for the entity race test: claims one entity N times in its own process.

Usage: python claimer.py DB_URL ENTITY AGENT N TTL START_AT

Waits until START_AT (epoch seconds) so that the processes start together, or, if START_AT is
`stdin`, prints `ready` with its store open and waits for a line on stdin; then calls `claim`
N times. After each win it records `work`, then, at random, releases the lease, lets it lapse
(sleeps past the ttl), or keeps it (the next claim renews it); after a loss it claims again at
once. Prints one JSON line: its wins in time order as [before, after] call times, how many
records succeeded, and when its first and last claims were made.
"""

from __future__ import annotations

import json
import random
import sys
import time

from daybook import Daybook


def main() -> None:
    url, name, agent, n, ttl, start_at = sys.argv[1:7]
    count, lease = int(n), float(ttl)
    rng = random.Random(agent)
    wins: list[list[float]] = []
    recorded = released = 0
    with Daybook(url) as book:
        entity = book.entity(name)
        if start_at == "stdin":
            print("ready", flush=True)
            sys.stdin.readline()
        else:
            time.sleep(max(0.0, float(start_at) - time.time()))
        first = time.time()
        for i in range(count):
            before = time.time()
            if not entity.claim(agent, lease):
                continue
            wins.append([before, time.time()])
            recorded += entity.record(agent, "work", {"i": i})
            roll = rng.random()
            if roll < 0.3:
                released += entity.release(agent)
            elif roll < 0.6:
                time.sleep(lease * 1.5)
        last = time.time()
    out = {
        "agent": agent,
        "wins": wins,
        "recorded": recorded,
        "released": released,
        "first": first,
        "last": last,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
