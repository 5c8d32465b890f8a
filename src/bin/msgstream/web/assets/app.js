// The admin page: polls the JSON API once a second and redraws. Anything the API marks
// `unavailable` is shown as its reason, never as a number.
"use strict";

let writes = false;
let chosen = null; // channels of the timetick view; null: every channel that ticked

function cell(value, cls) {
  const td = document.createElement("td");
  if (value && typeof value === "object" && "unavailable" in value) {
    td.textContent = value.unavailable;
    td.className = "na";
  } else if (value && typeof value === "object" && "value" in value) {
    td.textContent = String(value.value);
    td.className = "num " + (cls || "");
  } else {
    td.textContent = value === null || value === undefined ? "–" : String(value);
    td.className = cls || "";
  }
  return td;
}

function row(tbody, cells, attrs) {
  const tr = document.createElement("tr");
  for (const [k, v] of Object.entries(attrs || {})) tr.dataset[k] = v;
  cells.forEach((c) => tr.appendChild(c));
  tbody.appendChild(tr);
}

function deleteButton(label, body, target) {
  const td = document.createElement("td");
  if (!writes) return td;
  const button = document.createElement("button");
  button.className = "danger";
  button.textContent = label;
  button.onclick = async () => {
    const typed = prompt(`Type ${JSON.stringify(target)} to delete it`);
    if (typed !== target) return;
    const response = await fetch("/api/delete", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...body, confirm: typed }),
    });
    const answer = await response.json();
    alert(answer.done || answer.error);
  };
  td.appendChild(button);
  return td;
}

function drawChannels(data) {
  const note = document.getElementById("channels-note");
  note.hidden = !data.unavailable;
  note.textContent = data.unavailable || "";
  const channels = document.querySelector("#channels tbody");
  const subs = document.querySelector("#subscriptions tbody");
  channels.replaceChildren();
  subs.replaceChildren();
  for (const c of data.channels) {
    row(channels, [cell(c.name), cell(c.newest_id), cell(c.size), cell(c.produce_rate), cell(c.last_tick),
      deleteButton("delete channel", { channel: c.name }, c.name)], { channel: c.name });
    if (c.subscriptions.unavailable) {
      row(subs, [cell(c.name), cell(c.subscriptions), cell(null), cell(null), cell(null)]);
      continue;
    }
    for (const s of c.subscriptions) {
      row(subs, [cell(c.name), cell(s.name), cell(s.lag, "lag"), cell(s.consume_rate),
        deleteButton("delete", { channel: c.name, subscription: s.name }, s.name)],
        { channel: c.name, subscription: s.name });
    }
  }
  drawChoice(data.channels.map((c) => c.name));
  drawChannelPicker(data.channels.map((c) => c.name));
}

// The message browser: one page of /api/messages at a time, on request (not every second,
// which would move the page under the reader's eyes).
let nextCursor = null;

function drawChannelPicker(names) {
  const select = document.getElementById("msg-channel");
  const key = names.join(",");
  if (select.dataset.names === key) return;
  select.dataset.names = key;
  const picked = select.value;
  select.replaceChildren(...names.map((name) => new Option(name, name, false, name === picked)));
}

function messageQuery(cursor) {
  const params = new URLSearchParams({
    channel: document.getElementById("msg-channel").value,
    order: document.getElementById("msg-order").value,
  });
  const from = document.getElementById("msg-from").value.trim();
  const time = document.getElementById("msg-time").value.trim();
  if (cursor) params.set("cursor", cursor);
  else if (from) params.set("from", from);
  else if (time) params.set("from_time", time);
  return "/api/messages?" + params;
}

function entryCells(m) {
  if (m.kind === "undecodable") {
    const kind = cell(m.kind, "na");
    kind.title = m.error;
    return [cell(m.id), kind, cell(null), cell(null), cell(JSON.stringify(m.properties)),
      cell(`${m.size} bytes: ${m.payload_hex}`, "payload")];
  }
  const ts = m.begin_ts === m.end_ts ? m.end_ts : `${m.begin_ts}..${m.end_ts}`;
  const props = Object.entries(m.properties).map(([k, v]) => `${k}=${v}`).join(", ");
  return [cell(m.id), cell(m.kind), cell(ts, "num"), cell(m.keys.join(", ")), cell(props),
    cell(m.preview, "payload")];
}

async function showMessages(cursor) {
  const note = document.getElementById("msg-note");
  const next = document.getElementById("msg-next");
  const tbody = document.querySelector("#messages tbody");
  const response = await fetch(messageQuery(cursor));
  const data = await response.json();
  tbody.replaceChildren();
  const problem = response.ok ? data.unavailable : `${data.error} (${data.kind})`;
  document.getElementById("msg-how").textContent = response.ok && data.from_time_found_by
    ? `time found by ${data.from_time_found_by}` : "";
  note.hidden = !problem;
  note.textContent = problem || "";
  nextCursor = (response.ok && data.next_cursor) || null;
  next.disabled = nextCursor === null;
  for (const m of (response.ok && data.messages) || []) {
    row(tbody, entryCells(m), { id: m.id, kind: m.kind });
  }
  const table = document.getElementById("messages");
  table.dataset.shown = String(Number(table.dataset.shown || 0) + 1);
}

document.getElementById("msg-form").onsubmit = (event) => {
  event.preventDefault();
  showMessages(null);
};
document.getElementById("msg-next").onclick = () => showMessages(nextCursor);

function drawChoice(names) {
  const box = document.getElementById("tt-choice");
  const key = names.join(",");
  if (box.dataset.names === key) return;
  box.dataset.names = key;
  box.replaceChildren();
  for (const name of names) {
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "checkbox";
    input.value = name;
    input.checked = chosen === null || chosen.includes(name);
    input.onchange = () => {
      chosen = [...box.querySelectorAll("input:checked")].map((i) => i.value);
      refresh();
    };
    label.append(input, " " + name + " ");
    box.appendChild(label);
  }
}

function drawTimetick(data) {
  const note = document.getElementById("tt-note");
  note.hidden = !data.unavailable;
  note.textContent = data.unavailable || "";
  document.getElementById("tt-watermark").textContent = data.watermark ?? "–";
  document.getElementById("tt-holder").textContent = data.holder ?? "–";
  document.getElementById("tt-lag").textContent = data.lag ?? "–";
  const tbody = document.querySelector("#tt-channels tbody");
  tbody.replaceChildren();
  for (const c of data.channels || []) {
    row(tbody, [cell(c.name, c.name === data.holder ? "holder" : ""),
      cell(c.last_tick === null ? { unavailable: "no timetick read" } : c.last_tick)]);
  }
  const history = data.history || [];
  const svg = document.getElementById("tt-chart");
  svg.replaceChildren();
  if (history.length > 1) {
    const max = Math.max(1, ...history.map((h) => h.lag));
    const t0 = history[0].at_ms, t1 = history[history.length - 1].at_ms;
    const points = history.map((h) =>
      `${((h.at_ms - t0) / Math.max(1, t1 - t0)) * 600},${115 - (h.lag / max) * 110}`).join(" ");
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", points);
    svg.appendChild(line);
  }
}

async function getJson(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return response.json();
}

async function refresh() {
  try {
    drawChannels(await getJson("/api/channels"));
    const query = chosen === null ? "" : "?channels=" + encodeURIComponent(chosen.join(","));
    drawTimetick(await getJson("/api/timetick" + query));
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById("updated").textContent = "cannot reach the server: " + e.message;
  }
}

async function start() {
  const overview = await getJson("/api/overview");
  writes = overview.writes_allowed;
  document.getElementById("backend").textContent = overview.backend;
  document.getElementById("mode").textContent = writes ? "writes allowed" : "read-only";
  await refresh();
  setInterval(refresh, 1000);
}

start();
