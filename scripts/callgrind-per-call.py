#!/usr/bin/env python3
"""callgrind-per-call.py - instructions per API call outside the wait loop, from callgrind files.

Usage: callgrind-per-call.py CALLS FILE... [-v]

Each FILE comes from valgrind --tool=callgrind --toggle-collect=smddp_COLL
(docs/PERFORMANCE.md, "Small calls"); CALLS is how many calls it counted
(the bench's -n plus -w, times 2: out of place and in place).  The wait
loop (the ready and sleep callbacks, the spin, the yields, the clock,
the futex) is counted apart: its share follows how long a rank waited,
which the load of the machine decides.  -v lists the functions.
"""
import re
import subprocess
import sys

WAIT = re.compile(r"(wait\.h:\S+|clock\.h:sd_wait\S*)|:(sd_wait_yield|batch_sleep|sd_shm_sleep|"
                  r"syscall|batch_ready|barrier_ready|match(\.isra\.\d+)?|sd_wait_more|"
                  r"sched_yield|clock_gettime\S*|__vdso_clock_gettime|sd_clock_\w+)( |$)")


def main():
    verbose = "-v" in sys.argv
    args = [a for a in sys.argv[1:] if a != "-v"]
    if len(args) < 2:
        sys.exit(__doc__.strip().splitlines()[2])
    calls = float(args[0])
    for f in args[1:]:
        out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100",
                              "--auto=no", f], capture_output=True, text=True, check=True).stdout
        total = wait = 0
        rows = []
        for line in out.splitlines():
            m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*)$", line)
            if not m or "PROGRAM TOTALS" in m.group(2):
                continue
            n = int(m.group(1).replace(",", ""))
            waits = bool(WAIT.search(m.group(2)))
            total += n
            wait += n if waits else 0
            rows.append((n, waits, re.sub(r" \[.*", "", m.group(2)).split("/")[-1]))
        print("%s: %.0f per call outside the wait loop (the wait loop: %.0f)"
              % (f, (total - wait) / calls, wait / calls))
        if verbose:
            for n, waits, name in rows:
                if n / calls >= 2:
                    print("  %7.1f %s %s" % (n / calls, "wait" if waits else "    ", name))


if __name__ == "__main__":
    main()
