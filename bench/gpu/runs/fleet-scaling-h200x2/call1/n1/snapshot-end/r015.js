// Shared helpers: the team token lives in sessionStorage; every fetch sends it as a Bearer token.
"use strict";
const kb = (() => {
  const KEY = "kb_token";
  const token = () => sessionStorage.getItem(KEY);
  const signIn = (t) => sessionStorage.setItem(KEY, t);
  const signOut = () => { sessionStorage.removeItem(KEY); location.href = "/ui/signin"; };

  // GET answers by path with their ETag: a poll sends If-None-Match and a 304 (nothing
  // changed) reuses the stored answer, so an unchanged job or fleet costs the server one small read.
  const tagged = new Map();

  async function api(path, options = {}) {
    const headers = Object.assign({ Authorization: "Bearer " + (token() || "") }, options.headers || {});
    if (options.body && !headers["Content-Type"]) headers["Content-Type"] = "application/json";
    const isGet = !options.method || options.method === "GET";
    const kept = isGet ? tagged.get(path) : undefined;
    if (kept) headers["If-None-Match"] = kept.etag;
    const response = await fetch(path, Object.assign({ cache: "no-store" }, options, { headers }));
    if (response.status === 401) { signOut(); throw new Error("not signed in"); }
    if (response.status === 304 && kept) return kept.data;
    const text = await response.text();
    const data = text && (response.headers.get("content-type") || "").includes("json") ? JSON.parse(text) : text;
    if (!response.ok) {
      const msg = (data && data.message) || (data && data.detail && JSON.stringify(data.detail)) || response.statusText;
      throw new Error(msg);
    }
    const etag = response.headers.get("ETag");
    if (isGet && etag) tagged.set(path, { etag, data }); else tagged.delete(path);
    return data;
  }

  // Small DOM builder: el("td", {class: "x"}, ["text", child]).
  function el(tag, attrs = {}, children = []) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "onclick") node.addEventListener("click", v); else if (v !== null && v !== undefined) node.setAttribute(k, v);
    }
    for (const c of [].concat(children)) node.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
    return node;
  }
  const label = (name) => el("span", { class: "label " + (name || "unknown") }, [name || "unlabelled"]);
  const num = (v, digits = 3) => (v === null || v === undefined ? "-" : Number(v).toPrecision(digits));
  function age(iso) {
    if (!iso) return "-";
    const stamp = /[zZ]|[+-]\d\d:?\d\d$/.test(iso) ? iso : iso + "Z";  // SQLite drops the zone: UTC
    const s = Math.max(0, (Date.now() - Date.parse(stamp)) / 1000);
    return s < 90 ? s.toFixed(0) + "s" : s < 5400 ? (s / 60).toFixed(0) + "m" : (s / 3600).toFixed(1) + "h";
  }
  function showError(err) {
    const box = document.getElementById("error");
    box.textContent = String(err.message || err);
    box.hidden = false;
    setTimeout(() => { box.hidden = true; }, 8000);
  }
  function requireToken() {
    if (!token()) { location.href = "/ui/signin"; return false; }
    const badge = document.getElementById("team-badge");
    badge.textContent = "token " + token().slice(0, 11) + "…";
    const out = document.getElementById("signout");
    out.hidden = false;
    out.addEventListener("click", signOut);
    return true;
  }
  return { api, el, label, num, age, showError, requireToken, signIn, token };
})();
