"""Prefix every stdin line with the seconds since this filter started (arrival time)."""

import sys
import time

t0 = time.time()
for line in sys.stdin:
    sys.stdout.write(f"[{time.time() - t0:8.3f}] {line}")
    sys.stdout.flush()
