"""Concurrency benchmark: one runjobs process draining no-op jobs with --concurrency 1, then N.

    .venv/bin/python -m bench.concurrency [--jobs 2000] [--concurrency 4] [--rounds 2]

Not a test: it prints figures and exits 0 unless something crashed. A brief
figure for issue 21's `runjobs --concurrency` (the speed issue brings the real
bench): the same drain as bench/queue.py's (``bench.queue.drain``: the process
released at a gate, the rate on the database's clock from the first claim to
the last finish) in a throw-away database, the one-slot worker as the baseline
measured in the same run. Rounds alternate the two, so a neighbour's load
falls on both: each round's ratio is printed, then the best rate of each and
the median of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from bench.common import AppProcess, app_bench_database, connect, headline, server_version
from bench.queue import BENCH_DB, drain


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="no-op jobs per drain (default: 2000)")
    parser.add_argument("--concurrency", type=int, default=4, help="slots of the measured worker (default: 4)")
    parser.add_argument("--rounds", type=int, default=2, help="drains of each kind, alternated (default: 2)")
    args = parser.parse_args()
    if args.jobs < 100 or args.concurrency < 2 or args.rounds < 1:
        parser.error("--jobs must be at least 100, --concurrency at least 2, --rounds at least 1")

    with app_bench_database(BENCH_DB, "concurrency-bench-") as (server, url, _media):
        with connect(server, BENCH_DB) as db:
            version = server_version(db)
            rates: dict[int, list[float]] = {1: [], args.concurrency: []}
            for round_ in range(1, args.rounds + 1):
                for slots in rates:
                    def start(slots=slots):
                        return AppProcess(url, "runjobs", "--burst", "--concurrency", str(slots))

                    result = drain(server, db, "jobs", start, 1, args.jobs)
                    rates[slots].append(result["rate"])
                    print(f"round {round_}: --concurrency {slots}: {result['rate']:,.0f} jobs/s "
                          f"({result['window']:.2f} s)", flush=True)
                print(f"round {round_}: {rates[args.concurrency][-1] / rates[1][-1]:.2f}x", flush=True)

    baseline, measured = max(rates[1]), max(rates[args.concurrency])
    print()
    print(headline("concurrency", version))
    print(f"{'drain of ' + format(args.jobs, ',') + ' no-op jobs (best of ' + str(args.rounds) + ')':<40}"
          f"{'rate':>14}{'vs --concurrency 1':>22}")
    print("-" * 76)
    for slots, rate in ((1, baseline), (args.concurrency, measured)):
        print(f"{'one runjobs, --concurrency ' + str(slots):<40}{rate:>9,.0f} jobs/s{rate / baseline:>21.2f}x")
    ratios = [n / one for n, one in zip(rates[args.concurrency], rates[1], strict=True)]
    print(f"{'median of the per-round ratios':<40}{'':>16}{statistics.median(ratios):>20.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
