"use strict";
// The headline: what the service sells, per target, over the window the API chose.
function showThroughput(throughput) {
  const { el } = kb;
  const rows = throughput.targets.map((t) => el("tr", { "data-target": t.target }, [
    el("td", {}, [t.target, ...(t.estimated ? [el("span", { class: "label estimated" }, ["estimated, no GPU"])] : [])]),
    el("td", {}, [String(t.judged)]),
    el("td", { title: t.judged + " x 3600 / (" + t.devices + " x " + t.active_s.toFixed(0) + " s)" },
      [t.per_hour.toFixed(1) + " per " + t.unit]),
    el("td", {}, [t.busy_pct.toFixed(0) + "%"]),
    el("td", {}, [String(t.devices)]),
    el("td", {}, [(t.active_s / 60).toFixed(1) + " min"]),
  ]));
  const minutes = Math.round(throughput.window_s / 60);
  const span = throughput.until
    ? "last " + (minutes === 60 ? "hour" : minutes + " min") + " up to " + new Date(Date.parse(throughput.until)).toLocaleTimeString()
    : "no heartbeat yet";
  document.querySelector("#throughput-table tbody").replaceChildren(...(rows.length ? rows
    : [el("tr", {}, [el("td", { colspan: "6", class: "muted" },
      [throughput.until ? "no attempt finished in the " + span : span])])]));
  document.getElementById("throughput-span").textContent = span;
}
// /ui/fleet?window_s=1800 asks the API for another window (the plain poll: the last hour).
const fleetWindow = new URLSearchParams(location.search).get("window_s");
const fleetPath = "/v1/fleet" + (fleetWindow ? "?window_s=" + encodeURIComponent(fleetWindow) : "");
async function refreshFleet() {
  const { el } = kb;
  const data = await kb.api(fleetPath);
  showThroughput(data.throughput);
  const workers = [...data.workers].sort((a, b) => String(a.target).localeCompare(String(b.target)));
  // gone: recomputed on every refresh (a 304 answer keeps the last body; time moves on)
  const gone = (w) => w.status === "gone" || (w.gone_at && Date.parse(w.gone_at) < Date.now());
  document.querySelector("#workers-table tbody").replaceChildren(...workers.map((w) => el("tr", gone(w) ? { class: "muted" } : {}, [
    el("td", {}, [w.target || "-"]), el("td", {}, [w.name]), el("td", {}, [w.queue]),
    el("td", {}, [w.gpu_name || "-"]), el("td", {}, [w.isolation || "-"]),
    el("td", {}, [w.last_heartbeat ? kb.age(w.last_heartbeat) : w.heartbeat_age_s.toFixed(1) + " s"]),
    el("td", {}, [gone(w) ? "gone since " + new Date(Date.parse(w.gone_at)).toLocaleTimeString()
      : (w.current_attempt_id === null ? "idle" : "attempt " + w.current_attempt_id)]),
  ])));
  document.querySelector("#queues-table tbody").replaceChildren(...data.queues.map((q) => el("tr", {}, [
    el("td", {}, [q.queue]), el("td", {}, [String(q.depth)]), el("td", {}, [q.source]),
  ])));
  document.getElementById("fleet-updated").textContent = "updated " + new Date().toLocaleTimeString()
    + (data.workers.length ? "" : " · no worker has sent a heartbeat (embedded mode runs tasks in-process)");
}
if (kb.requireToken()) {
  const loop = () => refreshFleet().catch(kb.showError).finally(() => setTimeout(loop, 3000));
  loop();
}
