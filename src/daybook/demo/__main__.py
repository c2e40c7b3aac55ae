"""Child-process entry of the demo: start the treasury run against a bank URL."""

from __future__ import annotations

import argparse
import json
import time

from ..book import Daybook
from .agent import treasury

parser = argparse.ArgumentParser(prog="python -m daybook.demo")
parser.add_argument("--db", required=True)
parser.add_argument("--bank", required=True)
parser.add_argument("--run-id", required=True)
opts = parser.parse_args()
with Daybook(opts.db) as book:
    result = book.run(treasury, opts.bank, time.strftime("%Y-%m-%d"), run_id=opts.run_id)
    print(json.dumps(result))
