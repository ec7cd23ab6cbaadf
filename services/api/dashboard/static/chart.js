"use strict";
// Inline SVG chart: speedup over iterations, one colour per target; dots = children (a paired
// speedup's 95% interval as a vertical bar through its dot), line = best so far.
const kbChart = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fde", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#0b7285"];
  const W = 760, H = 300, L = 56, R = 150, T = 16, B = 40;

  function node(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  const hasInterval = (p) => p.low !== null && p.low !== undefined && p.high !== null && p.high !== undefined;

  function render(container, series) {
    const xs = series.flatMap((s) => s.points.map((p) => p.x)).concat([1]);
    const ys = series.flatMap((s) => s.points.map((p) => p.y).concat(s.best.map((p) => p.y))).concat([1])
      .concat(series.flatMap((s) => s.points.filter(hasInterval).flatMap((p) => [p.low, p.high])));
    const xMax = Math.max(...xs), yMax = Math.max(...ys) * 1.1, yMin = Math.min(0, ...ys);
    const sx = (x) => L + (x / xMax) * (W - L - R);
    const sy = (y) => H - B - ((y - yMin) / (yMax - yMin || 1)) * (H - T - B);
    const svg = node("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
    svg.append(node("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" }));
    svg.append(node("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" }));
    for (let i = 0; i <= 4; i++) {
      const y = yMin + ((yMax - yMin) * i) / 4;
      svg.append(node("text", { x: L - 6, y: sy(y) + 4, "text-anchor": "end", "font-size": 11 }, y.toFixed(2) + "x"));
    }
    svg.append(node("line", { x1: L, y1: sy(1), x2: W - R, y2: sy(1), stroke: "#bbb", "stroke-dasharray": "4 3" }));
    svg.append(node("text", { x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle", "font-size": 12 }, "iteration (child index in track)"));
    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      const path = s.best.map((p, j) => `${j ? "L" : "M"}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join(" ");
      if (path) svg.append(node("path", { d: path, fill: "none", stroke: color, "stroke-width": 2, class: "best-line" }));
      for (const p of s.points.filter(hasInterval)) {
        svg.append(node("line", { x1: sx(p.x), y1: sy(p.low), x2: sx(p.x), y2: sy(p.high), stroke: color, "stroke-width": 1.5, class: "ci", "data-candidate": p.id }));
      }
      for (const p of s.points) {
        const dot = node("circle", { cx: sx(p.x), cy: sy(p.y), r: 3.5, fill: color, "fill-opacity": 0.55, class: "pt", "data-candidate": p.id });
        dot.append(node("title", {}, `candidate ${p.id}: ${p.text || p.y.toFixed(3) + "x"} (${s.label})`));
        svg.append(dot);
      }
      svg.append(node("text", { x: W - R + 10, y: T + 14 + i * 18, fill: color, "font-size": 12 }, `${s.target} (${s.label})`));
    });
    container.replaceChildren(svg);
  }
  return { render };
})();
