// Drives headless Chromium over the admin page and checks what a person sees. Prints the lag
// of subscription "readers" on channel "tt-a" (for the next run to compare with).
// Usage: node admin-browser-test.mjs URL [--expect-holder CH] [--lag-below N] [--screenshot FILE]
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");

const [url, ...rest] = process.argv.slice(2);
const opt = (name) => {
  const i = rest.indexOf(name);
  return i < 0 ? undefined : rest[i + 1];
};
const fail = (message) => {
  console.error(`admin page: ${message}`);
  process.exit(1);
};

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  await page.goto(url);
  // Channels listed (each row carries its name).
  for (const channel of ["tt-a", "tt-b"]) {
    await page.locator(`#channels tr[data-channel="${channel}"]`).waitFor({ timeout: 15000 });
  }
  const backend = await page.locator("#backend").textContent();
  if (backend !== "rocksmq") fail(`backend shown as ${backend}`);
  // The size column: rocksmq's estimate of the bytes stored in tables, a whole number.
  const size = await page.locator('#channels tr[data-channel="tt-a"] td:nth-child(3)').textContent();
  if (!/^\d+$/.test(size)) fail(`size of tt-a shown as ${size}`);
  // The subscription with its lag, a number.
  const lagCell = page.locator('#subscriptions tr[data-channel="tt-a"][data-subscription="readers"] td.lag');
  await lagCell.waitFor({ timeout: 15000 });
  const lag = Number(await lagCell.textContent());
  if (!Number.isInteger(lag) || lag <= 0) fail(`lag of readers is ${await lagCell.textContent()}`);
  const below = opt("--lag-below");
  if (below !== undefined && !(lag < Number(below))) fail(`lag ${lag} did not go below ${below}`);
  // The watermark holder named, once the page has read every tick.
  const holder = opt("--expect-holder");
  if (holder) {
    await page.waitForFunction(
      (name) => document.getElementById("tt-holder").textContent === name, holder, { timeout: 15000 });
    const watermark = Number(await page.locator("#tt-watermark").textContent());
    const ttLag = Number(await page.locator("#tt-lag").textContent());
    if (!(watermark > 0 && ttLag > 0)) fail(`watermark ${watermark}, lag ${ttLag}`);
    await page.waitForFunction(() => document.querySelectorAll("#tt-chart polyline").length === 1,
      null, { timeout: 15000 });
  }
  const shot = opt("--screenshot");
  if (shot) await page.screenshot({ path: shot, fullPage: true });
  console.log(lag);
} finally {
  await browser.close();
}
