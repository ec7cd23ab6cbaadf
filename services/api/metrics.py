"""Prometheus metrics: request counts and latency per route, jobs per status at scrape time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency, labelled by route template."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)


class MetricsMiddleware:
    """Count and time every HTTP request by route template (not raw path: ids vary).

    A request that raised is counted as 500, the status the error middleware sends.
    """

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")  # the router sets it
            self.metrics.observe(scope["method"], route, status, time.perf_counter() - start)
