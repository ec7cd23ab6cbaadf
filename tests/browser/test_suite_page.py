"""The suite page in headless Chromium: metrics, distribution chart, problems, load failures."""

from __future__ import annotations

from typing import Any

import pytest

from kernelband.db import repository, session_scope
from kernelband.db.models import Suite, Track
from kernelband.suite.store import new_suite_id
from tests.browser.conftest import (  # this directory is on sys.path under pytest
    LiveServer,
    shot,
    sign_in,
)

pytestmark = pytest.mark.browser
# (problem, policy, best speedup or None when the original failed); synthetic, label estimated
RESULTS = [("add", "kernelband", 2.0), ("add", "random", 1.0), ("sum", "kernelband", 0.5),
           ("sum", "random", None)]


def seed_suite(server: LiveServer, team: str = "alpha") -> str:
    """A finished two-problem, two-policy suite with one load failure, as the scheduler writes it."""
    suite_id = new_suite_id()
    with session_scope(server.factory) as s:
        owner = repository.get_or_create_team(s, team)
        s.add(Suite(id=suite_id, team_id=owner.id, name="mini", format="native",
                    settings={"targets": ["cpu"], "policies": ["kernelband", "random"],
                              "model": "", "budget": 2, "parallelism": 1, "seed": 0},
                    load_failures=[{"name": "broken", "reason": "no editable region", "line": 3}]))
        for name, policy, speedup in RESULTS:
            problem = repository.get_or_create_problem(
                s, owner.id, name, "native", f"# {name}", {"editable": "X"}, f"{suite_id}{name}")
            job = repository.create_job(s, owner.id, problem.id, ("cpu",), policy=policy,
                                        suite_id=suite_id,
                                        status="completed" if speedup else "failed")
            s.add(Track(job_id=job.id, target="cpu", status="completed" if speedup else "failed",
                        best_speedup=speedup, best_label="estimated",
                        held_out="passed" if speedup else None,
                        reason=None if speedup else "original kernel failed on cpu"))
    return suite_id


def test_suite_page_shows_metrics_chart_problems_and_failures(page: Any,
                                                              live_server: LiveServer) -> None:
    suite_id = seed_suite(live_server)
    page.goto(live_server.url + "/ui/suites")
    page.click(f"#suites-table tr[data-suite-id='{suite_id}'] a")
    page.wait_for_url(f"**/ui/suites/{suite_id}")
    page.wait_for_selector("#metrics-table tbody tr[data-policy='kernelband']")
    row = "#metrics-table tr[data-policy='kernelband'] "
    assert page.inner_text(row + ".correct-pct") == "100.0%"
    assert page.inner_text(row + ".fast1-pct") == "50.0%"
    assert page.inner_text(row + ".fast1-point-pct") == "50.0%"  # the point rule, beside it
    assert page.inner_text(row + ".geomean-correct") == "1.000x"  # sqrt(2.0 * 0.5)
    random_row = "#metrics-table tr[data-policy='random'] "
    assert page.inner_text(random_row + ".correct-pct") == "50.0%"
    assert "estimated" in page.inner_text("#metrics-table")
    assert page.evaluate("document.querySelectorAll('#suite-chart circle.pt').length") == 3
    assert page.evaluate("document.querySelectorAll('#suite-chart line.geomean').length") == 2
    assert "1 not correct" in page.inner_text("#suite-chart")
    assert page.evaluate("document.querySelectorAll('#problems-table tbody tr').length") == 4
    assert "original kernel failed on cpu" in page.inner_text("#problems-table")
    assert "2.00x estimated" in page.inner_text("#problems-table")  # estimates: no interval
    failures = page.inner_text("#failures-table")
    assert "broken" in failures and "no editable region" in failures
    assert page.inner_text("#suite-status") == "finished"
    shot(page, "suite-page")


def test_jobs_page_links_suite_jobs_and_other_teams_see_nothing(
        page: Any, live_server: LiveServer, browser: Any) -> None:
    suite_id = seed_suite(live_server)
    page.goto(live_server.url + "/ui/jobs")
    page.click(f"a.suite-link[href='/ui/suites/{suite_id}'] >> nth=0")
    page.wait_for_url(f"**/ui/suites/{suite_id}")
    other = browser.new_context().new_page()
    sign_in(other, live_server, live_server.other_token)
    other.goto(f"{live_server.url}/ui/suites/{suite_id}")
    other.wait_for_selector("#error:not([hidden])")
    assert suite_id in other.inner_text("#error")
    other.context.close()
