"use strict";
(function () {
  const KEY = "apns-console-key";
  // What the signed-in key may do (GET /v1/api-key): the console offers nothing else.
  let access = null;
  const $ = (id) => document.getElementById(id);
  const view = () => $("view");
  let poller = null;

  // DOM from data: el("td", {class: "x"}, "text", child, …). Strings are text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  const svg = (tag, attrs) => {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  };
  // Every time in UTC, the zone named: "2026-06-01 07:00 UTC" (the reader's own
  // zone is not the user's, and a bare time says neither).
  const time = (iso) => iso ? new Date(iso).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "—";
  const short = (token) => token && token.length > 16 ? token.slice(0, 8) + "…" + token.slice(-6) : (token || "");
  const link = (hash, text) => el("a", { href: hash }, text);
  const userLink = (id) => link("#/user/" + encodeURIComponent(id), id);
  const notificationLink = (id) => link("#/notification/" + encodeURIComponent(id), id);
  const apnsLink = (id) => link("#/apns/" + encodeURIComponent(id), id);
  const stateCell = (state) => el("span", { class: "state-" + state }, state);
  // A delivery's state, and for a pending one why it waits and until when.
  const deliveryState = (d) => [stateCell(d.state), waitingNote(d.waiting, d.attempts)];

  function table(id, columns, rows) {
    return el("table", { id },
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", {}, c)))),
      el("tbody", {}, rows.map((cells) => el("tr", {},
        cells.map((cell, i) => el("td", { "data-label": columns[i] }, cell))))));
  }

  class APIError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  // Every call: the documented API, the key as the bearer.
  async function api(path, options) {
    options = options || {};
    const key = options.key || sessionStorage.getItem(KEY);
    const headers = { "Authorization": "Bearer " + key, "Accept": "application/json" };
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method: options.method || "GET", headers, cache: "no-store", credentials: "omit",
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const message = (data && data.error) || ("HTTP " + response.status);
      if (response.status === 401 && !options.key) signOut("Signed out: " + message);
      throw new APIError(response.status, message);
    }
    return data;
  }

  function showError(error) {
    $("error").textContent = error ? (error.message || String(error)) : "";
  }

  function signedIn() { return !!sessionStorage.getItem(KEY); }

  function signOut(message) {
    sessionStorage.removeItem(KEY);
    access = null;
    stopPolling();
    $("app").hidden = true;
    $("nav").hidden = true;
    $("signin").hidden = false;
    view().replaceChildren();
    $("signin-error").textContent = message || "";
    $("key").value = "";
    $("key").focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const key = $("key").value.trim();
    $("signin-error").textContent = "";
    if (!key) return;
    try {
      // Every key may ask what it may do; a wrong one gets a 401.
      access = await api("/v1/api-key", { key });
    } catch (error) {
      $("key").value = "";
      $("signin-error").textContent = error.status === 401 ? "That key was refused: " + error.message
        : "The server did not answer: " + error.message;
      return;
    }
    sessionStorage.setItem(KEY, key);
    $("key").value = "";
    enter();
  }

  function may(permission) { return !!access && access.permissions.includes(permission); }

  async function enter() {
    if (!access) {
      try { access = await api("/v1/api-key"); } catch (error) { signOut("Signed out: " + error.message); return; }
    }
    $("signin").hidden = true;
    $("app").hidden = false;
    $("nav").hidden = false;
    const apps = access.apps === "*" ? "every app" : access.apps.join(", ");
    $("whoami").textContent = "Key " + access.name + " (" + access.role + ", " + apps + ")";
    // The chart counts every app: only a key for every app may read it.
    $("nav-stats").hidden = access.apps !== "*";
    route();
  }

  function stopPolling() {
    if (poller) { clearInterval(poller); poller = null; }
  }

  function lookup(event) {
    event.preventDefault();
    const value = $("lookup-value").value.trim();
    if (!value) return;
    location.hash = "#/" + $("lookup-kind").value + "/" + encodeURIComponent(value);
  }

  async function route() {
    if (!signedIn()) return;
    stopPolling();
    showError(null);
    const [, page, ...rest] = (location.hash || "#/notifications").split("/");
    const arg = rest.length ? decodeURIComponent(rest.join("/")) : "";
    view().replaceChildren(el("p", { class: "muted" }, "Loading…"));
    try {
      switch (page) {
        case "user": await userPage(arg); break;
        case "notification": await notificationPage(arg); break;
        case "apns": await apnsPage(arg); break;
        case "deactivated": await deactivatedPage(); break;
        case "scheduled": await scheduledPage(); break;
        case "stats": await statsPage(); break;
        default: await notificationsPage();
      }
    } catch (error) {
      view().replaceChildren();
      showError(error);
    }
  }

  // A user: their tokens (and why one is not sent to), preferences, deliveries.
  async function userPage(id) {
    $("lookup-kind").value = "user";
    $("lookup-value").value = id;
    const q = encodeURIComponent(id);
    const [devices, preferences, deliveries] = await Promise.all([
      api("/v1/users/" + q + "/device-tokens"),
      api("/v1/users/" + q + "/push-preferences"),
      api("/v1/users/" + q + "/deliveries?limit=20"),
    ]);
    if (isUnknownUser(devices, preferences, deliveries)) { noSuchUser(id); return; }
    const result = el("div", { id: "test-result", class: "test-result", "aria-live": "polite" });
    const rows = devices.tokens.map((d) => [
      d.app_type, d.environment, d.platform, d.device_name || "—",
      el("span", { class: "mono", title: d.token }, short(d.token)),
      d.active ? el("span", { class: "active" }, "active")
        : el("span", { class: "inactive" }, "inactive: " + (d.deactivated_reason || "?") + " " + time(d.deactivated_at)),
      time(d.last_used_at),
      d.active && d.platform === "ios" && may("test_push")
        ? el("button", { type: "button", class: "send-test secondary", "data-device": d.id,
                         onclick: (e) => testPush(id, d.id, e.target, result) }, "Send test push")
        : "",
    ]);
    const prefCards = Object.entries(preferences.preferences).map(([app, values]) =>
      el("div", { class: "card" }, el("h3", {}, app),
        el("dl", { class: "prefs" }, Object.entries(values).map(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))]))));
    const list = el("div", {});
    view().replaceChildren(
      el("h2", {}, "User ", el("span", { class: "mono" }, id)),
      el("h3", {}, "Device tokens (" + devices.tokens.length + ")"),
      devices.tokens.length ? table("devices", ["App", "Environment", "Platform", "Device", "Token", "State",
                                                 "Last used", ""], rows)
        : el("p", { class: "muted" }, "No device tokens registered for this user."),
      result,
      el("h3", {}, "Preferences and quiet hours"),
      el("div", { class: "grid" }, prefCards),
      el("h3", {}, "Recent deliveries"),
      list);
    renderUserDeliveries(list, id, deliveries);
  }

  function renderUserDeliveries(container, id, page) {
    const rows = page.deliveries.map((d) => [time(d.timestamp || d.finished_at), notificationLink(d.notification_id),
      deliveryState(d), d.status === null ? "—" : String(d.status), d.reason || "—",
      el("span", { class: "mono" }, short(d.token)), apnsLink(d.apns_id)]);
    if (!container.firstChild) {
      container.append(rows.length ? table("user-deliveries",
        ["Time", "Notification", "State", "Status", "Reason", "Token", "apns-id"], rows)
        : el("p", { class: "muted" }, "No deliveries yet."));
    } else {
      const body = container.querySelector("tbody");
      for (const cells of rows) body.append(el("tr", {}, cells.map((c, i) =>
        el("td", { "data-label": ["Time", "Notification", "State", "Status", "Reason", "Token", "apns-id"][i] }, c))));
    }
    const old = container.querySelector(".more");
    if (old) old.remove();
    if (page.next) {
      container.append(el("button", { type: "button", class: "more secondary", onclick: async () => {
        try {
          renderUserDeliveries(container, id, await api("/v1/users/" + encodeURIComponent(id)
            + "/deliveries?limit=20&after=" + encodeURIComponent(page.next)));
        } catch (error) { showError(error); }
      } }, "More deliveries"));
    }
  }

  // One alert to one device, then its answer as the log records it.
  async function testPush(user, device, button, result) {
    button.disabled = true;
    showError(null);
    try {
      const sent = await api("/v1/users/" + encodeURIComponent(user) + "/test-push",
                             { method: "POST", body: { device_id: device } });
      const status = el("span", { class: "state-pending", id: "test-state" }, "pending");
      result.replaceChildren(el("div", { class: "card" }, "Test push ", apnsLink(sent.apns_id), ": ", status,
                                el("span", { id: "test-detail", class: "muted" }, "")));
      const started = Date.now();
      stopPolling();
      poller = setInterval(async () => {
        try {
          const d = await api("/v1/deliveries?apns_id=" + encodeURIComponent(sent.apns_id));
          status.textContent = d.state;
          status.className = "state-" + d.state;
          $("test-detail").textContent = d.status === null ? "" : " (APNs " + d.status + (d.reason ? ", " + d.reason : "") + ")";
          if (d.state !== "pending" || Date.now() - started > 120000) stopPolling();
        } catch (error) { stopPolling(); showError(error); }
      }, 500);
    } catch (error) {
      showError(error);
    } finally {
      button.disabled = false;
    }
  }

  function summaryCounts(s) {
    return el("div", { class: "counts", id: "summary" }, Object.entries(s).map(([k, v]) =>
      el("div", { class: "count", "data-count": k }, el("b", {}, String(v)), k)));
  }

  // A notification: its counts, and its deliveries a page at a time.
  async function notificationPage(id, after) {
    $("lookup-kind").value = "notification";
    $("lookup-value").value = id;
    const data = await api("/v1/notifications/" + encodeURIComponent(id) + "?limit=50"
                           + (after ? "&after=" + encodeURIComponent(after) : ""));
    const header = [el("h2", {}, "Notification ", el("span", { class: "mono" }, id))];
    if (data.state) {
      view().replaceChildren(...header, scheduledCard(data));
      return;
    }
    const columns = ["User", "Environment", "Token", "State", "Status", "Reason", "Attempts", "Finished", "apns-id"];
    const rows = data.deliveries.map((d) => [userLink(d.user_id), d.environment, el("span", { class: "mono" }, short(d.token)),
      deliveryState(d), d.status === null ? "—" : String(d.status), d.reason || "—", String(d.attempts),
      time(d.finished_at), apnsLink(d.apns_id)]);
    view().replaceChildren(...header,
      el("div", { class: "card" }, el("p", {}, "Type ", el("b", {}, data.type),
        data.entity_id ? " · entity " + data.entity_id : "", " · created " + time(data.created_at),
        data.sent_at ? " · sent " + time(data.sent_at) : ""),
        contentBlock(data.content), summaryCounts(data.summary)),
      el("h3", {}, "Deliveries" + (after ? " (a later page)" : "")),
      rows.length ? table("deliveries", columns, rows) : el("p", { class: "muted" }, "No deliveries."),
      data.next ? el("button", { type: "button", class: "more secondary", id: "next-page",
        onclick: () => notificationPage(id, data.next).catch(showError) }, "Next page") : "");
  }

  async function apnsPage(id) {
    $("lookup-kind").value = "apns";
    $("lookup-value").value = id;
    const d = await api("/v1/deliveries?apns_id=" + encodeURIComponent(id));
    const facts = [["Notification", notificationLink(d.notification_id)], ["User", userLink(d.user_id)],
      ["Token", el("span", { class: "mono" }, d.token)], ["Environment", d.environment], ["State", deliveryState(d)],
      ["APNs status", d.status === null ? "—" : String(d.status)], ["Reason", d.reason || "—"],
      ["Attempts", String(d.attempts)], ["APNs timestamp", time(d.timestamp)], ["Finished", time(d.finished_at)]];
    if (d.received_at !== undefined) facts.push(["Received", time(d.received_at)], ["Opened", time(d.opened_at)]);
    view().replaceChildren(el("h2", {}, "Delivery ", el("span", { class: "mono" }, id)),
      el("div", { class: "card" }, el("dl", { class: "prefs", id: "delivery" },
        facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]))));
  }

  async function notificationsPage(after, into) {
    const data = await api("/v1/notifications?limit=25" + (after ? "&after=" + encodeURIComponent(after) : ""));
    const columns = ["Created", "Notification", "Type", "App", "Delivered", "Failed", "Pending"];
    const rows = data.notifications.map((n) => [time(n.created_at), notificationLink(n.notification_id), n.type, n.app_type,
      el("span", { class: "state-delivered" }, String(n.summary.delivered)),
      el("span", { class: "state-failed" }, String(n.summary.failed)),
      el("span", { class: "state-pending" }, String(n.summary.pending))]);
    showPage(into, data.next, rows, { title: "Recent notifications", name: "notifications", columns,
      empty: "No notifications yet.", more: "More notifications", next: notificationsPage });
  }

  async function deactivatedPage(after, into) {
    const data = await api("/v1/deactivated-device-tokens?limit=50" + (after ? "&after=" + encodeURIComponent(after) : ""));
    const columns = ["Deactivated", "User", "App", "Environment", "Reason", "Token", "Last used"];
    const rows = data.tokens.map((d) => [time(d.deactivated_at), userLink(d.user_id), d.app_type, d.environment,
      el("span", { class: "inactive" }, d.deactivated_reason || "?"), el("span", { class: "mono", title: d.token }, short(d.token)),
      time(d.last_used_at)]);
    showPage(into, data.next, rows, { title: "Tokens deactivated in the last " + data.hours + " hours",
      name: "deactivated", columns, empty: "No token was deactivated in that time.", more: "More tokens",
      next: deactivatedPage });
  }

  // A list's first page as a new view, or a later page appended to the table shown
  // (into), with a "More" button that fetches the page after it.
  function showPage(into, next, rows, list) {
    const container = into || el("div", {});
    if (!into) {
      view().replaceChildren(el("h2", {}, list.title), container);
      container.append(rows.length ? table(list.name, list.columns, rows) : el("p", { class: "muted" }, list.empty));
    } else {
      const body = container.querySelector("tbody");
      for (const cells of rows) body.append(el("tr", {}, cells.map((c, i) => el("td", { "data-label": list.columns[i] }, c))));
    }
    const old = container.querySelector(".more");
    if (old) old.remove();
    if (next) container.append(el("button", { type: "button", class: "more secondary",
      onclick: () => list.next(next, container).catch(showError) }, list.more));
  }

  // Why a pending delivery (or a scheduled notification) has not gone, as the API's
  // `waiting` says it: quiet hours in the user's own clock and zone as well as UTC.
  function waitingText(w, attempts) {
    switch (w.reason) {
      case "quiet_hours": return "quiet hours until " + w.local_until + " " + w.time_zone + " (" + time(w.until) + ")";
      case "batching": return "batching window until " + time(w.until);
      case "retry_backoff": return "retry backoff after " + attempts + (attempts === 1 ? " attempt" : " attempts")
        + ", next try " + time(w.until);
      case "scheduled": return "scheduled for " + time(w.until);
      case "sending": return "being sent now";
      case "due": return "due since " + time(w.since);
      case "late": return "late: due since " + time(w.since) + ", still in the outbox";
      default: return w.reason;
    }
  }

  function waitingNote(w, attempts) {
    return w ? el("span", { class: "waiting", "data-reason": w.reason }, waitingText(w, attempts)) : null;
  }

  // What a notification says: its alert and the entity it is about.
  function contentBlock(c) {
    if (!c) return null;
    return el("dl", { class: "prefs content", id: "content" },
      el("dt", {}, "Title"), el("dd", { class: "content-title" }, c.title === null ? "—" : c.title),
      el("dt", {}, "Body"), el("dd", { class: "content-body" }, c.body === null ? "—" : c.body),
      c.entity_type || c.entity_title ? [el("dt", {}, "Entity"),
        el("dd", {}, [c.entity_type, c.entity_title].filter((x) => x).join(": "))] : null);
  }

  // No token, no delivery and no saved preference: the server has never seen the
  // id (its preferences would read as the defaults, as if chosen).
  function isUnknownUser(devices, preferences, deliveries) {
    return devices.tokens.length === 0 && deliveries.deliveries.length === 0 && preferences.saved === false;
  }

  function noSuchUser(id) {
    view().replaceChildren(el("h2", {}, "User ", el("span", { class: "mono" }, id)),
      el("p", { class: "error", id: "no-such-user" }, "No such user: no device token, delivery or saved preference has this id."));
  }

  // Cancels a scheduled notification; the button's row (or card) shows the result.
  function cancelButton(id, stateNode, after) {
    const button = el("button", { type: "button", class: "cancel secondary", "data-notification": id,
      onclick: async () => {
        button.disabled = true;
        showError(null);
        try {
          const done = await api("/v1/notifications/" + encodeURIComponent(id), { method: "DELETE" });
          stateNode.textContent = done.state || "cancelled";
          stateNode.className = "state-" + (done.state || "cancelled");
          button.remove();
          if (after) after();
        } catch (error) { button.disabled = false; showError(error); }
      } }, "Cancel");
    return button;
  }

  // A scheduled notification not fanned out (or never to be).
  function scheduledCard(data) {
    const state = stateCell(data.state);
    const note = waitingNote(data.waiting, 0);
    return el("div", { class: "card", id: "scheduled-notification" },
      el("p", {}, "Scheduled: ", state, " · type ", el("b", {}, data.type),
        data.app_type ? " · app " + data.app_type : "", " · to be sent " + time(data.send_at),
        " · asked for " + time(data.created_at)),
      note ? el("p", {}, note) : null,
      contentBlock(data.content),
      data.state === "scheduled" && may("send") ? cancelButton(data.notification_id, state, () => { if (note) note.remove(); }) : null);
  }

  async function scheduledPage(after, into) {
    const data = await api("/v1/scheduled-notifications?limit=50" + (after ? "&after=" + encodeURIComponent(after) : ""));
    const columns = ["Send at", "Notification", "Type", "App", "Title", "Asked for", "State", ""];
    const rows = data.notifications.map((n) => {
      const state = stateCell(n.state);
      return [time(n.send_at), notificationLink(n.notification_id), n.type, n.app_type,
        n.content && n.content.title ? n.content.title : "—", time(n.created_at), state,
        n.state === "scheduled" && may("send") ? cancelButton(n.notification_id, state) : ""];
    });
    showPage(into, data.next, rows, { title: "Scheduled notifications still to go", name: "scheduled", columns,
      empty: "No scheduled notification is waiting.", more: "More scheduled notifications", next: scheduledPage });
  }

  // The last hour from the server's own counters, redrawn every 5 s.
  async function statsPage() {
    const holder = el("div", { id: "stats" });
    view().replaceChildren(el("h2", {}, "Deliveries over the last hour"),
      el("p", { class: "muted" }, "This server process's final answers from APNs, a point a second (counted since it started)."),
      holder);
    const draw = async () => {
      const s = await api("/v1/stats/deliveries");
      holder.replaceChildren(lineChart(s), reasonBars(s.failed_by_reason));
    };
    await draw();
    poller = setInterval(() => draw().catch((e) => { stopPolling(); showError(e); }), 5000);
  }

  function lineChart(s) {
    const width = 720, height = 180, pad = 24;
    const max = Math.max(1, ...s.delivered, ...s.failed);
    const n = s.delivered.length;
    const points = (series) => series.map((v, i) =>
      (pad + (i * (width - pad)) / Math.max(1, n - 1)).toFixed(1) + "," + (height - pad - (v * (height - 2 * pad)) / max).toFixed(1)).join(" ");
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img",
                               "aria-label": "Deliveries and failures per second" });
    chart.append(svg("line", { class: "axis", x1: pad, y1: height - pad, x2: width, y2: height - pad }),
                 svg("line", { class: "axis", x1: pad, y1: pad, x2: pad, y2: height - pad }));
    const label = (x, y, text) => { const t = svg("text", { x, y }); t.textContent = text; return t; };
    chart.append(label(2, pad + 4, String(max)), label(2, height - pad, "0"),
                 label(pad, height - 6, "−60 min"), label(width - 40, height - 6, "now"));
    chart.append(svg("polyline", { class: "delivered", points: points(s.delivered) }),
                 svg("polyline", { class: "failed", points: points(s.failed) }));
    const total = (a) => a.reduce((x, y) => x + y, 0);
    return el("div", { class: "card chart" },
      el("div", { class: "legend" }, el("span", { class: "ok" }, "■ delivered/s (" + total(s.delivered) + " in the hour)"),
        el("span", { class: "bad" }, "■ failed/s (" + total(s.failed) + ")")), chart);
  }

  function reasonBars(reasons) {
    const entries = Object.entries(reasons);
    const card = el("div", { class: "card bars", id: "reasons" }, el("h3", {}, "Failures by reason"));
    if (!entries.length) { card.append(el("p", { class: "muted" }, "No failures in the last hour.")); return card; }
    const row = 24, width = 720, labelWidth = 200;
    const max = Math.max(...entries.map(([, n]) => n));
    const chart = svg("svg", { viewBox: `0 0 ${width} ${row * entries.length}`, role: "img",
                               "aria-label": "Failures by reason" });
    entries.forEach(([reason, n], i) => {
      const t = svg("text", { x: 0, y: i * row + 16 }); t.textContent = reason;
      const w = Math.max(2, ((width - labelWidth - 60) * n) / max);
      const v = svg("text", { x: labelWidth + w + 6, y: i * row + 16 }); v.textContent = String(n);
      chart.append(t, svg("rect", { class: "bar", x: labelWidth, y: i * row + 4, width: w, height: row - 8 }), v);
    });
    card.append(chart);
    return card;
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("signin-form").addEventListener("submit", signIn);
    $("lookup").addEventListener("submit", lookup);
    $("signout").addEventListener("click", () => signOut(""));
    window.addEventListener("hashchange", route);
    if (signedIn()) enter(); else $("key").focus();
  });
})();
