"""Session accounting: forked processes' shared pages are not counted once per process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from kernelband.sandbox.watch import kill_session, session_members, session_usage

FORKING = textwrap.dedent("""
    import os, time
    block = bytearray(200 * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1  # touched: resident in the parent, shared copy-on-write after fork
    for _ in range(4):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    time.sleep(60)
""")


def test_forked_children_share_their_parents_pages_in_the_session_total() -> None:
    child = subprocess.Popen([sys.executable, "-c", FORKING], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            members = session_members(child.pid)
            if len(members) == 5 and min(rss for _, rss in members) > 200 * 2**20:
                break
            time.sleep(0.1)
        count, resident = session_usage(child.pid)
        summed_rss = sum(rss for _, rss in session_members(child.pid))
        assert count == 5
        assert summed_rss > 1000 * 2**20  # each process maps the same 200 MiB
        assert resident < 400 * 2**20  # counted once, split among the five
    finally:
        kill_session(child.pid)
        child.wait(timeout=10)
