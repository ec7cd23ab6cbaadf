"""The one Settings object of the service (environment prefix KERNELBAND_)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Validated at start; unsafe defaults are refused outside development."""

    model_config = SettingsConfigDict(env_prefix="KERNELBAND_", env_file=None, extra="ignore")

    environment: str = "development"  # development | production
    data_dir: Path = Path("kernelband-data")
    database_url: str = ""  # empty: SQLite file under data_dir (embedded mode)
    broker_url: str = "redis://127.0.0.1:6379/0"
    result_backend_url: str = "redis://127.0.0.1:6379/1"

    # generator: an empty model means the offline rules generator
    llm_model: str = ""
    llm_api_base: str = ""
    llm_api_key: SecretStr = SecretStr("")
    llm_timeout_s: float = 120.0
    llm_max_retries: int = 3
    llm_concurrency: int = 4

    # sandbox
    sandbox_timeout_s: float = 60.0  # run time of one sandboxed run on a GPU node
    # Triton compilation and autotuning, budgeted apart from the run time (kernelband/sandbox/compile_budget.py)
    sandbox_compile_s: float = 240.0
    # an autotune config still compiling after this long is left out of its tuning round, once
    # another config of the round has compiled (kernelband/problem/autotune_compile.py; 0: wait)
    sandbox_config_compile_s: float = 120.0
    # run time of one sandboxed run in the CPU Triton interpreter (every program runs in Python)
    sandbox_interpret_timeout_s: float = 120.0
    sandbox_cpu_s: int = 120
    sandbox_max_files: int = 256
    sandbox_max_procs: int = 64
    sandbox_memory_bytes: int = 8 * 1024**3
    # a runner saves every output it hands to the judge as a file: a test's large result (rope
    # embeddings of long sequences) needs more than a few hundred MiB
    sandbox_max_file_bytes: int = 2 * 1024**3
    sandbox_warm_pool: bool = True
    # a root service runs sandbox children as this user, e.g. "nobody" (empty: as itself)
    sandbox_user: str = ""
    # how sandbox children are isolated (kernelband/sandbox/jail.py, docs/reliability.md):
    # "jail": every runner in a bubblewrap jail; a node that cannot jail runs no submitted code.
    # "weak": jailed where the node can, else rlimits, a network namespace, the audit hook and
    # KERNELBAND_SANDBOX_USER only; for a single user's own code (the embedded demo).
    # "unjailed": never jail (the weak confinement above; a node whose runs need what the jail
    # hides, accepted explicitly)
    sandbox_isolation: str = "jail"
    # Nsight Compute passes run the candidate under ncu's launcher, outside the jail: with
    # sandbox_isolation "jail" they are skipped (h stays the labelled estimate) unless the
    # operator accepts that weaker isolation for them here
    ncu_unjailed: bool = False

    # paired timing on a GPU node (docs/measurement.md): interleaved rounds per measurement, the
    # length of one timed batch, CUDA-graph replays instead of launches, and the cores the
    # measuring runners are pinned to: "auto" (a GPU node's last core, every other sandboxed
    # child on the rest), e.g. "0-3", or "none" (kernelband/sandbox/cores.py)
    measure_rounds: int = 20  # at most: a measurement stops after measure_min_rounds once its
    measure_min_rounds: int = 8  # 95% interval's high/low is at most measure_settle_width (0: never)
    measure_settle_width: float = 1.03
    measure_batch_ms: float = 10.0
    measure_graphs: bool = False
    measure_cores: str = "auto"
    # time at most this many of a problem's cases, evenly spread (0: all): a TritonBench-G harness
    # has up to 16 inputs, each timed in every round of both runners, so all of them cost most of
    # a candidate's exclusive GPU time; correctness runs still cover every public case
    measure_max_cases: int = 6
    # a problem's tuning pass (its autotuned kernels' picks, timed alone on the GPU) first compiles
    # every config in a shared turn, so the exclusive turn holds the timings only; off until an
    # A/A and a suite on a GPU have measured it (docs/measurement.md)
    measure_compile_before_tuning: bool = False
    # a performance harness's inputs are drawn on the runner's GPU (torch's default device while
    # get_input_tensors runs) rather than on the host and copied (kernelband/profile/perf_harness.py
    # `draw_inputs`); false: on the host, as the harness is written
    measure_inputs_on_device: bool = True
    # on a GPU node the timed rounds start without waiting for the candidate's correctness
    # check, which runs beside them; a refused candidate's measurement is dropped
    # (kernelband/scheduling/candidate_tasks.py). Off until a suite and an A/A on a GPU measure it
    measure_before_verdict: bool = False
    # on a GPU node a candidate's correctness check (public cases) runs in its timing runner,
    # before its first prepare, instead of a sandboxed child of its own that imports and compiles
    # it again (kernelband/profile/runner_check.py; measured in docs/measurement.md); false: the
    # child, beside the runner's start
    check_in_runner: bool = True
    # the same for an original's own step (checked against itself in its timing runner, which
    # loaded only the problem module). Off until a suite and an A/A on a GPU measure it
    check_original_in_runner: bool = False
    # an exclusive GPU turn (timed rounds, a tuning pass) stops the node's other sandboxed
    # processes (SIGSTOP, SIGCONT after) instead of waiting for the shared turns to end
    # (kernelband/sandbox/preempt.py; measured in docs/measurement.md); false: it waits
    gpu_preempt_shared: bool = True
    # originals' runners a GPU worker keeps warm (one per problem), and so the jobs an embedded
    # GPU suite runs at once: each problem's original then stays warm between its candidates
    warm_originals: int = 8
    # candidate runners a GPU worker starts ahead, one per problem it measured last, with the
    # device context made and the problem's original and harness inputs loaded (0: none)
    spare_runners: int = 8

    # scheduler
    lease_s: float = 300.0
    # workers beat this often (KERNELBAND_HEARTBEAT_INTERVAL_S); the leader counts a worker
    # gone once it missed this many beats, and sends its attempts again at once
    heartbeat_interval_s: float = 5.0
    worker_missed_beats: int = 3
    queue_timeout_s: float = 3600.0  # a try nobody took from a busy queue is re-sent after this
    max_tries: int = 3
    # tasks an embedded suite runs at once per GPU queue: a paired measurement's timed rounds
    # still have the GPU alone (kernelband/sandbox/gpu_lock.py takes it exclusively), while
    # the other tasks' checks, runner starts and compiles overlap everything else
    gpu_tasks_per_device: int = 3
    poll_interval_s: float = 0.2
    # the leader starts queued jobs, expires leases and finishes tracks at most this often
    # (about 6 ms of reads a pass; a fleet's scheduler runs about ten passes a second); every
    # scheduler does so while its passes run back to back (each stopped at a bound)
    housekeeping_interval_s: float = 0.5
    # fair share: attempts in flight per team, and queued jobs started per team per cycle
    max_in_flight_per_team: int = 32
    max_job_starts_per_team: int = 4
    # jobs of one team running at once (0: no cap). A suite on one GPU finishes its jobs sooner
    # one after another than all together, and its GPU worker keeps the original's runner warm
    # for only so many problems (kernelband/profile/paired_runners.py): the embedded suite on a
    # GPU target runs `warm_originals` at a time unless this is set
    max_running_jobs_per_team: int = 0
    # bounded passes: new pulls selected and attempts sent per scheduler pass (the rest wait
    # for the next pass, which runs back to back and serves them first), so a pass stays short
    # however many slots are free. The leader's passes also stop choosing pulls once they have
    # spent `select_budget_ms` on it (checked after each track; the reads before, which grow
    # with the database, are not counted): a count alone fits one machine's speed, a time
    # budget every machine's. Embedded mode has no time bound, so a seeded run selects the
    # same pulls on any machine. A pass also pays a fixed cost (its reads, row writes and
    # commits: about 12 ms of CPU at 100 jobs x 1,000 candidates on a 2-core machine), which
    # a longer selection spreads over more pulls. There (bench/RESULTS.md, 30 s runs at load
    # 2.5-3.5): 6 ms chose 18-20 pulls a pass at 1.80-2.12 ms of scheduler CPU per pull and
    # 0.86-1.00 ms of Postgres CPU, select+dispatch p99 34-56 ms; 8 ms, 26-29 pulls at
    # 1.63-1.89 and 0.75-0.85, p99 40-53; 10 ms, 36-39 pulls at 1.54-1.73 and 0.68-0.75, p99
    # 44-53. Fewer sends per pass (128) kept fewer of 1,000 simulated GPUs busy (90-95%
    # against 98-99.5%).
    max_pulls_per_pass: int = 256
    max_dispatch_per_pass: int = 256
    select_budget_ms: float = 10.0
    # the leader keeps its tracks' policy states in memory and writes one back at most this
    # often (and when the track stops or the leader hands over); a new leader rebuilds the
    # rest from the event log (kernelband/scheduling/replay.py). 0: with every change
    state_writeback_s: float = 5.0

    # api
    max_source_bytes: int = 256 * 1024
    max_concurrent_jobs_per_team: int = 20  # a suite counts as one job
    max_concurrent_suites_per_team: int = 2
    bootstrap_token: SecretStr = SecretStr("")
    # set: GET /metrics answers only `Authorization: Bearer <this>` (job counts of every team)
    metrics_token: SecretStr = SecretStr("")
    # the key of public ids (kernelband/public_ids.py); empty: a random key kept in the
    # database. Set it once: a new key changes every id teams have seen
    id_key: SecretStr = SecretStr("")
    # server-sent events: how often an open stream looks for new events, and the idle
    # comment that keeps proxies from closing it (docs/deploy.md)
    sse_poll_s: float = 0.5
    sse_heartbeat_s: float = 15.0
    # webhooks: tries per delivery (exponential backoff between them) and the request timeout
    webhook_max_tries: int = 6
    webhook_timeout_s: float = 10.0

    @property
    def effective_database_url(self) -> str:
        """The database to use; in production it must be given (workers never ask for it)."""
        if self.database_url:
            return self.database_url
        if self.environment == "production":
            raise ValueError(
                "KERNELBAND_DATABASE_URL must be set in production for the api, scheduler and "
                "migrations (the SQLite default is for the embedded mode only; workers need none)"
            )
        return f"sqlite:///{(self.data_dir / 'kernelband.sqlite').resolve()}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
