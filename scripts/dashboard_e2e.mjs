// The dashboard end to end in headless Chromium (issues 13 and 26): loads the page of a running
// `pog monitor run` watching several GPUs and checks the overview lists each GPU, current values,
// charts with limit lines, alert markers on the same clock as the alert table, tooltips, panels
// (ECC, PCIe, XID, processes; "not reported" where the traces carry nothing), charts that use
// the screen's width, updates without a reload (the scroll position kept), an error answer shown
// and cleared, and, once the monitor is killed, the "monitor stopped" banner instead of the
// browser's error page. Saves screenshots.
// Driven by scripts/dashboard_e2e.sh.
//
// node dashboard_e2e.mjs URL SCREENSHOT_DIR MONITOR_PID GPUS
import { createRequire } from "node:module";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(join(process.env.PLAYWRIGHT_HOME, "package.json"));
const { chromium } = require("playwright-core");
const [url, shots, monitorPid, gpuArg] = process.argv.slice(2);
const gpus = Number(gpuArg);

// A fresh profile each run (playwright passes it as --user-data-dir).
const browser = await chromium.launchPersistentContext(
  mkdtempSync(join(tmpdir(), "pog-chromium-")),
  {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1340, height: 900 },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  },
);
let [passed, failed] = [0, 0];
const check = (ok, what) => {
  console.log(`${ok ? "ok" : "FAILED"}: ${what}`);
  if (ok) passed += 1;
  else failed += 1;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Points drawn on every line of the page.
const points = () =>
  [...document.querySelectorAll("polyline.series")]
    .map((p) => (p.getAttribute("points") || "").trim().split(/\s+/).filter(Boolean).length)
    .reduce((a, b) => a + b, 0);

const signal = (mean, max) => ({ min: mean - 10, mean, max, n: 400 });
const health = (over) => ({
  recorded_at_ms: Date.now() - 20000, from_ms: Date.now() - 320000, to_ms: Date.now() - 20000,
  status: "ok", failure: null, samples: 300, temp_gpu_c: signal(52.5, 63), power_w: signal(410.2, 688),
  util_gpu_pct: signal(71, 100), alerts: {}, alerts_total: 0, xid_total: 0, xids: [],
  median_ratio: 0.81, decay: 0.012, contradictions: [], ...over,
});
const gpu = (i, over) => ({
  uuid: `GPU-0000000${i}-0000-0000-0000-000000000000`, model: "H200 SXM", bus_id: `0000:1${i}:00.0`,
  agent: "ed25519:5f3c9a1b7e2d4c6f8a0b1c2d3e4f5a6b", simulated: false, health: health({}), ...over,
});
const FLEET = [
  { gpus: [
    gpu(1, {}),
    gpu(2, { health: health({ status: "critical", alerts: { critical: 1 }, alerts_total: 1, xid_total: 1, xids: [79] }) }),
    gpu(3, { health: health({ status: "warning", power_w: null, decay: 0.23,
      contradictions: ["the proofs ran 23 % slower than the GPU's earlier ones while the agent reports no warning"] }) }),
  ], next_after: "GPU-00000003-0000-0000-0000-000000000000" },
  { gpus: [
    gpu(4, { health: health({ status: "failed", failure: "the agent did not answer: connection refused", samples: null,
      temp_gpu_c: null, power_w: null, util_gpu_pct: null, alerts_total: null, xid_total: null, median_ratio: null, decay: null }) }),
    gpu(5, { health: null }),
  ], next_after: null },
];

async function fleet(browser) {
  const { readFileSync } = await import("node:fs");
  const html = readFileSync("crates/validator/src/overview.html", "utf8");
  const page = await browser.newPage();
  let answering = true;
  await page.route("http://validator.test/**", (route) => {
    const url = new URL(route.request().url());
    if (url.pathname === "/overview") return route.fulfill({ contentType: "text/html", body: html });
    if (!answering) return route.abort("connectionrefused");
    const which = url.searchParams.get("after") ? 1 : 0;
    return route.fulfill({ contentType: "application/json", body: JSON.stringify(FLEET[which]) });
  });
  await page.goto("http://validator.test/overview", { waitUntil: "load" });
  await page.waitForSelector("#fleet .tile");
  const tiles = await page.locator("#fleet .tile").count();
  check(tiles === 5, `the fleet overview lists each GPU of both pages (${tiles})`);
  const badge = async (i) => page.locator(`#fleet .tile[data-uuid^='GPU-0000000${i}'] .badge`).textContent();
  check((await badge(2)) === "critical" && (await badge(4)) === "failed" && (await badge(5)) === "no record",
    "each GPU's status: critical, failed, no record");
  const third = await page.locator("#fleet .tile[data-uuid^='GPU-00000003']").textContent();
  check(/reported by its agent.*power\s*not reported.*measured by this validator.*decay\s*23\.0 %.*contradiction: the proofs ran 23 %/s.test(third),
    "reported and measured figures apart, what is missing \"not reported\", the contradiction");
  const line = await page.locator("#status-line").textContent();
  check(/^5 GPUs · 1 ok · 1 critical · 1 warning · 1 failed · 1 no record/.test(line), `the fleet's counts (${line})`);
  await page.screenshot({ path: join(shots, "dashboard-fleet.png") });
  answering = false;
  await page.evaluate(() => refresh());
  await page.waitForSelector("#banner:not([hidden])", { timeout: 5000 });
  const banner = await page.locator("#banner").textContent();
  check(banner.startsWith("Validator not answering") && (await page.locator("#fleet .tile").count()) === 5,
    `the validator not answering: a banner, the last tiles kept (${banner.slice(0, 50)})`);
  await page.close();
}

try {
  const page = await browser.newPage();
  let navigations = 0;
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) navigations += 1;
  });
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#overview .tile", { timeout: 10000 });
  await page.waitForFunction(() => document.querySelectorAll("polyline.series").length > 0);

  // The overview lists each GPU, with its current values.
  const tiles = await page.locator("#overview .tile").allTextContents();
  check(tiles.length === gpus, `the overview has a tile per GPU (${tiles.length} of ${gpus})`);
  for (let i = 0; i < gpus; i++) {
    check(tiles.some((t) => t.startsWith(`GPU ${i}`) && /temp \d+(\.\d+)? °C/.test(t)),
      `GPU ${i}'s tile shows its temperature`);
  }
  const sections = await page.locator("section.gpu").count();
  check(sections === gpus, `a section per GPU (${sections})`);
  const temp = await page.locator("#gpu-0 .current [data-key='GPU temperature'] .v").textContent();
  check(/^\d+(\.\d+)? °C \/ 89\.0 °C$/.test(temp), `current GPU 0 temperature against its slowdown (${temp})`);
  const power = await page.locator("#gpu-0 .current [data-key='power'] .v").textContent();
  check(/^\d+(\.\d+)? W \/ 700 W$/.test(power), `current power against the limit (${power})`);

  // The charts, their limit lines, and "not reported" where the traces carry nothing.
  const charts = await page.locator("#gpu-0 .chart").evaluateAll((cs) => cs.map((c) => c.dataset.chart));
  for (const id of ["temperature", "power", "utilization", "memory", "clocks", "pcie", "processes", "fan", "throttle"]) {
    check(charts.includes(id), `GPU 0 chart ${id}`);
  }
  const limits = async (chart) =>
    page.locator(`#gpu-0 [data-chart='${chart}'] .limit`).evaluateAll((ls) => ls.map((l) => l.dataset.name));
  const tempLimits = await limits("temperature");
  check(tempLimits.includes("slowdown (driver)") && tempLimits.includes("alert limit (monitor)"),
    `temperature limit lines (${tempLimits})`);
  check((await limits("power")).includes("power limit (driver)"), "the power limit line");
  const notReported = await page.locator("#gpu-0 [data-chart='processes'] text.not-reported").count();
  check(notReported === 1, "the processes chart says \"not reported\" (the traces have no process column)");
  const lanes = await page.locator("#gpu-0 [data-chart='throttle'] rect.lane").count();
  check(lanes > 0, `throttle reasons drawn as lanes (${lanes} spans)`);

  // Panels: ECC counters read from the trace, aggregates not reported, PCIe replays and throughput.
  const ecc = await page.locator("#gpu-0 [data-panel='ECC and memory repair']").textContent();
  check(/corrected, volatile\s*0/.test(ecc) && /corrected, aggregate\s*not reported/.test(ecc),
    "ECC panel: volatile counts, aggregates not reported");
  const pcie = await page.locator("#gpu-0 [data-panel='PCIe']").textContent();
  check(/replays\s*\d+/.test(pcie) && /throughput TX\s*\d/.test(pcie), "PCIe panel: replays and throughput");
  const processes = await page.locator("#gpu-0 [data-panel='processes']").textContent();
  check(processes.includes("not reported"), "processes panel: not reported");

  // The XID on GPU 1: an alert in the table, a marker on its charts, the XID panel counts it.
  await page.waitForSelector("#gpu-1 [data-chart='temperature'] .alert-marker", { timeout: 15000 });
  const status = await page.locator("#overview .tile[data-uuid*='with-xid'] .badge").textContent();
  check(status === "critical", `GPU 1's tile shows the open alert (${status})`);
  const row = page.locator("#alerts tbody tr.critical").first();
  const rowT = await row.getAttribute("data-t");
  const rowTime = await row.locator("td.time").textContent();
  check(/^\d\d:\d\d:\d\d$/.test(rowTime), `the alert's wall-clock time in the table (${rowTime})`);
  check((await row.textContent()).includes("XID 79"), "the alert table lists the XID");
  const marker = page.locator(`#gpu-1 [data-chart='temperature'] .alert-marker[data-t='${rowT}']`);
  check((await marker.count()) === 1, "the chart marks the alert at the table's time");
  const title = await marker.locator("title").textContent();
  check(title.startsWith(`${rowTime} critical xid`), `the marker's tooltip says the same time (${title})`);
  // The marker sits where the axis puts its time: interpolate the tick labels' positions.
  const placed = await page.evaluate((t) => {
    const svg = document.querySelector("#gpu-1 [data-chart='temperature'] svg");
    const ticks = [...svg.querySelectorAll("text.xtick")].map((e) => [Number(e.dataset.t), Number(e.getAttribute("x")), e.textContent]);
    const line = svg.querySelector(`.alert-marker[data-t='${t}'] line`);
    const [a, b] = [ticks[0], ticks[ticks.length - 1]];
    const expected = a[1] + ((Number(t) - a[0]) / (b[0] - a[0])) * (b[1] - a[1]);
    return { expected, x: Number(line.getAttribute("x1")), labels: ticks.map((k) => k[2]) };
  }, rowT);
  check(Math.abs(placed.expected - placed.x) < 1.5, `the marker lies at its time on the axis (${placed.x} vs ${placed.expected.toFixed(1)})`);
  check(placed.labels.length >= 2 && placed.labels.every((l) => /^\d\d:\d\d(:\d\d)?$/.test(l)),
    `the time axis is wall-clock time (${placed.labels.join(" ")})`);
  const xid = await page.locator("#gpu-1 [data-panel='XID errors']").textContent();
  check(/XID errors\s*1/.test(xid) && xid.includes("XID 79"), "the XID panel counts it");

  // Tooltips: hovering a chart shows the time and the values under the cursor.
  // (Over the line's latest point: the trace fills only the right end of the window.)
  const at = await page.evaluate(() => {
    const line = document.querySelector("#gpu-0 [data-chart='temperature'] polyline.series");
    const [x, y] = line.getAttribute("points").trim().split(/\s+/).pop().split(",").map(Number);
    const box = line.ownerSVGElement.getBoundingClientRect();
    return { x: box.left + x - 3, y: box.top + y };
  });
  await page.mouse.move(at.x, at.y);
  const tip = await page.locator("#tooltip").textContent();
  check(await page.locator("#tooltip").isVisible() && /\d\d:\d\d:\d\d/.test(tip) && /GPU: \d+(\.\d+)? °C/.test(tip),
    `a tooltip with the time and the values (${tip.slice(0, 80)})`);
  await page.mouse.move(0, 0);
  await page.screenshot({ path: join(shots, "dashboard.png") });

  // The charts use the screen: they fill the section's width, and grow with the window.
  const widths = async () =>
    page.evaluate(() => {
      const section = document.querySelector("#gpu-0 .charts").getBoundingClientRect();
      const svgs = [...document.querySelectorAll("#gpu-0 .chart svg")].map((s) => s.getBoundingClientRect());
      return { section: section.width, right: Math.max(...svgs.map((s) => s.right)) - section.left, first: svgs[0].width };
    });
  const narrow = await widths();
  check(narrow.right > 0.95 * narrow.section, `the charts fill the width (${narrow.right.toFixed(0)} of ${narrow.section.toFixed(0)} px)`);
  await page.setViewportSize({ width: 1900, height: 900 });
  await sleep(500);
  const wide = await widths();
  check(wide.right > 0.95 * wide.section && wide.section > narrow.section + 400,
    `a wider window, wider charts (${narrow.section.toFixed(0)} then ${wide.section.toFixed(0)} px)`);
  await page.setViewportSize({ width: 1340, height: 900 });

  // Updates without a reload: a mark left on the page and the scroll position survive, new
  // points arrive.
  await page.evaluate(() => {
    window.pogMark = 42;
    document.querySelector("#gpu-1").scrollIntoView();
  });
  await sleep(300);
  const scrolled = await page.evaluate(() => window.scrollY);
  const before = await page.evaluate(points);
  const lastBefore = await page.locator("#status-line").textContent();
  await page.waitForFunction((t) => document.querySelector("#status-line").textContent !== t, lastBefore, { timeout: 10000 });
  await sleep(2500); // one more update
  const after = await page.evaluate(points);
  check(after > before, `new points arrived by themselves (${before} then ${after})`);
  check(await page.evaluate(() => window.pogMark === 42), "the page was not reloaded");
  check(navigations === 1, `no navigation after the first load (${navigations})`);
  const kept = await page.evaluate(() => window.scrollY);
  check(scrolled > 500 && Math.abs(kept - scrolled) < 2, `the scroll position is kept (${scrolled} then ${kept})`);
  await page.screenshot({ path: join(shots, "dashboard-gpu.png") });

  // An error answer: the monitor's words in a banner, gone once it answers well again.
  await page.route("**/api/dashboard*", (route) =>
    route.fulfill({ status: 500, contentType: "text/plain", body: "reading the history: disk I/O error" }));
  await page.waitForSelector("#banner.error:not([hidden])", { timeout: 10000 });
  const said = await page.locator("#banner").textContent();
  check(said.includes("HTTP 500") && said.includes("disk I/O error"), `an error answer is shown (${said.slice(0, 90)})`);
  await page.unroute("**/api/dashboard*");
  const cleared = await page.waitForSelector("#banner", { state: "hidden", timeout: 10000 }).then(() => true, () => false);
  check(cleared, "the banner goes once the monitor answers again");

  // The monitor stops: the page says so and keeps its last figures.
  process.kill(Number(monitorPid), "SIGKILL");
  await page.waitForSelector("#banner:not([hidden])", { timeout: 10000 });
  const banner = await page.locator("#banner").textContent();
  check(banner.startsWith("Monitor stopped"), `the stopped banner (${banner.slice(0, 70)})`);
  check(!page.url().startsWith("chrome-error") && page.url() === url, `still the dashboard (${page.url()})`);
  check(await page.evaluate(() => document.body.classList.contains("stopped") && window.pogMark === 42),
    "the last figures stay, greyed, on the same page");
  const lines = await page.locator("polyline.series").count();
  check(lines > 0, `the charts stay (${lines} lines)`);
  await page.evaluate(() => window.scrollTo(0, 0));
  await sleep(200);
  await page.screenshot({ path: join(shots, "dashboard-stopped.png") });

  // The validator's overview of its fleet (crates/validator/src/overview.html), its answers
  // given by the browser: two pages of GPUs in /v1/overview's shape, then none.
  await fleet(browser);
  console.log(`screenshots: ${shots}/dashboard.png, dashboard-gpu.png, dashboard-stopped.png, dashboard-fleet.png`);
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
