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
}

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
