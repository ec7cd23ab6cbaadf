"""Suites: a whole benchmark directory as one campaign (one job per problem and policy)."""

from kernelband.suite.export import metrics_csv, to_csv, to_json
from kernelband.suite.metrics import ProblemResult, SuiteMetric, geometric_mean, suite_metrics
from kernelband.suite.model import LoadFailure, SuiteReport, SuiteSettings
from kernelband.suite.sources import (
    SuiteSource,
    SuiteSourceError,
    attach_perf_dir,
    read_archive,
    read_directory,
)
from kernelband.suite.store import (
    SuiteNotFoundError,
    create_suite,
    get_suite,
    load_sources,
    suite_report,
)

__all__ = [
    "LoadFailure",
    "ProblemResult",
    "SuiteMetric",
    "SuiteNotFoundError",
    "SuiteReport",
    "SuiteSettings",
    "SuiteSource",
    "SuiteSourceError",
    "attach_perf_dir",
    "create_suite",
    "geometric_mean",
    "get_suite",
    "load_sources",
    "metrics_csv",
    "read_archive",
    "read_directory",
    "suite_metrics",
    "suite_report",
    "to_csv",
    "to_json",
]
