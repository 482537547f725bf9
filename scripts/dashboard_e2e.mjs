// The dashboard end to end in headless Chromium (issue 13): loads the page of a running
// `pog monitor run`, waits for its self-reload, checks that the six charts are there and that
// new points arrived, and saves a screenshot. Driven by scripts/dashboard_e2e.sh.
//
// node dashboard_e2e.mjs URL SCREENSHOT.png
import { createRequire } from "node:module";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(join(process.env.PLAYWRIGHT_HOME, "package.json"));
const { chromium } = require("playwright-core");
const [url, screenshot] = process.argv.slice(2);

const points = () =>
  [...document.querySelectorAll("polyline")]
    .map((p) => (p.getAttribute("points") || "").trim().split(/\s+/).filter(Boolean).length)
    .reduce((a, b) => a + b, 0);

// A fresh profile each run (playwright passes it as --user-data-dir).
const browser = await chromium.launchPersistentContext(
  mkdtempSync(join(tmpdir(), "pog-chromium-")),
  {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1340, height: 640 },
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
try {
  const page = await browser.newPage();
  await page.goto(url, { waitUntil: "load" });
  const charts = await page.locator("svg").count();
  check(charts === 6, `six charts on the page (saw ${charts})`);
  const titles = (await page.locator("svg text").allTextContents()).map((t) => t.trim());
  for (const title of ["temperature (°C)", "power (W)", "utilization (%)", "clocks (MHz)"]) {
    check(titles.includes(title), `chart "${title}"`);
  }
  const before = await page.evaluate(points);
  // The page reloads itself every 2 s: wait for the next load, then count again.
  await page.waitForEvent("load", { timeout: 10000 });
  const after = await page.evaluate(points);
  check(after > before, `new points arrived by themselves (${before} then ${after})`);
  await page.screenshot({ path: screenshot });
  console.log(`screenshot: ${screenshot}`);
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
