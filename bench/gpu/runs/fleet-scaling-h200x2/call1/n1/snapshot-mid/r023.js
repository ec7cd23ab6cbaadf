"use strict";
// Suites page: the team's suites with their progress, polled every 5 s.
async function refreshSuites() {
  const { el } = kb;
  const suites = await kb.api("/ui/api/suites");
  const rows = suites.map((s) => el("tr", { "data-suite-id": s.suite_id }, [
    el("td", {}, [el("a", { href: "/ui/suites/" + encodeURIComponent(s.suite_id) }, [s.suite_id])]),
    el("td", {}, [s.name || "-"]), el("td", {}, [s.format]),
    el("td", {}, [s.jobs_finished + " / " + s.jobs]), el("td", {}, [String(s.load_failures)]),
    el("td", {}, [kb.age(s.created_at)]),
  ]));
  document.querySelector("#suites-table tbody").replaceChildren(...rows);
  document.getElementById("suites-updated").textContent = suites.length + " suites · updated " + new Date().toLocaleTimeString();
}

if (kb.requireToken()) {
  const loop = () => refreshSuites().catch(kb.showError).finally(() => setTimeout(loop, 5000));
  loop();
}
