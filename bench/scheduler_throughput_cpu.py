"""CPU per pull of the processes a scheduler benchmark drives: its own and Postgres's.

The scheduler waits for each statement, so its rate is set by the CPU both spend per pull (on
a machine of two shared cores, by their sum); pulls/s alone moves with the machine's speed and
load. Postgres's share is read from /proc for the backends of the benchmark's database, so it
is known only for a server on this machine (None otherwise, and for SQLite).
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import Engine, text

# Every backend of the database, the reading one included: it is a connection of the
# benchmark's own pool, the one its passes use (the two readings cost it a query each).
_BACKENDS = text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")


def postgres_cpu_s(engine: Engine) -> dict[int, float] | None:
    """CPU seconds (user + system) so far of each backend of the engine's database, by pid;
    None when they cannot be read here."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as connection:
        pids = [int(pid) for pid in connection.execute(_BACKENDS).scalars()]
    seconds: dict[int, float] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone since it was listed (a pool closing a connection), or not here
        seconds[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    # none readable: another machine's server (or another PID namespace); a backend that
    # exited between the listing and its /proc read no longer voids the whole reading
    return seconds or None


def used_between(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    """Backend CPU seconds spent between two readings (a backend opened in between counts
    from zero, one closed in between is not counted)."""
    if before is None or after is None:
        return None
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def cpu_note(row: dict[str, Any]) -> str:
    """The largest configuration's CPU per pull, in ms and in reference loops ('' if unknown)."""
    scheduler, postgres = row.get("scheduler_cpu_ms_per_pull"), row.get("postgres_cpu_ms_per_pull")
    if scheduler is None:
        return ""
    reference = row.get("reference_ms_median")
    parts = [f"scheduler {scheduler:.2f} ms"]
    if postgres is not None:
        parts.append(f"Postgres {postgres:.2f} ms (its backends of the run's database)")
    in_refs = (f"; in the small reference loop timed during the run (median {reference:.1f} "
               f"ms): scheduler {scheduler / reference:.3f}"
               + (f", Postgres {postgres / reference:.3f}" if postgres is not None else "")
               if reference else "")
    return ("\n\nCPU per pull over the whole run at the largest configuration: "
            + ", ".join(parts) + in_refs + ".")


__all__ = ["cpu_note", "postgres_cpu_s", "used_between"]
