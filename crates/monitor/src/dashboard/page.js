// pog monitor's dashboard: asks /api/dashboard for the JSON every refresh_ms and redraws the
// page in place (no reload: the scroll position and what is open stay), charts drawn here as
// SVG. When the monitor stops answering, a banner says so and the last figures stay, greyed,
// while the page keeps asking.
"use strict";

const COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b"];
const SEVERITY_COLORS = { info: "#2b6cb0", warning: "#c05621", critical: "#c53030" };
const CHART_HEIGHT = 210;
const LANE_HEIGHT = 18;
const MARGIN = { left: 64, right: 14, top: 12, bottom: 24 };

const state = {
  window: null,
  data: null,
  lastAnswer: null,
  timer: null,
  sections: new Map(),
  tiles: new Map(),
};

// ---------- formatting ----------

const pad = (n) => String(n).padStart(2, "0");

// The one clock of the page: chart axes, tooltips, alert markers and the alert table all use it.
function clock(ms, seconds = true) {
  const d = new Date(ms);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return seconds ? `${hm}:${pad(d.getSeconds())}` : hm;
}

function day(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

// A time with its date when it is not today.
function when(ms) {
  return day(ms) === day(Date.now()) ? clock(ms) : `${day(ms)} ${clock(ms)}`;
}

function zone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
  } catch (_) {
    return "local time";
  }
}

function num(v, digits) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  const d = digits !== undefined ? digits : a >= 100 ? 0 : a >= 10 ? 1 : 2;
  return v.toFixed(d);
}

// A value with its unit, scaled to a readable unit.
function fmt(v, unit) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  if (unit === "KB/s") {
    if (Math.abs(v) >= 1e6) return `${num(v / 1e6)} GB/s`;
    if (Math.abs(v) >= 1e3) return `${num(v / 1e3)} MB/s`;
    return `${num(v)} KB/s`;
  }
  if (unit === "MiB" && Math.abs(v) >= 1024) return `${num(v / 1024)} GiB`;
  return unit ? `${num(v)} ${unit}` : num(v, Number.isInteger(v) ? 0 : undefined);
}

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

// ---------- scales ----------

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800].map((s) => s * 1000);

function timeTicks(t0, t1, count) {
  const step = TIME_STEPS.find((s) => (t1 - t0) / s <= count) || TIME_STEPS[TIME_STEPS.length - 1];
  // Aligned to the local clock (the offset of this time zone from UTC).
  const offset = new Date(t0).getTimezoneOffset() * 60000;
  const ticks = [];
  for (let t = Math.ceil((t0 - offset) / step) * step + offset; t <= t1; t += step) ticks.push(t);
  return { ticks, step };
}

function tickLabel(t, step, span) {
  if (span > 2 * 86400000) return `${day(t).slice(5)} ${clock(t, false)}`;
  return step < 60000 ? clock(t) : clock(t, false);
}

// ---------- charts ----------

// Splits a line where samples are missing (a gap longer than five typical steps, at least 10 s).
function segments(points) {
  if (points.length < 2) return [points];
  const gaps = [];
  for (let i = 1; i < points.length; i++) gaps.push(points[i][0] - points[i - 1][0]);
  const typical = gaps.slice().sort((a, b) => a - b)[Math.floor(gaps.length / 2)];
  const limit = Math.max(10000, 5 * typical);
  const out = [[points[0]]];
  for (let i = 1; i < points.length; i++) {
    if (points[i][0] - points[i - 1][0] > limit) out.push([]);
    out[out.length - 1].push(points[i]);
  }
  return out;
}

// The factor and the unit that a chart's tick labels use for values up to `max`: MiB as GiB,
// KB/s as MB/s or GB/s, where they are large enough; other units are left to the title.
function tickUnit(unit, max) {
  if (unit === "MiB") return max >= 1024 ? [1024, "GiB"] : [1, "MiB"];
  if (unit === "KB/s") return max >= 1e6 ? [1e6, "GB/s"] : max >= 1e3 ? [1e3, "MB/s"] : [1, "KB/s"];
  return [1, ""];
}

function yDomain(chart) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of chart.series) for (const p of s.points) { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); }
  for (const l of chart.limits) { lo = Math.min(lo, l.value); hi = Math.max(hi, l.value); }
  if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
  if (chart.unit === "%") { lo = Math.min(lo, 0); hi = Math.max(hi, 100); }
  if (lo >= 0 && lo < (hi - lo) * 0.5) lo = 0;
  const pad = Math.max((hi - lo) * 0.08, Math.abs(hi) * 0.01, 1e-9);
  return [lo === 0 ? 0 : lo - pad, hi + pad];
}

// The charts' time span: the window, or since the monitor started when that is later (at least a
// minute); the history's means reach back before this run.
function span(data) {
  const t1 = data.now_ms;
  const t0 = t1 - data.window_s * 1000;
  if (data.minute_means) return [t0, t1];
  return [Math.max(t0, Math.min(data.started_ms, t1 - 60000)), t1];
}

function chartAlerts(gpu, t0, t1) {
  return gpu.alerts.filter((a) => a.t_ms >= t0 && a.t_ms <= t1);
}

// Draws one chart into its holder (an element of fixed height, so that the page never jumps).
function drawChart(holder, chart, gpu, data) {
  const width = Math.max(260, Math.floor(holder.clientWidth || 440));
  const lanes = chart.kind === "lanes";
  const height = lanes ? MARGIN.top + MARGIN.bottom + chart.series.length * LANE_HEIGHT + 6 : CHART_HEIGHT;
  const [t0, t1] = span(data);
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const x = (t) => MARGIN.left + ((t - t0) / (t1 - t0)) * plotW;
  const parts = [];
  parts.push(`<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(chart.title)}">`);
  parts.push(`<rect class="frame" x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="#fff" stroke="#ccc"/>`);
  const { ticks, step } = timeTicks(t0, t1, Math.max(2, Math.floor(plotW / 75)));
  for (const t of ticks) {
    const X = x(t).toFixed(1);
    parts.push(`<line x1="${X}" x2="${X}" y1="${MARGIN.top}" y2="${MARGIN.top + plotH}" stroke="#eee"/>`);
    // A label near the right edge ends at its tick rather than past the chart.
    const anchor = +X > width - 30 ? "end" : "middle";
    parts.push(`<text class="xtick" data-t="${t}" x="${X}" y="${height - 6}" font-size="11" text-anchor="${anchor}" fill="#555">${tickLabel(t, step, t1 - t0)}</text>`);
  }
  let y = null;
  if (!chart.has_points) {
    const why = gpu.latest ? "not reported" : "no sample yet";
    parts.push(`<text class="not-reported" x="${MARGIN.left + plotW / 2}" y="${MARGIN.top + plotH / 2}" text-anchor="middle" font-size="13" fill="#999" font-style="italic">${why}</text>`);
  } else if (lanes) {
    chart.series.forEach((s, i) => {
      const top = MARGIN.top + 3 + i * LANE_HEIGHT;
      parts.push(`<text x="${MARGIN.left - 4}" y="${top + LANE_HEIGHT / 2 + 4}" font-size="10" text-anchor="end" fill="#555">${esc(s.name)}</text>`);
      const color = COLORS[i % COLORS.length];
      let start = null;
      const pts = s.points;
      for (let k = 0; k <= pts.length; k++) {
        const on = k < pts.length && pts[k][1] >= 0.5;
        if (on && start === null) start = pts[k][0];
        if (!on && start !== null) {
          const end = k < pts.length ? pts[k][0] : pts[k - 1][0];
          const X0 = Math.max(MARGIN.left, x(start));
          const X1 = Math.max(X0 + 1, x(end));
          parts.push(`<rect class="lane" x="${X0.toFixed(1)}" y="${top + 2}" width="${(X1 - X0).toFixed(1)}" height="${LANE_HEIGHT - 5}" fill="${color}" opacity="0.75"/>`);
          start = null;
        }
      }
    });
  } else {
    const [lo, hi] = yDomain(chart);
    y = (v) => MARGIN.top + plotH - ((v - lo) / (hi - lo)) * plotH;
    // Ticks at round numbers of the unit the labels show (GiB, MB/s, …).
    const [scale, shown] = tickUnit(chart.unit, Math.max(Math.abs(lo), Math.abs(hi)));
    const yStep = niceStep((hi - lo) / scale, Math.max(2, Math.floor(plotH / 40)));
    for (let k = Math.ceil(lo / scale / yStep); k * yStep <= hi / scale + 1e-9; k++) {
      const v = k * yStep * scale;
      const Y = y(v).toFixed(1);
      parts.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${Y}" y2="${Y}" stroke="#eee"/>`);
      const digits = yStep >= 1 ? 0 : yStep >= 0.1 ? 1 : 2;
      const label = k === 0 ? "0" : `${(k * yStep).toFixed(digits)}${shown ? ` ${shown}` : ""}`;
      parts.push(`<text class="ytick" x="${MARGIN.left - 5}" y="${(+Y + 4).toFixed(1)}" font-size="11" text-anchor="end" fill="#555">${esc(label)}</text>`);
    }
    chart.limits.forEach((l, i) => {
      const Y = y(l.value).toFixed(1);
      // Labels take turns right above and left below their line, so that two close limits
      // stay readable.
      const [lx, anchor, dy] = i % 2 ? [MARGIN.left + 4, "start", 13] : [MARGIN.left + plotW - 4, "end", -4];
      parts.push(`<g class="limit" data-name="${esc(l.name)}"><line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${Y}" y2="${Y}" stroke="#b7791f" stroke-width="1.5" stroke-dasharray="6 4"/>`);
      parts.push(`<text x="${lx}" y="${(+Y + dy).toFixed(1)}" font-size="11" text-anchor="${anchor}" fill="#975a16">${esc(l.name)}: ${esc(fmt(l.value, chart.unit))}</text></g>`);
    });
    chart.series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      for (const seg of segments(s.points)) {
        if (!seg.length) continue;
        const pts = seg.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
        parts.push(`<polyline class="series" data-series="${esc(s.name)}" points="${pts}" fill="none" stroke="${color}" stroke-width="1.8" stroke-linejoin="round"/>`);
      }
    });
  }
  for (const a of chartAlerts(gpu, t0, t1)) {
    const X = x(a.t_ms).toFixed(1);
    const color = SEVERITY_COLORS[a.severity] || "#555";
    parts.push(`<g class="alert-marker" data-t="${a.t_ms}" data-severity="${esc(a.severity)}"><title>${esc(`${clock(a.t_ms)} ${a.severity} ${a.kind}: ${a.message}`)}</title>`);
    parts.push(`<line x1="${X}" x2="${X}" y1="${MARGIN.top}" y2="${MARGIN.top + plotH}" stroke="${color}" stroke-width="1.5" opacity="0.8"/>`);
    parts.push(`<path d="M${X} ${MARGIN.top + 9} l-5 -9 h10 z" fill="${color}"/></g>`);
  }
  parts.push(`<line class="cursor" x1="0" x2="0" y1="${MARGIN.top}" y2="${MARGIN.top + plotH}" stroke="#333" stroke-dasharray="2 2" visibility="hidden"/>`);
  parts.push("</svg>");
  holder.style.height = `${height}px`;
  holder.innerHTML = parts.join("");
  holder._chart = { chart, gpu, t0, t1, x, plotW, lanes };
}

// The nearest point of a line to time t (points oldest first).
function nearest(points, t) {
  let lo = 0;
  let hi = points.length - 1;
  if (hi < 0) return null;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (points[mid][0] < t) lo = mid;
    else hi = mid;
  }
  return Math.abs(points[lo][0] - t) <= Math.abs(points[hi][0] - t) ? points[lo] : points[hi];
}

// The last point at or before time t (points oldest first).
function atOrBefore(points, t) {
  let found = null;
  let lo = 0;
  let hi = points.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (points[mid][0] <= t) {
      found = points[mid];
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

function showTooltip(holder, event) {
  const info = holder._chart;
  const tip = document.getElementById("tooltip");
  if (!info) return;
  const svg = holder.querySelector("svg");
  const box = svg.getBoundingClientRect();
  const px = event.clientX - box.left;
  if (px < MARGIN.left || px > MARGIN.left + info.plotW) {
    hideTooltip(holder);
    return;
  }
  const t = info.t0 + ((px - MARGIN.left) / info.plotW) * (info.t1 - info.t0);
  const slack = (8 / info.plotW) * (info.t1 - info.t0);
  const lines = [`<div class="t">${esc(when(t))}</div>`];
  info.chart.series.forEach((s, i) => {
    if (info.lanes) {
      // A lane holds its value from one change to the next.
      const p = atOrBefore(s.points, t);
      if (p && t <= s.points[s.points.length - 1][0]) lines.push(`<div><span style="color:${COLORS[i % COLORS.length]}">■</span> ${esc(s.name)}: ${p[1] >= 0.5 ? "active" : "off"}</div>`);
      return;
    }
    const p = nearest(s.points, t);
    if (!p || Math.abs(p[0] - t) > Math.max(slack, 15000)) return;
    const value = fmt(p[1], info.chart.unit);
    lines.push(`<div><span style="color:${COLORS[i % COLORS.length]}">■</span> ${esc(s.name)}: ${esc(value)}</div>`);
  });
  for (const l of info.lanes ? [] : info.chart.limits) lines.push(`<div>– ${esc(l.name)}: ${esc(fmt(l.value, info.chart.unit))}</div>`);
  for (const a of info.gpu.alerts) {
    if (Math.abs(a.t_ms - t) <= slack) lines.push(`<div style="color:#feb2b2">▲ ${esc(clock(a.t_ms))} ${esc(a.severity)} ${esc(a.kind)}: ${esc(a.message)}</div>`);
  }
  if (lines.length === 1) lines.push("<div>no sample here</div>");
  tip.innerHTML = lines.join("");
  tip.hidden = false;
  const left = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  tip.style.left = `${Math.max(4, left)}px`;
  tip.style.top = `${Math.max(4, event.clientY - tip.offsetHeight - 10)}px`;
  const cursor = svg.querySelector(".cursor");
  cursor.setAttribute("x1", px);
  cursor.setAttribute("x2", px);
  cursor.setAttribute("visibility", "visible");
}

function hideTooltip(holder) {
  document.getElementById("tooltip").hidden = true;
  const cursor = holder.querySelector(".cursor");
  if (cursor) cursor.setAttribute("visibility", "hidden");
}

// ---------- the page's parts ----------

function current(gpu) {
  const s = gpu.latest || {};
  const lim = gpu.limits;
  const rows = [
    ["GPU temperature", fmt(s.temp_gpu_c, "°C") + (lim.slowdown_c ? ` / ${fmt(lim.slowdown_c, "°C")}` : "")],
    ["memory temperature", fmt(s.temp_mem_c, "°C")],
    ["power", fmt(s.power_w, "W") + (lim.power_limit_w ? ` / ${fmt(lim.power_limit_w, "W")}` : "")],
    ["GPU utilization", fmt(s.util_gpu_pct, "%")],
    ["memory utilization", fmt(s.util_mem_pct, "%")],
    ["memory used", fmt(s.mem_used_mib, "MiB")],
    ["SM clock", fmt(s.sm_clock_mhz, "MHz")],
    ["memory clock", fmt(s.mem_clock_mhz, "MHz")],
    ["PCIe TX / RX", `${fmt(s.pcie_tx_kbs, "KB/s")} / ${fmt(s.pcie_rx_kbs, "KB/s")}`],
    ["fan", s.fan_pct === undefined || s.fan_pct === null ? "not reported" : fmt(s.fan_pct, "%")],
    ["processes", s.processes === undefined || s.processes === null ? "not reported" : String(s.processes)],
    ["throttle reasons", gpu.clock_reasons_active ? gpu.clock_reasons_active.join(", ") || "none" : "not reported"],
    ["anomaly score", gpu.anomaly_score === null ? "–" : num(gpu.anomaly_score, 3)],
    ["alerts open", String(gpu.alerts_firing)],
    ["last sample", gpu.latest_ms ? when(gpu.latest_ms) : "none yet"],
  ];
  const box = el("div", { class: "current" });
  for (const [k, v] of rows) {
    box.append(el("div", { "data-key": k }, el("span", { class: "k", text: k }), el("span", { class: `v${v === "not reported" ? " not-reported" : ""}`, text: v })));
  }
  return box;
}

function counterPanel(title, counters, extra) {
  const panel = el("div", { class: "panel", "data-panel": title }, el("h3", { text: title }));
  const table = el("table");
  for (const c of counters) {
    const total = c.total === null ? el("span", { class: "not-reported", text: "not reported" }) : String(c.total);
    const inc = c.increase === null || c.increase === undefined ? "" : c.increase > 0 ? el("span", { class: "up", text: `+${c.increase} in window` }) : "+0 in window";
    table.append(el("tr", {}, el("td", { text: c.name }), el("td", { class: "num" }, total), el("td", {}, inc)));
  }
  panel.append(table);
  if (extra) panel.append(extra);
  return panel;
}

function panels(gpu) {
  const box = el("div", { class: "panels" });
  const of = (name) => gpu.counters.filter((c) => c.panel === name);
  box.append(counterPanel("ECC and memory repair", of("ECC")));
  const pcie = gpu.charts.find((c) => c.id === "pcie");
  const last = (name) => {
    const s = pcie && pcie.series.find((x) => x.name === name);
    return s && s.points.length ? fmt(s.points[s.points.length - 1][1], "KB/s") : null;
  };
  const through = el("table");
  for (const name of ["TX", "RX"]) {
    const v = last(name);
    through.append(el("tr", {}, el("td", { text: `throughput ${name}` }), el("td", { class: "num" }, v === null ? el("span", { class: "not-reported", text: "not reported" }) : v)));
  }
  box.append(counterPanel("PCIe", of("PCIe"), through));
  const xidAlerts = gpu.alerts.filter((a) => a.kind === "xid").slice(0, 5);
  const list = el("div");
  for (const a of xidAlerts) list.append(el("div", { class: "up", text: `${clock(a.t_ms)} ${a.message}` }));
  box.append(counterPanel("XID errors", of("XID"), list));
  const s = gpu.latest || {};
  const proc = el("div", { class: "panel", "data-panel": "processes" }, el("h3", { text: "processes" }));
  proc.append(s.processes === undefined || s.processes === null
    ? el("div", { class: "not-reported", text: "not reported" })
    : el("div", { text: `${s.processes} process${s.processes === 1 ? "" : "es"} using the GPU` }));
  box.append(proc);
  return box;
}

function section(gpu) {
  let entry = state.sections.get(gpu.uuid);
  if (!entry) {
    const root = el("section", { class: "gpu", id: `gpu-${gpu.index}`, "data-uuid": gpu.uuid });
    const head = el("h2");
    const now = el("div");
    const charts = el("div", { class: "charts" });
    const more = el("div");
    root.append(head, now, charts, more);
    document.getElementById("gpus").append(root);
    entry = { root, head, now, charts, more, holders: new Map() };
    state.sections.set(gpu.uuid, entry);
  }
  entry.head.replaceChildren(
    `GPU ${gpu.index} — ${gpu.model_name} `,
    el("span", { class: `badge ${gpu.status.replace(" ", "-")}`, text: gpu.status }),
    " ",
    el("small", { text: `${gpu.uuid} on ${gpu.hostname}${gpu.pci_bus_id ? ` · ${gpu.pci_bus_id}` : ""}${gpu.driver_version ? ` · driver ${gpu.driver_version}` : ""}` }),
  );
  entry.now.replaceChildren(current(gpu));
  for (const chart of gpu.charts) {
    let h = entry.holders.get(chart.id);
    if (!h) {
      const legend = el("span", { class: "legend" });
      const title = el("div", { class: "title" });
      const holder = el("div", { class: "plot" });
      holder.style.height = `${CHART_HEIGHT}px`;
      holder.addEventListener("mousemove", (e) => showTooltip(holder, e));
      holder.addEventListener("mouseleave", () => hideTooltip(holder));
      const box = el("div", { class: "chart", "data-chart": chart.id }, title, holder);
      entry.charts.append(box);
      h = { title, legend, holder };
      entry.holders.set(chart.id, h);
    }
    h.title.replaceChildren(`${chart.title}${chart.unit ? ` (${chart.unit === "KB/s" ? "bytes/s" : chart.unit})` : ""}`, h.legend);
    h.legend.replaceChildren(...(chart.kind === "lanes" ? [] : chart.series.flatMap((s, i) => [el("i", { style: `background:${COLORS[i % COLORS.length]}` }), s.name])));
    drawChart(h.holder, chart, gpu, state.data);
  }
  entry.more.replaceChildren(panels(gpu));
  return entry;
}

function tile(gpu) {
  let t = state.tiles.get(gpu.uuid);
  if (!t) {
    t = el("a", { class: "tile", "data-uuid": gpu.uuid });
    document.getElementById("overview").append(t);
    state.tiles.set(gpu.uuid, t);
  }
  const s = gpu.latest || {};
  t.href = `#gpu-${gpu.index}`;
  t.className = `tile status-${gpu.status.replace(" ", "-")}`;
  t.replaceChildren(
    el("div", { class: "name" }, `GPU ${gpu.index} `, el("span", { class: `badge ${gpu.status.replace(" ", "-")}`, text: gpu.status })),
    el("div", { class: "sub", text: `${gpu.model_name} · ${gpu.hostname}` }),
    el("div", { class: "vals" },
      el("span", { text: `temp ${fmt(s.temp_gpu_c, "°C")}` }),
      el("span", { text: gpu.limits.power_limit_w && Number.isFinite(s.power_w)
        ? `power ${num(s.power_w)} / ${num(gpu.limits.power_limit_w, 0)} W`
        : `power ${fmt(s.power_w, "W")}` }),
      el("span", { text: `util ${fmt(s.util_gpu_pct, "%")}` }),
      el("span", { text: `mem ${fmt(s.mem_used_mib, "MiB")}` }),
      el("span", { text: `SM ${fmt(s.sm_clock_mhz, "MHz")}` }),
      el("span", { text: `alerts open ${gpu.alerts_firing}` }),
    ),
  );
}

function alertsTable(data) {
  const body = document.querySelector("#alerts tbody");
  const rows = data.alerts.map((a) =>
    el("tr", { class: a.severity, "data-t": String(a.t_ms) },
      el("td", { class: "time", title: new Date(a.t_ms).toISOString(), text: when(a.t_ms) }),
      el("td", {}, el("a", { href: `#gpu-${a.gpu}`, text: String(a.gpu) })),
      el("td", { class: "sev", text: a.severity }),
      el("td", { text: a.kind }),
      el("td", { text: a.message }),
      el("td", { text: a.cause }),
      el("td", { text: a.check }),
    ));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "7", class: "not-reported", text: "no alert" })));
  body.replaceChildren(...rows);
}

function windows(data) {
  const nav = document.getElementById("windows");
  nav.replaceChildren(...data.windows.map((w) => {
    const b = el("button", { type: "button", "data-seconds": String(w.seconds), text: w.label });
    if (w.seconds === data.window_s) b.className = "active";
    b.addEventListener("click", () => {
      state.window = w.seconds;
      history.replaceState(null, "", `?window=${w.seconds}`);
      refresh();
    });
    return b;
  }));
}

function render(data) {
  state.data = data;
  const y = window.scrollY;
  windows(data);
  const n = data.gpus.length;
  document.getElementById("status-line").textContent =
    `${n} GPU${n === 1 ? "" : "s"} · last sample ${data.gpus.length ? when(data.now_ms) : "none yet"} · ` +
    `last ${data.window_label}${data.minute_means ? " (1-minute means)" : ""}` +
    `${!data.minute_means && data.now_ms - data.started_ms < data.window_s * 1000 ? `, monitor started ${when(data.started_ms)}` : ""}` +
    ` · times in ${zone()}`;
  const seen = new Set(data.gpus.map((g) => g.uuid));
  for (const [uuid, entry] of state.sections) if (!seen.has(uuid)) { entry.root.remove(); state.sections.delete(uuid); }
  for (const [uuid, t] of state.tiles) if (!seen.has(uuid)) { t.remove(); state.tiles.delete(uuid); }
  if (!n) document.getElementById("overview").textContent = "no GPU sampled yet";
  else if (!state.tiles.size) document.getElementById("overview").textContent = "";
  for (const gpu of data.gpus) {
    tile(gpu);
    section(gpu);
  }
  alertsTable(data);
  // Redrawn in place: the page keeps where it was.
  if (window.scrollY !== y) window.scrollTo(0, y);
}

function redraw() {
  if (!state.data) return;
  for (const gpu of state.data.gpus) {
    const entry = state.sections.get(gpu.uuid);
    if (!entry) continue;
    for (const chart of gpu.charts) {
      const h = entry.holders.get(chart.id);
      if (h) drawChart(h.holder, chart, gpu, state.data);
    }
  }
}

// ---------- the monitor's state ----------

function banner(kind, text) {
  const b = document.getElementById("banner");
  if (!kind) {
    b.hidden = true;
    document.body.classList.remove("stopped");
    return;
  }
  b.className = kind;
  b.textContent = text;
  b.hidden = false;
  document.body.classList.toggle("stopped", kind === "stopped");
}

async function refresh() {
  clearTimeout(state.timer);
  const every = state.data ? state.data.refresh_ms : 2000;
  try {
    const window_ = state.window === null ? "" : `?window=${encodeURIComponent(state.window)}`;
    const answer = await fetch(`/api/dashboard${window_}`, { cache: "no-store" });
    if (!answer.ok) {
      const why = (await answer.text()).slice(0, 300);
      banner("error", `The monitor answered an error (HTTP ${answer.status}): ${why}. Retrying every ${every / 1000} s.`);
    } else {
      const data = await answer.json();
      state.lastAnswer = Date.now();
      banner(null);
      render(data);
    }
  } catch (e) {
    const since = state.lastAnswer ? `since ${when(state.lastAnswer)}` : "since the page loaded";
    const last = state.data && state.data.gpus.length ? ` (its last sample: ${when(state.data.now_ms)})` : "";
    banner("stopped", `Monitor stopped: no answer from the monitor ${since}${last}. The figures below are its last; retrying every ${every / 1000} s.`);
  }
  state.timer = setTimeout(refresh, every);
}

function start() {
  const w = Number(new URLSearchParams(location.search).get("window"));
  state.window = Number.isFinite(w) && w > 0 ? w : null;
  let pending = null;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(redraw, 100);
  });
  refresh();
}

start();
