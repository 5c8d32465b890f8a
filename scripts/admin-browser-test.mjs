// Drives headless Chromium over the admin page and checks what a person sees. Prints the lag
// of subscription "readers" on channel "tt-a" (for the next run to compare with).
// Usage: node admin-browser-test.mjs URL [--expect-holder CH] [--lag-below N] [--browse CH]
//   [--screenshot FILE]
// --browse pages through channel CH in the message browser (both orders, from an id, from a
// time, a malformed id) and checks that browsing moved no subscription.
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
  const browsed = opt("--browse");
  if (browsed) await browse(page, browsed, lag);
  const shot = opt("--screenshot");
  if (shot) await page.screenshot({ path: shot, fullPage: true });
  console.log(lag);
} finally {
  await browser.close();
}

// The rows of the message table: id, kind, timestamps, payload as shown.
async function rows(page) {
  return page.locator("#messages tbody tr").evaluateAll((trs) => trs.map((tr) => ({
    id: tr.dataset.id,
    kind: tr.dataset.kind,
    ts: tr.children[2].textContent,
    payload: tr.children[5].textContent,
  })));
}

// Clicks `button` and waits for the message table to be drawn again (the page counts draws).
async function show(page, button) {
  const drawn = await page.locator("#messages").getAttribute("data-shown");
  await page.click(button);
  await page.waitForFunction(
    (before) => document.getElementById("messages").dataset.shown !== before, drawn ?? undefined,
    { timeout: 15000 });
  return rows(page);
}

async function browse(page, channel, lagBefore) {
  const subscriptionsBefore = await page.locator("#subscriptions tbody tr")
    .evaluateAll((trs) => trs.map((tr) => `${tr.dataset.channel}/${tr.dataset.subscription}`));
  await page.locator(`#msg-channel option[value="${channel}"]`).waitFor({ state: "attached" });
  await page.selectOption("#msg-channel", channel);
  await page.selectOption("#msg-order", "oldest");
  const first = await show(page, "#msg-show");
  if (first.length !== 50) fail(`oldest first: ${first.length} rows, not a page of 50`);
  if (!first.every((r, i) => i === 0 || Number(r.id) > Number(first[i - 1].id))) {
    fail(`oldest first is not in id order: ${first.map((r) => r.id)}`);
  }
  const kinds = new Set(first.map((r) => r.kind));
  if (!kinds.has("insert") || !kinds.has("timetick")) fail(`kinds shown: ${[...kinds]}`);
  const insert = first.find((r) => r.kind === "insert");
  if (!/^".*"$/.test(insert.payload)) fail(`an insert's payload shown as ${insert.payload}`);
  if (await page.locator("#msg-next").isDisabled()) fail("no next page after the first");
  const second = await show(page, "#msg-next");
  if (!(second.length > 0 && Number(second[0].id) > Number(first[49].id))) {
    fail(`the next page does not follow the first: ${second.map((r) => r.id)}`);
  }
  if (!(await page.locator("#msg-next").isDisabled())) fail("a next page after the last");

  // Newest first starts at the newest id the channel table shows.
  const newestId = await page.locator(`#channels tr[data-channel="${channel}"] td:nth-child(2)`)
    .textContent();
  await page.selectOption("#msg-order", "newest");
  const newest = await show(page, "#msg-show");
  if (newest[0]?.id !== newestId) fail(`newest first starts at ${newest[0]?.id}, not ${newestId}`);
  if (!newest.every((r, i) => i === 0 || Number(r.id) < Number(newest[i - 1].id))) {
    fail(`newest first is not in reverse id order: ${newest.map((r) => r.id)}`);
  }

  // From an id, and from a time: the tenth message of the first page either way.
  const tenth = first[9];
  await page.selectOption("#msg-order", "oldest");
  await page.fill("#msg-from", tenth.id);
  const fromId = await show(page, "#msg-show");
  if (fromId[0]?.id !== tenth.id) fail(`from id ${tenth.id} starts at ${fromId[0]?.id}`);
  await page.fill("#msg-from", "");
  const ts = tenth.ts.split("..")[0];
  await page.fill("#msg-time", ts);
  const fromTime = await show(page, "#msg-show");
  const firstAt = first.find((r) => Number(r.ts.split("..")[0]) >= Number(ts));
  if (fromTime[0]?.id !== firstAt.id) fail(`from time ${ts} starts at ${fromTime[0]?.id}, not ${firstAt.id}`);
  const how = await page.locator("#msg-how").textContent();
  if (!/^time found by (scan|time index)$/.test(how)) fail(`how the time was found: ${how}`);
  await page.fill("#msg-time", "");

  // A malformed id is said, with no rows.
  await page.fill("#msg-from", "not-an-id");
  const refused = await show(page, "#msg-show");
  const note = await page.locator("#msg-note").textContent();
  if (refused.length !== 0 || !note.includes("bad_parameter")) fail(`malformed id: ${note}`);
  await page.fill("#msg-from", "");

  // Nothing moved: the same subscriptions, the same lag, after the page looked again.
  const looked = async () => page.locator("#updated").textContent();
  for (let i = 0; i < 2; i++) {
    const before = await looked();
    await page.waitForFunction((t) => document.getElementById("updated").textContent !== t,
      before, { timeout: 15000 });
  }
  const subscriptionsAfter = await page.locator("#subscriptions tbody tr")
    .evaluateAll((trs) => trs.map((tr) => `${tr.dataset.channel}/${tr.dataset.subscription}`));
  if (subscriptionsAfter.join() !== subscriptionsBefore.join()) {
    fail(`subscriptions before browsing ${subscriptionsBefore}, after ${subscriptionsAfter}`);
  }
  const lagAfter = Number(await page.locator(
    '#subscriptions tr[data-channel="tt-a"][data-subscription="readers"] td.lag').textContent());
  if (lagAfter !== lagBefore) fail(`browsing moved the lag of readers: ${lagBefore} -> ${lagAfter}`);
  await page.selectOption("#msg-order", "oldest");
  await show(page, "#msg-show");
}
