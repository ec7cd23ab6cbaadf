"use strict";
async function refreshFleet() {
  const { el } = kb;
  const data = await kb.api("/v1/fleet");
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
