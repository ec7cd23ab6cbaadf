"""Prometheus metrics: request counts and latency per route, jobs per status at scrape time."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import Request
from starlette.responses import Response

from kernelband.db.models import JOB_STATUSES, Job


class JobStatusCollector(Collector):
    """Reads job counts per status from the database at each scrape."""

    def __init__(self, factory: Callable[[], sessionmaker[Session] | None]) -> None:
        self._factory = factory

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily("kernelband_jobs", "Jobs per status", labels=["status"])
        factory = self._factory()
        counts: dict[str, int] = {}
        if factory is not None:
            with factory() as session:
                stmt = select(Job.status, func.count()).group_by(Job.status)
                counts = {str(s): int(n) for s, n in session.execute(stmt).all()}
        for status in JOB_STATUSES:
            gauge.add_metric([status], counts.get(status, 0))
        yield gauge


class ApiMetrics:
    """One registry per app, so several apps (tests) never clash on metric names."""

    def __init__(self, factory: Callable[[], sessionmaker[Session] | None]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "kernelband_api_requests", "HTTP requests", ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "kernelband_api_request_seconds", "HTTP request latency", ["method", "route"],
            registry=self.registry,
        )
        self.registry.register(JobStatusCollector(factory))

    async def middleware(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """Count and time every request, labelled by route template (not raw path: ids vary)."""
        start = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        self.requests.labels(request.method, path, str(response.status_code)).inc()
        self.latency.labels(request.method, path).observe(time.perf_counter() - start)
        return response
