"""`python -m services.scheduler`: the scheduler process of the distributed deployment."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from types import FrameType

from kernelband.config import get_settings
from kernelband.db.session import DatabaseError
from services.scheduler.leader import PostgresRequiredError
from services.scheduler.loop import run_scheduler


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, install SIGTERM/SIGINT handlers and run until stopped."""
    parser = argparse.ArgumentParser(prog="python -m services.scheduler",
                                     description="KernelBand scheduler (leader-elected).")
    parser.add_argument("--name", default=f"scheduler@{socket.gethostname()}:{os.getpid()}",
                        help="name shown in the workers table and the leader_epoch row")
    parser.add_argument("--log-level", default=os.environ.get("KERNELBAND_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger(__name__).info("signal %s: finishing the current step", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        run_scheduler(get_settings(), args.name, stop)
    except (PostgresRequiredError, DatabaseError) as exc:
        print(f"scheduler cannot start: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
