/* The hookgate portal: sign in with a token or the identity provider, decide the org's approval requests, start runs
   and follow them live. Plain DOM and no framework; data from the API reaches the page only
   through text nodes (textContent), never as markup. */
"use strict";

(() => {
  const TOKEN_KEY = "hookgate.token";
  const main = document.getElementById("main");

  const session = {
    token: localStorage.getItem(TOKEN_KEY),
    // Signed in through the identity provider: the session is an HttpOnly cookie, and every
    // state-changing request sends this CSRF token (null: not signed in that way).
    csrf: null,
    // Whether the server offers sign-in through an identity provider (null: not asked yet).
    oidc: null,
    me: null,
    pending: new Set(), // ids of the pending requests this person may decide (the nav count)
    inbox: null, // the org's live confirmation stream
    view: null, // {cleanup?, onConfirmation?, refresh?} of the page on screen
  };

  // -- talking to the API ---------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, { method = "GET", body, token = session.token } = {}) {
    const headers = {};
    if (token) headers.Authorization = `Bearer ${token}`;
    else if (session.csrf && method !== "GET") headers["X-CSRF-Token"] = session.csrf;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new ApiError(0, "The server could not be reached; check the connection and try again.");
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!response.ok) {
      const said = data && (data.error || data.detail);
      const message = typeof said === "string" ? said : `${response.status} ${response.statusText}`;
      if (response.status === 401 && token === session.token && (session.token || session.csrf)) {
        signOut(`You were signed out: ${message}.`);
      }
      throw new ApiError(response.status, message);
    }
    return data;
  }

  /** An EventSource for one of the two streaming routes (they take the token in the URL,
      because EventSource cannot send an Authorization header). */
  function stream(path) {
    if (session.csrf) return new EventSource(path); // the session cookie goes with it
    const sep = path.includes("?") ? "&" : "?";
    return new EventSource(`${path}${sep}access_token=${encodeURIComponent(session.token)}`);
  }

  // -- building the page ----------------------------------------------------------------------

  /** An element with properties and children; strings become text nodes. */
  function h(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  let uid = 0;
  const nextId = (prefix) => `${prefix}-${++uid}`;

  // Characters that would hide or reorder what a person reads (controls, bidi overrides,
  // zero-width marks) are shown as escapes: the approver must see exactly what will run.
  const HIDDEN = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF]/g;
  const visible = (text) => String(text).replace(
    HIDDEN, (c) => `\\u${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`);

  const json = (value) => visible(JSON.stringify(value, null, 2));
  const shown = (value) => (typeof value === "string" ? visible(value) : json(value));
  const isRecord = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

  /** The arguments, one row each; ``numbers`` (path → "60,000") are shown beside the
      exact value, never instead of it. */
  function argsView(args, numbers = {}) {
    if (!isRecord(args) || Object.keys(args).length === 0) {
      return h("pre", { class: "code" }, json(args));
    }
    return h("dl", { class: "args" }, Object.entries(args).map(([key, value]) => [
      h("dt", {}, visible(key)),
      h("dd", {}, typeof value === "string" || typeof value === "number"
        ? shown(value) : h("pre", { class: "code" }, json(value)),
      typeof value === "number" && numbers[key]
        ? h("span", { class: "readable" }, ` (${numbers[key]})`) : null),
    ]));
  }

  function when(iso) {
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
  }

  function ago(iso) {
    const seconds = (Date.now() - new Date(iso).getTime()) / 1000;
    if (!Number.isFinite(seconds)) return String(iso);
    if (seconds < 45) return "just now";
    if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
    return new Date(iso).toLocaleDateString();
  }

  function duration(totalSeconds) {
    const s = Math.max(0, Math.floor(totalSeconds));
    const pad = (n) => String(n).padStart(2, "0");
    const days = Math.floor(s / 86400);
    const hours = Math.floor((s % 86400) / 3600);
    const minutes = Math.floor((s % 3600) / 60);
    if (days) return `${days}d ${hours}h`;
    if (hours) return `${hours}h ${pad(minutes)}m`;
    if (minutes) return `${minutes}m ${pad(s % 60)}s`;
    return `${s % 60}s`;
  }

  const STATUS_TEXT = {
    pending: "Pending", approved: "Approved", rejected: "Rejected", expired: "Expired",
    cancelled: "Cancelled", running: "Running", awaiting_approval: "Waiting for approval",
    completed: "Completed", not_approved: "Completed; a call was not approved",
    call_blocked: "Completed; a call was blocked", failed: "Failed", blocked_build: "Hooks failed to build",
    session_blocked: "Blocked at start", max_steps: "Stopped (too many turns)",
  };
  const STATUS_TONE = {
    pending: "wait", awaiting_approval: "wait", running: "info", approved: "good",
    completed: "good", not_approved: "bad", call_blocked: "bad", rejected: "bad", expired: "bad", cancelled: "muted", failed: "bad",
    blocked_build: "bad", session_blocked: "bad", max_steps: "bad",
  };

  function badge(status) {
    return h("span", { class: `badge ${STATUS_TONE[status] || "muted"}` },
      STATUS_TEXT[status] || String(status).replaceAll("_", " "));
  }

  /** Time left until ``seconds`` from now; the clock ticks in ``tick`` below. */
  function countdown(seconds, expiresAt) {
    return h("time", {
      class: "countdown", datetime: expiresAt,
      dataset: { deadline: String(Date.now() + seconds * 1000) },
    }, duration(seconds));
  }

  function tick() {
    for (const node of document.querySelectorAll("[data-deadline]")) {
      const left = (Number(node.dataset.deadline) - Date.now()) / 1000;
      node.textContent = left > 0 ? duration(left) : "time is up";
      node.classList.toggle("soon", left < 300);
    }
  }

  function announce(message) {
    const live = document.getElementById("announcer");
    live.textContent = "";
    setTimeout(() => { live.textContent = message; }, 50);
  }

  /** Put a page on screen: its title, its content, focus on its heading. */
  function show(title, ...content) {
    document.title = `${title} · hookgate`;
    const heading = h("h1", { tabindex: "-1" }, title);
    main.replaceChildren(heading, ...content);
    heading.focus({ preventScroll: true });
    window.scrollTo(0, 0);
    return heading;
  }

  function failure(err) {
    return h("p", { class: "alert", role: "alert" }, err instanceof ApiError ? err.message : String(err));
  }

  // -- approval requests ----------------------------------------------------------------------

  const cardRequests = new WeakMap(); // card element → the request it shows

  const SCOPE_TEXT = {
    initiator: "only the person who started the run",
    agent_owner: "only the agent's owner",
    org_members: "any member of the organisation",
  };

  const VIA_TEXT = {
    inbox: "the web inbox", api: "the API", cli: "the CLI", feishu: "Feishu", slack: "Slack",
    wecom: "WeCom", timeout: "the timeout fallback",
  };

  function sameFollowup(a, b) {
    const fa = a.followup || {}, fb = b.followup || {};
    return a.unreachable === b.unreachable && fa.reminders_sent === fb.reminders_sent
      && fa.escalated_at === fb.escalated_at;
  }

  // Reminders and escalation so far, and whether anyone who may decide can be reached.
  function followupView(req) {
    const f = req.followup || {};
    const out = [];
    if (req.unreachable) {
      out.push(h("p", { class: "alert unreachable", role: "alert" },
        h("strong", {}, "No approver can be reached: "), visible(req.unreachable)));
    }
    const parts = [];
    if (f.reminders_sent) {
      parts.push(`Reminded ${f.reminders_sent} time${f.reminders_sent === 1 ? "" : "s"}`);
      if (f.last_reminded_at) parts.push(` (last ${when(f.last_reminded_at)})`);
    }
    if (f.escalated_at) {
      if (parts.length) parts.push("; ");
      parts.push(`escalated to ${(f.escalated_to || []).map(visible).join(", ") || "nobody"} ${when(f.escalated_at)}`);
    }
    if (parts.length) out.push(h("p", { class: "followup" }, parts));
    return out;
  }

  /** What the approver reads besides the arguments: why a person is asked, the user's
      words, the tool. */
  function contextView(req) {
    const c = req.context || {};
    const rows = [];
    // Each fact a row of its own (a div in the list): side by side on a wide screen, the
    // label run into its text on a narrow one, so the buttons stay near.
    const row = (label, cls, ...value) => rows.push(h("div", { class: "fact" }, h("dt", {}, label), h("dd", { class: cls }, ...value)));
    const reasons = (c.reasons || []).filter((r) => r && r.text);
    if (reasons.length === 1) row("Why approval is needed", "why", visible(reasons[0].text));
    else if (reasons.length) {
      row("Why approval is needed", "why", h("ul", { class: "reasons" }, reasons.map((r) => h("li", {}, visible(r.text)))));
    }
    const coding = c.coding_agent;
    if (coding && coding.name) {
      row("Coding agent", "coding-agent", visible(coding.name), coding.cwd ? " in " : "", coding.cwd ? h("code", { class: "cwd" }, visible(coding.cwd)) : "");
    }
    if (c.user_message) row("User asked", "user-message", visible(c.user_message));
    if (c.tool_description) row("What the tool does", "tool-description", visible(c.tool_description));
    const nested = (c.numbers || []).filter((n) => /[.[]/.test(n.path));
    if (nested.length) row("Numbers", "numbers", nested.map((n) => `${visible(n.path)} = ${n.text}`).join("; "));
    return rows.length ? h("dl", { class: "context" }, rows) : null;
  }

  /** One approval request, compact: what will run, who asked, time left and, while it is
      pending, Approve / Reject at once; the rest (why, reason, message, edit, remember, the
      decision record) opens on demand. A decided request is one line until opened
      (``full``: opened from the start, as on its own page). */
  function requestCard(req, { notice = null, showRun = true, full = false } = {}) {
    const headingId = nextId("request");
    const pending = req.status === "pending";
    const card = h("article", {
      class: `card request ${req.status}${pending ? "" : " compact"}`, "aria-labelledby": headingId,
      dataset: { requestId: req.id },
    });
    cardRequests.set(card, req);
    const payload = req.payload || {};
    const numbers = Object.fromEntries(((req.context || {}).numbers || []).map((n) => [n.path, n.text]));
    const heading = h("h3", { id: headingId, tabindex: "-1" },
      h("span", { class: "visually-hidden" }, "Call of "),
      h("code", { class: "tool" }, visible(payload.tool_name)));
    const exact = h("details", { class: "exact" },
      h("summary", {}, "Exact arguments"),
      h("pre", { class: "code" }, json(payload.args)),
      h("p", { class: "digest" }, "SHA-256 ", h("code", {}, payload.args_sha256 || "—")));
    const meta = h("p", { class: "meta" },
      h("span", {}, visible(req.agent_name || req.agent_id)),
      h("span", {}, "requested by ", h("strong", {}, visible(req.requested_by))),
      h("time", { datetime: req.created_at, title: when(req.created_at) }, ago(req.created_at)),
      pending ? h("span", { class: "time-left" }, "Time left: ", countdown(req.seconds_left, req.expires_at)) : null);
    const links = [h("a", { href: `#/confirmations/${encodeURIComponent(req.id)}` }, "Permalink")];
    if (showRun) links.unshift(h("a", { href: `#/runs/${encodeURIComponent(req.run_id)}` }, "Open the run"));
    const progress = quorumText(req);

    if (!pending) {
      // One line: the call, the decision, the arguments in brief; the record on demand.
      const more = h("details", { class: "more", open: full },
        h("summary", { class: "line" }, heading,
          h("span", { class: "who" }, decisionWords(req), progress ? ` · ${progress}` : null),
          h("span", { class: "brief" }, argsBrief(payload.args, numbers))),
        meta, contextView(req), argsView(payload.args, numbers), exact,
        progress ? h("p", { class: "quorum" }, progress) : null,
        decisionRecord(req), h("p", { class: "links" }, links));
      card.append(more);
      if (notice) card.append(h("p", { class: "alert", role: "alert" }, notice));
      return card;
    }

    // In the inbox, a request this person may decide can be picked for a batch decision.
    const selectable = req.can_decide && document.getElementById("batch");
    card.append(
      h("header", { class: "card-head" },
        selectable ? h("input", {
          type: "checkbox", class: "select", value: req.id,
          "aria-label": `Select the call of ${payload.tool_name} for a decision together`,
          onchange: syncBatch,
        }) : null,
        heading, badge(req.status),
        req.unreachable ? h("span", { class: "badge bad unreachable" }, "Nobody reachable") : null),
      ...followupView(req),
      meta,
      // Why a person is asked, what the user asked for and what the tool does: read
      // before the decision, never folded away.
      contextView(req),
      argsView(payload.args, numbers),
      historyView(req));
    if (notice) card.append(h("p", { class: "alert", role: "alert" }, notice));
    if (progress) card.append(h("p", { class: "quorum" }, progress));
    const details = [exact];
    const voted = ((req.approvals || {}).approved_by || []).some((v) => session.me && v.user_id === session.me.user_id);
    if (req.can_decide) {
      card.append(decisionForm(req, details));
    } else {
      card.append(h("p", { class: "note" }, voted
        ? "You approved this request; it waits for the other approvals it needs."
        : `You cannot decide this request: ${SCOPE_TEXT[req.approver_scope] || req.approver_scope} may.`),
      h("details", { class: "more" }, h("summary", {}, "Exact arguments and digest"), details));
    }
    card.append(h("p", { class: "links" }, links));
    return card;
  }

  /** "amount 60,000 · vendor ACME": the arguments on one line, for a glance. */
  function argsBrief(args, numbers = {}) {
    if (!isRecord(args)) return visible(JSON.stringify(args));
    return Object.entries(args).map(([key, value]) => `${visible(key)} ${
      typeof value === "number" && numbers[key] ? numbers[key]
        : typeof value === "number" ? value.toLocaleString("en")
          : typeof value === "string" ? visible(value) : visible(JSON.stringify(value))}`).join(" · ");
  }

  /** "Approved by alice via the web inbox": who decided and how, in words. */
  function decisionWords(req) {
    const d = req.decision || {};
    const parts = [h("strong", {}, STATUS_TEXT[req.status] || req.status)];
    if (d.responded_by) parts.push(" by ", h("strong", {}, visible(d.responded_by)));
    if (d.channel_identity) parts.push(` (${visible(d.channel_identity)})`);
    if (d.via) parts.push(` via ${VIA_TEXT[d.via] || visible(d.via)}`);
    return parts;
  }

  /** How an earlier call's approval went: by a person, by a standing rule, or not asked. */
  function approvalWords(approval) {
    if (!approval) return null;
    if (approval.rule_id) {
      return `approved by rule ${visible(approval.rule_id)} (created by ${visible(approval.decided_by || "?")})`;
    }
    const verb = (STATUS_TEXT[approval.status] || String(approval.status)).toLowerCase();
    return approval.decided_by ? `${verb} by ${visible(approval.decided_by)}` : verb;
  }

  const historyCache = new Map(); // request id → its run's earlier calls (fetched once)

  /** "Earlier in this run": the run's finished calls before this one (tool, arguments,
      outcome, who approved), filled in once the request's record arrives. */
  function historyView(req) {
    const box = h("div", { class: "history", "aria-label": "What this run already did" });
    const fill = (history) => {
      const calls = (history && history.calls) || [];
      if (!calls.length) {
        box.replaceChildren(h("p", { class: "none" }, "First call of this run."));
        return;
      }
      const recent = calls.slice(-3);
      const earlier = calls.length - recent.length + ((history && history.more) || 0);
      box.replaceChildren(h("p", { class: "history-title" }, "Already done in this run:"),
        h("ul", {}, recent.map((c) => h("li", {},
          h("code", {}, visible(c.tool_name)), " ", argsBrief(c.args), " — ",
          h("span", { class: c.status === "ok" ? "ok" : "bad" },
            c.status === "ok" ? "done" : c.status === "blocked" ? `blocked${c.reason ? `: ${visible(c.reason)}` : ""}` : visible(c.status)),
          c.approval ? [", ", approvalWords(c.approval)] : null))),
        ...(earlier > 0 ? [h("p", { class: "sub" }, `and ${earlier} earlier call${earlier === 1 ? "" : "s"} (open the run)`)] : []));
    };
    if (req.run_history) {
      historyCache.set(req.id, req.run_history);
      fill(req.run_history);
    } else if (historyCache.has(req.id)) {
      fill(historyCache.get(req.id));
    } else {
      api(`/api/confirmations/${encodeURIComponent(req.id)}`).then((full) => {
        historyCache.set(req.id, full.run_history);
        fill(full.run_history);
      }, () => box.replaceChildren());
    }
    return box;
  }

  /** "1 of 2 approvals (bob)" for a request that needs several people, else null. */
  function quorumText(req) {
    const a = req.approvals || {};
    if (!a.required || a.required < 2) return null;
    const names = (a.approved_by || []).map((v) => visible(v.user_id)).join(", ");
    return `${a.count} of ${a.required} approvals` + (names ? ` (${names})` : "");
  }

  function decisionRecord(req) {
    const d = req.decision || {};
    const parts = decisionWords(req);
    if (d.responded_at) {
      parts.push(" at ", h("time", { datetime: d.responded_at }, when(d.responded_at)));
    }
    const out = h("div", { class: "decision" }, h("p", {}, parts));
    if (d.reason) out.append(h("blockquote", {}, visible(d.reason)));
    const changes = req.changes || [];
    if (changes.length) {
      out.append(h("div", { class: "edits" },
        h("h4", {}, "Approved with edited arguments"),
        h("ul", {}, changes.map((c) => h("li", {},
          h("code", {}, visible(c.path)), ": ",
          c.added ? ["added ", h("code", {}, json(c.after))]
            : c.removed ? ["removed (was ", h("code", {}, json(c.before)), ")"]
              : [h("del", {}, json(c.before)), " → ", h("ins", {}, json(c.after))]))),
        h("p", { class: "sub" }, "What runs instead of the arguments asked for:"),
        argsView(payloadOf(req).edited_args),
        h("p", { class: "digest" }, "SHA-256 ", h("code", {}, payloadOf(req).edited_args_sha256 || "—"))));
    }
    if (d.message) {
      out.append(h("div", { class: "message" }, h("h4", {}, "Message to the agent"),
        h("blockquote", {}, visible(d.message))));
    }
    return out;
  }

  const payloadOf = (req) => req.payload || {};

  /** Approve / Reject first; reason, message, edit and "approve and remember" (and
      ``details``: the exact arguments and their digest) on demand. An error shows beside
      the control that caused it, scrolled into view. */
  function decisionForm(req, details = []) {
    const reasonId = nextId("reason");
    const messageId = nextId("message");
    const argsId = nextId("arguments");
    const asked = JSON.stringify(req.payload.args, null, 2);
    const error = h("p", { class: "alert", role: "alert", hidden: true });
    const editError = h("p", { class: "alert", role: "alert", hidden: true });
    const canApprove = req.can_approve !== false;
    const remember = canApprove && !quorumText(req) ? rememberFields(req) : null;
    const form = h("form", { class: "decide", "aria-label": `Decide on ${req.payload.tool_name}` },
      canApprove ? null : h("p", { class: "note" }, "You requested this call: another person must approve it (four eyes). You may reject it."),
      h("div", { class: "actions primary" },
        canApprove ? h("button", { type: "submit", name: "decision", value: "approve", class: "button approve" }, "Approve") : null,
        h("button", { type: "submit", name: "decision", value: "reject", class: "button reject" }, "Reject")),
      error,
      h("details", { class: "more" },
        h("summary", {}, canApprove ? "Reason, message, edit, remember" : "Reason, message"),
        details,
        h("label", { for: reasonId }, "Reason ", h("span", { class: "optional" }, "(optional, for the record)")),
        h("textarea", { id: reasonId, name: "reason", rows: "2", maxlength: "2000" }),
        h("label", { for: messageId }, "Message to the agent ", h("span", { class: "optional" }, "(optional, the model reads it)")),
        h("textarea", { id: messageId, name: "message", rows: "2", maxlength: "2000" }),
        !canApprove || req.can_edit === false || quorumText(req) ? null : h("details", { class: "edit" },
          h("summary", {}, "Edit the arguments before approving"),
          h("p", { class: "sub" }, "Checked against the tool's schema; the agent is told what you changed."),
          editFields(req),
          h("details", { class: "raw" },
            h("summary", {}, "Edit as JSON (for nested values)"),
            h("label", { for: argsId }, "Arguments (JSON)"),
            h("textarea", { id: argsId, name: "arguments", rows: "6", spellcheck: "false", class: "code" })),
          h("div", { class: "actions" },
            h("button", { type: "submit", name: "decision", value: "approve-edited", class: "button approve-edited" }, "Approve with these arguments")),
          editError),
        remember,
        remember ? h("div", { class: "actions" },
          h("button", { type: "submit", name: "decision", value: "approve", class: "button approve-remember" }, "Approve (and remember)")) : null));
    // A value, not markup: the arguments show exactly as they are.
    if (form.elements.arguments) {
      form.elements.arguments.value = asked;
      syncEdits(form, editError);
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const pressed = event.submitter && event.submitter.value;
      if (!["approve", "approve-edited", "reject"].includes(pressed)) return;
      const decision = pressed === "reject" ? "reject" : "approve";
      const body = { decision, via: "inbox" };
      const reason = form.elements.reason.value.trim();
      const message = form.elements.message.value.trim();
      if (reason) body.reason = reason;
      if (message) body.message = message;
      if (pressed === "approve-edited") {
        let edited;
        try {
          edited = JSON.parse(form.elements.arguments.value);
        } catch (err) {
          say(editError, `The edited arguments are not valid JSON: ${err.message}`);
          form.elements.arguments.focus({ preventScroll: true });
          return;
        }
        body.arguments = edited;
      }
      const rule = decision === "approve" && remember ? rememberBody(form) : null;
      if (rule) body.remember = rule;
      // Disabling the pressed button drops its focus; remember to put focus on the result.
      const focus = form.contains(document.activeElement);
      const buttons = form.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      form.querySelectorAll("[role=alert]").forEach((n) => { n.hidden = true; });
      try {
        const decided = await api(`/api/confirmations/${encodeURIComponent(req.id)}/respond`, {
          method: "POST", body,
        });
        updateCards(decided, { focus });
        if (session.view && session.view.onConfirmation) session.view.onConfirmation(decided);
        announce(`${STATUS_TEXT[decided.status]}: ${decided.payload.tool_name}.`
          + (decided.rule ? ` Remembered as rule ${decided.rule.id}.` : ""));
      } catch (err) {
        if (err.status === 409 || err.status === 404) {
          // Someone else decided first (or it is gone): show the current record with why.
          const fresh = await api(`/api/confirmations/${encodeURIComponent(req.id)}`).catch(() => null);
          if (fresh) {
            updateCards(fresh, { notice: err.message, force: true, focus });
            if (session.view && session.view.onConfirmation) session.view.onConfirmation(fresh);
            return;
          }
        }
        buttons.forEach((b) => { b.disabled = false; });
        if (focus && event.submitter) event.submitter.focus({ preventScroll: true });
        // Beside the control that caused it: the edit's own error under "Approve with
        // these arguments", any other under the button pressed.
        say(pressed === "approve-edited" ? editError
          : event.submitter && event.submitter.classList.contains("approve-remember") ? rememberError(form) : error,
        err.message);
      }
    });
    return form;
  }

  /** The JSON-schema type of one parameter ("number", "integer", "boolean", "string"), or
      null when it is not one plain value (objects, arrays, unions: edited as JSON). An
      optional parameter (``anyOf`` with null) has the type of its other branch. */
  function plainType(schema) {
    if (!isRecord(schema)) return null;
    let type = schema.type;
    if (type === undefined && Array.isArray(schema.anyOf)) {
      const branches = schema.anyOf.filter((b) => !(isRecord(b) && b.type === "null"));
      if (branches.length === 1 && isRecord(branches[0])) return plainType(branches[0]);
      return null;
    }
    if (Array.isArray(type)) {
      const others = type.filter((t) => t !== "null");
      type = others.length === 1 ? others[0] : null;
    }
    return ["number", "integer", "boolean", "string"].includes(type) ? type : null;
  }

  /** One input per argument, typed from the tool's parameters (``req.parameters``): a
      number input for numbers, a checkbox for booleans, a text field (or a list of the
      allowed values) for strings. Other values (nested ones) are edited as JSON. */
  function editFields(req) {
    const props = (isRecord(req.parameters) && isRecord(req.parameters.properties)) ? req.parameters.properties : {};
    const args = isRecord(req.payload.args) ? req.payload.args : {};
    const names = [...new Set([...Object.keys(props), ...Object.keys(args)])];
    const rows = [];
    const nested = [];
    for (const name of names) {
      const schema = props[name] || {};
      const type = plainType(schema);
      const value = args[name];
      if (type === null || (value !== undefined && value !== null && typeof value !== (type === "integer" ? "number" : type))) {
        nested.push(name);
        continue;
      }
      const id = nextId("arg");
      const data = { arg: name, type };
      const label = h("label", { for: id }, h("code", {}, visible(name)),
        schema.description ? h("span", { class: "optional" }, ` ${visible(schema.description)}`) : null);
      let input;
      if (type === "boolean") {
        input = h("input", { id, type: "checkbox", class: "arg", dataset: data });
        input.checked = value === true;
        rows.push(h("div", { class: "field check" }, input, label));
        continue;
      }
      if (type === "string" && Array.isArray(schema.enum) && schema.enum.every((v) => typeof v === "string")) {
        input = h("select", { id, class: "arg", dataset: data },
          value === undefined ? h("option", { value: "" }, "(not set)") : null,
          schema.enum.map((v) => h("option", { value: v }, visible(v))));
      } else if (type === "string") {
        input = h("input", { id, type: "text", class: "arg", autocomplete: "off", spellcheck: "false", dataset: data });
      } else {
        input = h("input", {
          id, type: "number", class: "arg", step: type === "integer" ? "1" : "any", dataset: data,
          min: typeof schema.minimum === "number" ? schema.minimum : null,
          max: typeof schema.maximum === "number" ? schema.maximum : null,
        });
      }
      // A value, not markup.
      input.value = value === undefined || value === null ? "" : String(value);
      rows.push(h("div", { class: "field" }, label, input));
    }
    return h("fieldset", { class: "arg-fields" },
      h("legend", {}, "Arguments"),
      rows,
      nested.length ? h("p", { class: "sub nested" },
        `Edit ${nested.map(visible).join(", ")} as JSON below.`) : null);
  }

  /** The per-argument inputs and the JSON text say the same: a change in either is written
      into the other, so what is approved is what both show (the JSON is what is sent). */
  function syncEdits(form, editError) {
    const raw = form.elements.arguments;
    const inputs = [...form.querySelectorAll(".arg-fields .arg")];
    const read = (input) => {
      const type = input.dataset.type;
      if (type === "boolean") return input.checked;
      if (type !== "number" && type !== "integer") return input.value; // "" is a value
      return input.value === "" ? undefined : Number(input.value); // cleared: not given
    };
    for (const input of inputs) {
      input.addEventListener(input.type === "checkbox" || input.tagName === "SELECT" ? "change" : "input", () => {
        let args;
        try {
          args = JSON.parse(raw.value);
        } catch (err) {
          say(editError, `The edited arguments are not valid JSON: ${err.message}; correct the JSON first`);
          return;
        }
        if (!isRecord(args)) return;
        const value = read(input);
        if (value === undefined || Number.isNaN(value)) delete args[input.dataset.arg];
        else args[input.dataset.arg] = value;
        raw.value = JSON.stringify(args, null, 2);
        editError.hidden = true;
      });
    }
    raw.addEventListener("input", () => {
      let args;
      try {
        args = JSON.parse(raw.value);
      } catch {
        return; // checked on submit
      }
      if (!isRecord(args)) return;
      for (const input of inputs) {
        const value = args[input.dataset.arg];
        if (input.dataset.type === "boolean") input.checked = value === true;
        else if (value === undefined || value === null || typeof value === "object") input.value = "";
        else input.value = String(value);
      }
    });
  }

  /** Show ``text`` in the alert ``node`` and bring it into view. */
  function say(node, text) {
    node.textContent = text;
    node.hidden = false;
    node.scrollIntoView({ block: "nearest" });
  }

  function rememberError(form) {
    let node = form.querySelector(".remember-error");
    if (!node) {
      node = h("p", { class: "alert remember-error", role: "alert", hidden: true });
      form.querySelector(".approve-remember").parentElement.after(node);
    }
    return node;
  }

  /** The inbox's batch bar: decide the selected requests (e.g. the parallel calls of one
      turn) together; the server still decides and checks each one on its own. */
  function batchBar() {
    const count = h("span", { class: "count", "aria-live": "polite" }, "None selected");
    const message = h("input", { type: "text", name: "batch-message", maxlength: "2000", "aria-label": "Message to the agent for each selected call (optional)", placeholder: "Message to the agent (optional)" });
    const errors = h("ul", { class: "alert", role: "alert", hidden: true });
    const act = (decision) => async () => {
      const ids = [...document.querySelectorAll("#waiting input.select:checked")].map((b) => b.value);
      if (!ids.length) return;
      const body = { ids, decision, via: "inbox" };
      if (message.value.trim()) body.message = message.value.trim();
      errors.hidden = true;
      try {
        const out = await api("/api/confirmations/batch", { method: "POST", body });
        const failed = [];
        for (const item of out.results) {
          if (item.request) {
            updateCards(item.request, { notice: item.status_code === 200 ? null : item.error, force: item.status_code !== 200 });
            if (session.view && session.view.onConfirmation) session.view.onConfirmation(item.request);
          }
          if (item.status_code !== 200) failed.push(h("li", {}, `${item.id}: ${item.error}`));
        }
        errors.replaceChildren(...failed);
        errors.hidden = failed.length === 0;
        announce(`${out.decided} of ${ids.length} ${decision === "approve" ? "approved" : "rejected"}.`);
        message.value = "";
      } catch (err) {
        errors.replaceChildren(h("li", {}, err.message));
        errors.hidden = false;
      }
      syncBatch();
    };
    return h("div", { id: "batch", class: "batch", role: "group", "aria-label": "Decide the selected requests together", hidden: true },
      h("button", { type: "button", class: "button", onclick: () => {
        const boxes = [...document.querySelectorAll("#waiting input.select")];
        const all = boxes.every((b) => b.checked);
        boxes.forEach((b) => { b.checked = !all; });
        syncBatch();
      } }, "Select all"),
      count, message,
      h("button", { type: "button", class: "button approve-selected", name: "approve-selected", onclick: act("approve") }, "Approve selected"),
      h("button", { type: "button", class: "button reject-selected", name: "reject-selected", onclick: act("reject") }, "Reject selected"),
      errors);
  }

  function syncBatch() {
    const bar = document.getElementById("batch");
    if (!bar) return;
    const boxes = document.querySelectorAll("#waiting input.select");
    const chosen = document.querySelectorAll("#waiting input.select:checked").length;
    bar.hidden = boxes.length < 2 && chosen === 0 && bar.querySelector("[role=alert]").hidden;
    bar.querySelector(".count").textContent = chosen ? `${chosen} selected` : "None selected";
    bar.querySelectorAll("button[name$=-selected]").forEach((b) => { b.disabled = chosen === 0; });
  }

  /** "Approve and remember": whose later calls like this one are approved without asking,
      for how long, and only when (a constraint in the hooks' `when` language). */
  function rememberFields(req) {
    const scopeId = nextId("remember");
    const whenId = nextId("when");
    const forId = nextId("for");
    const who = visible(req.requested_by || "this user");
    return h("fieldset", { class: "remember" },
      h("legend", {}, "Approve and remember"),
      h("label", { for: scopeId }, "Also approve later calls like this "),
      h("select", { id: scopeId, name: "remember_scope" },
        h("option", { value: "" }, "no, only this call"),
        h("option", { value: "run" }, "in this run"),
        h("option", { value: "agent_user" }, `of this agent for ${who}`),
        h("option", { value: "org" }, "of this agent for everyone in the org")),
      h("label", { for: whenId }, "Only when ", h("span", { class: "optional" }, "(optional, e.g. args.amount <= 80000)")),
      h("input", { id: whenId, name: "remember_when", type: "text", maxlength: "2000", autocomplete: "off" }),
      h("label", { for: forId }, "For "),
      h("select", { id: forId, name: "remember_for" },
        h("option", { value: "3600" }, "1 hour"),
        h("option", { value: "86400" }, "1 day"),
        h("option", { value: "604800" }, "7 days"),
        h("option", { value: "" }, "until revoked")));
  }

  function rememberBody(form) {
    const scope = form.elements.remember_scope.value;
    if (!scope) return null;
    const rule = { scope };
    const constraint = form.elements.remember_when.value.trim();
    if (constraint) rule.when = constraint;
    const seconds = form.elements.remember_for.value;
    if (seconds) rule.expires_in = Number(seconds);
    return rule;
  }

  /** Redraw every card of ``req`` on the page; a card someone is typing in stays while the
      request is still pending. */
  function updateCards(req, { notice = null, force = false, focus = false } = {}) {
    const selector = `[data-request-id="${CSS.escape(req.id)}"]`;
    for (const old of document.querySelectorAll(selector)) {
      const before = cardRequests.get(old);
      const same = before && before.status === req.status
        && (before.decision || {}).responded_at === (req.decision || {}).responded_at
        && (before.approvals || {}).count === (req.approvals || {}).count
        && before.can_decide === req.can_decide;
      if (same && !force && !sameFollowup(before, req)) {
        // A reminder, an escalation or the reachability changed: redraw just that part,
        // so a reason being typed stays.
        cardRequests.set(old, req);
        old.querySelectorAll(".followup, .alert.unreachable, .badge.unreachable").forEach((n) => n.remove());
        const head = old.querySelector(".card-head");
        if (req.unreachable && req.status === "pending") {
          head.append(h("span", { class: "badge bad unreachable" }, "Nobody reachable"));
        }
        head.after(...followupView(req));
        continue;
      }
      if (same && !force) {
        if (focus) old.querySelector("h3").focus(); // the live stream drew it first
        continue;
      }
      const hadFocus = focus || old.contains(document.activeElement);
      // A decided card someone opened stays open; one decided just now shows as one line.
      const full = old.dataset.full === "yes"
        || (before && before.status !== "pending" && !!old.querySelector(":scope > details.more[open]"));
      const fresh = requestCard(req, { notice, showRun: old.dataset.showRun !== "no", full });
      fresh.dataset.showRun = old.dataset.showRun || "";
      fresh.dataset.full = old.dataset.full || "";
      old.replaceWith(fresh);
      if (hadFocus) fresh.querySelector("h3").focus();
    }
    trackPending(req);
  }

  function trackPending(req) {
    // Only what this person may decide counts: a request they cannot act on is not "theirs".
    if (req.status === "pending" && req.can_decide) session.pending.add(req.id);
    else session.pending.delete(req.id);
    const count = document.getElementById("pending-count");
    count.replaceChildren(String(session.pending.size), h("span", { class: "visually-hidden" }, " waiting"));
    count.hidden = session.pending.size === 0;
  }

  async function refreshPending() {
    const pending = await api("/api/confirmations?status=pending");
    session.pending.clear();
    pending.forEach(trackPending);
    if (!pending.length) trackPending({ id: "", status: "none" });
    return pending;
  }

  /** The org's confirmation stream, open while signed in: counts, cards and the inbox. */
  function openInboxStream() {
    closeInboxStream();
    const source = stream("/api/confirmations/events");
    let dropped = false;
    source.addEventListener("confirmation", (event) => {
      const req = JSON.parse(event.data);
      const known = session.pending.has(req.id);
      updateCards(req);
      if (session.view && session.view.onConfirmation) session.view.onConfirmation(req);
      if (req.status === "pending" && !known) {
        announce(`New approval request: ${req.payload.tool_name} from ${req.requested_by}.`);
      }
    });
    source.addEventListener("open", () => {
      if (!dropped) return;
      dropped = false;
      banner(null);
      // Whatever changed while the stream was down: fetch it again.
      refreshPending().catch(() => {});
      if (session.view && session.view.refresh) session.view.refresh();
    });
    source.addEventListener("error", () => {
      dropped = true;
      if (source.readyState === EventSource.CLOSED) {
        // Refused (e.g. the token was revoked): api() signs out on 401, else try again later.
        api("/api/me").then(() => {
          banner("Live updates stopped; reconnecting…");
          setTimeout(() => { if (session.inbox === source) openInboxStream(); }, 5000);
        }, () => {});
      }
    });
    session.inbox = source;
  }

  function closeInboxStream() {
    if (session.inbox) session.inbox.close();
    session.inbox = null;
  }

  function banner(text) {
    const node = document.getElementById("banner");
    node.textContent = text || "";
    node.hidden = !text;
  }

  // -- pages ----------------------------------------------------------------------------------

  function signInView(message) {
    document.getElementById("topbar").hidden = true;
    const error = h("p", { class: "alert", role: "alert", hidden: !message }, message || "");
    const form = h("form", { class: "panel signin" },
      h("label", { for: "token" }, "Access token"),
      h("input", {
        id: "token", name: "token", type: "password", required: true,
        autocomplete: "current-password", spellcheck: "false",
        "aria-describedby": "token-help",
      }),
      h("p", { id: "token-help", class: "help" },
        "The token from your hookgate configuration. It is kept in this browser until you sign out."),
      h("button", { type: "submit", class: "button primary" }, "Sign in"),
      error);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const token = form.elements.token.value.trim();
      if (!token) return;
      const button = form.querySelector("button");
      button.disabled = true;
      try {
        const me = await api("/api/me", { token });
        localStorage.setItem(TOKEN_KEY, token);
        session.token = token;
        session.me = me;
        await startSession();
        route();
      } catch (err) {
        error.textContent = err.status === 401 ? "That token is not valid." : err.message;
        error.hidden = false;
        button.disabled = false;
        form.elements.token.focus();
      }
    });
    const provider = session.oidc
      ? h("p", {}, h("a", { class: "button primary", id: "oidc-sign-in", href: "/auth/login" },
        "Sign in with your organisation's account"))
      : null;
    show("Sign in to hookgate",
      h("p", { class: "lede" }, "Approve or reject the tool calls your agents want to make, and follow their runs."),
      provider, form);
    form.elements.token.focus();
  }

  async function startSession() {
    document.getElementById("topbar").hidden = false;
    const me = session.me;
    document.getElementById("who").textContent = `${me.name || me.user_id} · ${me.org_id || "no org"}`;
    openInboxStream();
    await refreshPending().catch(() => {});
  }

  function signOut(message) {
    if (session.csrf) {
      // End the provider session at the server too (its cookie is HttpOnly).
      fetch("/auth/logout", { method: "POST", headers: { "X-CSRF-Token": session.csrf } }).catch(() => {});
      session.csrf = null;
    }
    localStorage.removeItem(TOKEN_KEY);
    session.token = null;
    session.me = null;
    session.pending.clear();
    closeInboxStream();
    leaveView();
    banner(null);
    signInView(message);
  }

  async function inboxView() {
    const waiting = h("div", { class: "cards", id: "waiting" });
    const decided = h("div", { class: "cards", id: "decided" });
    const empty = h("p", { class: "empty" }, "Nothing is waiting for a decision. New requests appear here as they come.");
    const decidedSection = h("section", { "aria-labelledby": "decided-h", hidden: true },
      h("h2", { id: "decided-h" }, "Recently decided"), decided);
    const status = h("div");
    show("Inbox",
      h("p", { class: "lede" }, "Tool calls waiting for a person's decision in your organisation."),
      status,
      h("section", { "aria-labelledby": "waiting-h" }, h("h2", { id: "waiting-h" }, "Waiting for a decision"), batchBar(), empty, waiting),
      decidedSection);

    const syncEmpty = () => {
      empty.hidden = waiting.children.length > 0;
      decidedSection.hidden = decided.children.length === 0;
      syncBatch();
    };
    // What the stream says while load() fetches is newer than what the fetch may return:
    // kept, and placed again over the fetched lists (else a request announced meanwhile
    // was counted in the badge but wiped from the list).
    let arrivedWhileLoading = null;
    const place = (req) => {
      if (arrivedWhileLoading) arrivedWhileLoading.push(req);
      // A card already on the page was redrawn in place by updateCards; once decided, it
      // moves from "Waiting for a decision" to "Recently decided".
      const shownCard = document.querySelector(`[data-request-id="${CSS.escape(req.id)}"]`);
      if (shownCard) {
        if (req.status !== "pending" && waiting.contains(shownCard)) {
          const hadFocus = shownCard.contains(document.activeElement);
          decided.prepend(shownCard);
          if (hadFocus) shownCard.querySelector("h3").focus();
        }
      } else {
        (req.status === "pending" ? waiting : decided).prepend(requestCard(req));
      }
      syncEmpty();
    };
    const load = async () => {
      arrivedWhileLoading = [];
      try {
        const [pending, recent] = await Promise.all([
          refreshPending(), api("/api/confirmations?limit=20"),
        ]);
        status.replaceChildren();
        waiting.replaceChildren(...pending.map((r) => requestCard(r)));
        decided.replaceChildren(...recent.filter((r) => r.status !== "pending").map((r) => requestCard(r)));
        const arrived = arrivedWhileLoading;
        arrivedWhileLoading = null;
        arrived.forEach((req) => { trackPending(req); place(req); });
        syncEmpty();
      } catch (err) {
        arrivedWhileLoading = null;
        status.replaceChildren(failure(err));
      }
    };
    session.view = { onConfirmation: place, refresh: load };
    await load();
  }

  /** Standing rules of the org: what is approved without asking, by whom, and revoke. */
  async function rulesView() {
    const list = h("div", { class: "cards", id: "rules" });
    const status = h("div");
    show("Standing rules",
      h("p", { class: "lede" }, "Calls these rules cover are approved without asking anyone, as their creator decided. Revoked and expired rules never match."),
      status, list);
    const card = (rule) => {
      const state = rule.active ? "active" : (rule.revoked_at ? "revoked" : "expired");
      const covers = { run: `run ${rule.run_id}`, agent_user: `calls of ${rule.user_id}`, org: "everyone in the org" }[rule.scope] || rule.scope;
      const item = h("article", { class: `card rule ${state}`, dataset: { ruleId: rule.id } },
        h("header", { class: "card-head" },
          h("h3", {}, h("code", { class: "tool" }, visible(rule.tool_name))),
          h("span", { class: `badge ${rule.active ? "good" : "muted"}` }, state),
          rule.mode === "shadow" ? h("span", { class: "badge muted", title: "records that it would approve; a person is still asked" }, "shadow") : null),
        h("p", { class: "meta" },
          h("span", { class: "agent" }, visible(names[rule.agent_id] || rule.agent_id)), h("span", {}, visible(covers)),
          h("span", {}, "created by ", h("strong", {}, visible(rule.created_by))),
          h("span", {}, rule.expires_at ? `until ${when(rule.expires_at)}` : "until revoked"),
          h("span", { class: "uses" }, `used ${rule.uses} time${rule.uses === 1 ? "" : "s"}`)),
        rule.when ? h("p", {}, "Only when ", h("code", {}, visible(rule.when))) : null,
        h("p", { class: "digest" }, visible(rule.id)));
      if (rule.active) {
        const error = h("p", { class: "alert", role: "alert", hidden: true });
        const button = h("button", { type: "button", class: "button reject small" }, "Revoke");
        button.addEventListener("click", async () => {
          button.disabled = true;
          try {
            const revoked = await api(`/api/approval-rules/${encodeURIComponent(rule.id)}`, { method: "DELETE" });
            item.replaceWith(card(revoked));
            announce(`Rule ${rule.id} revoked.`);
          } catch (err) {
            error.textContent = err.message;
            error.hidden = false;
            button.disabled = false;
          }
        });
        item.append(h("div", { class: "actions" }, button), error);
      }
      return item;
    };
    // Agents by name, as people know them; an agent no longer configured shows its id.
    if (!session.agents) session.agents = await api("/api/agents").catch(() => null);
    const names = Object.fromEntries((session.agents || []).map((a) => [a.id, a.name || a.id]));
    try {
      const rules = await api("/api/approval-rules");
      list.replaceChildren(...rules.map(card));
      if (!rules.length) list.append(h("p", { class: "empty" }, "No standing rules. Approve a request with \"Approve and remember\" to make one."));
    } catch (err) {
      status.replaceChildren(failure(err));
    }
  }

  /** The org's audit log: one row per tool call, who decided it, the wait and the tool's time. */
  async function auditView() {
    const SINCE = { "1h": 3600, "24h": 86400, "7d": 604800, "": 0 };
    const agentSelect = h("select", { id: "audit-agent", name: "agent_id" }, h("option", { value: "" }, "Any agent"));
    const form = h("form", { class: "panel filters", "aria-label": "Filter the audit log" },
      h("div", { class: "field" }, h("label", { for: "audit-agent" }, "Agent"), agentSelect),
      h("div", { class: "field" }, h("label", { for: "audit-tool" }, "Tool"),
        h("input", { id: "audit-tool", name: "tool", maxlength: "256", placeholder: "exact tool name" })),
      h("div", { class: "field" }, h("label", { for: "audit-session" }, "Session"),
        h("input", { id: "audit-session", name: "session", maxlength: "256", placeholder: "as the agent names it" })),
      h("div", { class: "field" }, h("label", { for: "audit-outcome" }, "Outcome"),
        h("select", { id: "audit-outcome", name: "outcome" },
          ...["", "ok", "error", "blocked", "withheld"].map((o) => h("option", { value: o }, o || "Any outcome")))),
      h("div", { class: "field" }, h("label", { for: "audit-since" }, "Since"),
        h("select", { id: "audit-since", name: "since" },
          ...Object.keys(SINCE).map((k) => h("option", { value: k }, k ? `last ${k}` : "any time")))),
      h("div", { class: "field" }, h("label", { for: "audit-limit" }, "Rows"),
        h("input", { id: "audit-limit", name: "limit", type: "number", min: "1", max: "500", value: "50" })),
      h("button", { type: "submit", class: "button primary" }, "Show"));
    const status = h("div");
    const body = h("tbody");
    const table = h("table", { class: "audit", id: "audit" },
      h("thead", {}, h("tr", {}, ...["Time", "Agent", "Session", "Tool", "Outcome", "Decided by", "Request", "Wait", "Tool time", "Delegated"]
        .map((c) => h("th", { scope: "col" }, c)))),
      body);
    show("Audit log",
      h("p", { class: "lede" }, "Every tool call of your organisation, newest first: its session, who decided it and what, how long the decision took, and how long the tool itself ran."),
      form, status, h("div", { class: "table-scroll" }, table));
    const micros = (us) => (us === null || us === undefined ? "–"
      : us < 1e6 ? `${(us / 1000).toFixed(1)} ms` : us < 6e7 ? `${(us / 1e6).toFixed(1)} s` : duration(us / 1e6));
    const toRequest = (row, text) => (row.request_id
      ? h("a", { href: `#/confirmations/${encodeURIComponent(row.request_id)}` }, visible(text)) : visible(text));
    const line = (row) => h("tr", { dataset: { callId: row.tool_call_id || "" } },
      h("td", {}, h("time", { datetime: row.created_at }, when(row.created_at))),
      h("td", {}, visible(row.agent_id || "–")),
      h("td", { class: "session" }, row.session_id ? visible(row.session_id) : "–"),
      h("td", {}, h("code", { class: "tool" }, visible(row.tool_name))),
      h("td", {}, visible(row.outcome + (row.blocked_by ? ` by ${row.blocked_by}` : ""))),
      h("td", { class: "decided-by" }, decidedBy(row)),
      h("td", { class: "request" }, row.request_id ? toRequest(row, row.request_id) : "–"),
      h("td", { class: "wait" }, micros(row.wait_us)),
      h("td", { class: "latency" }, micros(row.latency_us)),
      h("td", { class: "delegation" }, delegated(row)));
    // Who decided the call and what: "alice (rejected)"; a rule only approves.
    const decidedBy = (row) => {
      const who = row.decided_by || row.approver;
      if (!who) return "–";
      return toRequest(row, row.decision ? `${who} (${row.decision})` : who);
    };
    // A sub-agent's call: its depth and the session that delegated to it.
    const delegated = (row) => (row.depth === null && row.parent_session === null ? "–"
      : visible([row.depth === null ? null : `depth ${row.depth}`,
        row.parent_session === null ? null : `from ${row.parent_session}`].filter(Boolean).join(" ")));
    const load = async () => {
      const f = form.elements;
      const query = new URLSearchParams({ limit: f.limit.value || "50" });
      if (f.agent_id.value) query.set("agent_id", f.agent_id.value);
      if (f.tool.value.trim()) query.set("tool", f.tool.value.trim());
      if (f.session.value.trim()) query.set("session", f.session.value.trim());
      if (f.outcome.value) query.set("outcome", f.outcome.value);
      if (SINCE[f.since.value]) query.set("since", new Date(Date.now() - SINCE[f.since.value] * 1000).toISOString());
      status.replaceChildren();
      try {
        const page = await api(`/api/audit?${query}`);
        body.replaceChildren(...page.items.map(line));
        if (!page.items.length) status.append(h("p", { class: "empty" }, "No audit rows match."));
      } catch (err) {
        body.replaceChildren();
        status.replaceChildren(failure(err));
      }
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      load();
    });
    if (!session.agents) session.agents = await api("/api/agents").catch(() => null);
    agentSelect.append(...(session.agents || []).map((a) => h("option", { value: a.id }, visible(a.name || a.id))));
    await load();
  }

  async function confirmationView(id) {
    const holder = h("div", { class: "cards" });
    show("Approval request", h("p", {}, h("a", { href: "#/inbox" }, "← All requests")), holder);
    try {
      const req = await api(`/api/confirmations/${encodeURIComponent(id)}`);
      const card = requestCard(req, { full: true });
      card.dataset.full = "yes";
      holder.replaceChildren(card);
    } catch (err) {
      holder.replaceChildren(failure(err));
    }
  }

  async function runsView() {
    const agentSelect = h("select", { id: "agent", name: "agent_id", required: true });
    const error = h("p", { class: "alert", role: "alert", hidden: true });
    const form = h("form", { class: "panel start", "aria-labelledby": "start-h" },
      h("h2", { id: "start-h" }, "Start a run"),
      h("div", { class: "field" }, h("label", { for: "agent" }, "Agent"), agentSelect),
      h("div", { class: "field" },
        h("label", { for: "message" }, "Message"),
        h("textarea", { id: "message", name: "message", rows: "3", required: true, maxlength: "100000",
          placeholder: "What should the agent do?" })),
      h("button", { type: "submit", class: "button primary" }, "Start run"),
      error);
    const list = h("ul", { class: "runs" });
    const listStatus = h("div");
    show("Runs", form,
      h("section", { "aria-labelledby": "recent-h" }, h("h2", { id: "recent-h" }, "Recent runs"), listStatus, list));

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const message = form.elements.message.value.trim();
      error.hidden = true;
      if (!message) {
        error.textContent = "Type a message for the agent.";
        error.hidden = false;
        form.elements.message.focus();
        return;
      }
      const button = form.querySelector("button[type=submit]");
      button.disabled = true;
      try {
        const run = await api("/api/runs", { method: "POST", body: { agent_id: agentSelect.value, message } });
        location.hash = `#/runs/${encodeURIComponent(run.run_id)}`;
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
        button.disabled = false;
      }
    });

    const [agents, runs] = await Promise.allSettled([api("/api/agents"), api("/api/runs")]);
    if (agents.status === "fulfilled") {
      session.agents = agents.value;
      agentSelect.replaceChildren(...agents.value.map((a) => h("option", { value: a.id }, visible(a.name || a.id))));
      if (!agents.value.length) {
        error.textContent = "No agents are configured for your organisation.";
        error.hidden = false;
        form.querySelector("button[type=submit]").disabled = true;
      }
    } else {
      error.textContent = agents.reason.message;
      error.hidden = false;
    }
    if (runs.status === "rejected") {
      listStatus.replaceChildren(failure(runs.reason));
      return;
    }
    const names = Object.fromEntries((session.agents || []).map((a) => [a.id, a.name]));
    if (!runs.value.length) listStatus.replaceChildren(h("p", { class: "empty" }, "No runs yet."));
    list.replaceChildren(...runs.value.map((r) => h("li", {},
      h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}`, class: "run-link" },
        h("span", { class: "run-agent" }, visible(names[r.agent_id] || r.agent_id)),
        badge(r.outcome || r.status),
        h("span", { class: "run-meta" },
          `by ${visible(r.user_id)} · `, h("time", { datetime: r.created_at, title: when(r.created_at) }, ago(r.created_at))),
        r.answer ? h("span", { class: "run-answer" }, visible(r.answer)) : null))));
  }

  // -- one run, live --------------------------------------------------------------------------

  async function agentName(agentId) {
    if (!session.agents) session.agents = await api("/api/agents").catch(() => null);
    const agent = (session.agents || []).find((a) => a.id === agentId);
    return agent ? agent.name || agent.id : agentId;
  }

  const FINISHED = new Set(["completed", "failed", "blocked_build", "session_blocked", "max_steps", "cancelled"]);

  const HOOK_KIND_TEXT = {
    blocked: "blocked the call", rewrote_args: "rewrote the arguments",
    rewrote_result: "rewrote the result", side_effect: "side effect", failed: "failed",
    context: "added context",
  };

  /** What the hooks did (blocks, rewrites, side effects, failures), one line each; side
      effects reported without a hook event are listed after them. */
  function hookLines(hooks, sideEffects = []) {
    const items = (hooks || []).map((x) => h("li", {},
      h("code", {}, visible(x.hook)), ` ${HOOK_KIND_TEXT[x.kind] || visible(x.kind)}`,
      x.kind === "failed" ? ` (fail_mode=${visible(x.fail_mode || "closed")})` : null,
      x.detail ? [": ", visible(x.detail)] : null));
    if (!(hooks || []).some((x) => x.kind === "side_effect")) {
      items.push(...(sideEffects || []).map((effect) => h("li", {}, shown(effect))));
    }
    return items.length ? h("ul", { class: "hooks", "aria-label": "What the hooks did" }, items) : null;
  }

  function step(kind, title, ...body) {
    return h("li", { class: `step ${kind}` },
      h("div", { class: "step-title" }, title), ...body);
  }

  /** A run event as a step of the timeline (null for events that add nothing to read). */
  function eventStep(event, page) {
    switch (event.type) {
      case "session_start": {
        const details = hookLines(event.hooks, event.side_effects);
        if (event.allowed === false) {
          return step("bad", "The session was blocked", h("p", {}, visible(event.error || "")), details);
        }
        return step(details || event.additional_context ? "info" : "muted", "Session started",
          event.additional_context ? h("p", {}, "Hooks added context: ", visible(event.additional_context)) : null,
          details);
      }
      case "model_turn": {
        const n = (event.tool_calls || []).length;
        return step("muted", `Model turn ${event.step}: ${n} tool call${n === 1 ? "" : "s"}`);
      }
      case "tool_call":
        return step("call", ["Calls ", h("code", {}, visible(event.tool_name))], argsView(event.args));
      case "confirmation_pending":
        return page.waitStep(event);
      case "confirmation_resolved": {
        page.resolved(event);
        const title = [`${STATUS_TEXT[event.status] || event.status}`];
        if (event.rule_id) {
          // No person decided this call: a standing rule did, made earlier by its creator.
          return step("good", ["Approved by rule ", h("code", {}, visible(event.rule_id)),
            ` (created by ${visible(event.decided_by || "?")})`]);
        }
        if (event.decided_by) title.push(" by ", h("strong", {}, visible(event.decided_by)));
        const edits = (event.changes || []).map((c) => `${c.path}: ${JSON.stringify(c.before)} → ${JSON.stringify(c.after)}`);
        return step(event.status === "approved" ? "good" : "bad", title,
          event.reason ? h("blockquote", {}, visible(event.reason)) : null,
          edits.length ? h("p", { class: "edited" }, "Edited before approval: ", visible(edits.join("; "))) : null,
          event.message ? h("p", { class: "message" }, "Message to the agent: ", visible(event.message)) : null);
      }
      case "tool_result":
      case "tool_blocked":
        return outcomeStep(event);
      case "answer":
        return step("answer", "Answer", h("p", { class: "answer-text" }, visible(event.answer || "")));
      case "error":
        return step("bad", "Error", h("p", {}, visible(event.error || "")));
      case "done": {
        const status = page.finalStatus(event.status);
        return step(FINISHED.has(event.status) && status !== "completed" ? "bad" : "done",
          ["Run finished: ", badge(status)]);
      }
      default:
        return step("muted", visible(event.type), h("pre", { class: "code" }, json(event)));
    }
  }

  function outcomeStep(event) {
    const name = h("code", {}, visible(event.tool_name));
    if (event.status === "blocked" || !event.allowed) {
      const by = event.blocked_by && event.blocked_by !== "approval_check"
        ? ["hook ", h("code", {}, visible(event.blocked_by))] : "the approval check";
      return step("bad", ["Blocked: ", name],
        h("p", { class: "reason" }, "By ", by, ": ",
          visible(event.reason || event.error || event.observation || "")),
        hookLines((event.hooks || []).filter((x) => !(x.kind === "blocked" && x.hook === event.blocked_by)),
          event.side_effects));
    }
    if (event.status !== "ok") {
      return step("bad", [`${STATUS_TEXT[event.status] || event.status}: `, name],
        h("p", {}, visible(event.error || "")), hookLines(event.hooks, event.side_effects));
    }
    return step("good", ["Result of ", name],
      h("pre", { class: "code" }, shown(event.observation)),
      hookLines(event.hooks, event.side_effects));
  }

  async function runView(runId) {
    const statusBadge = h("span", { class: "run-status" });
    const facts = h("dl", { class: "facts" });
    const timeline = h("ol", { class: "timeline", "aria-label": "What the run did" });
    const note = h("div");
    // A call waiting for approval is the first thing on the page: its card, decidable here.
    const waiting = h("section", { class: "cards run-waiting", id: "run-waiting", "aria-label": "Waiting for your decision" });
    const heading = show("Run");
    heading.append(" ", statusBadge);
    main.append(waiting, h("p", {}, h("a", { href: "#/runs" }, "← All runs")), facts, note, timeline);

    const setStatus = (status) => statusBadge.replaceChildren(badge(status));
    const waits = new Map(); // request id → its waiting step

    const page = {
      finalStatus(status) {
        // As the server's ``outcome`` (engines/outcome.py): not approved first, then blocked.
        if (status !== "completed") return status;
        if (notApproved) return "not_approved";
        return callStopped ? "call_blocked" : status;
      },
      waitStep(event) {
        if (waits.has(event.request_id)) return null; // the same wait, after a restart
        const body = h("div", { class: "wait-body" },
          h("p", {}, h("code", {}, visible(event.tool_name)), " runs only once a person approves it (the request is at the top of this page). ",
            h("a", { href: `#/confirmations/${encodeURIComponent(event.request_id)}` }, "Open the request in the inbox"), "."));
        const item = step("wait", "Waiting for approval", body);
        waits.set(event.request_id, item);
        setStatus("awaiting_approval");
        announce("The run is waiting for approval.");
        api(`/api/confirmations/${encodeURIComponent(event.request_id)}`).then((req) => {
          if (!item.isConnected || item.classList.contains("settled") || req.status !== "pending") return;
          const card = requestCard(req, { showRun: false });
          card.dataset.showRun = "no";
          waiting.append(card);
        }, (err) => body.append(failure(err)));
        return item;
      },
      resolved(event) {
        const item = waits.get(event.request_id);
        if (!item) return;
        item.classList.add("settled");
        item.querySelector(".step-title").textContent = "Asked a person for approval";
        const cards = waiting.querySelectorAll(`[data-request-id="${CSS.escape(event.request_id)}"]`);
        const hadFocus = item.contains(document.activeElement)
          || [...cards].some((card) => card.contains(document.activeElement));
        for (const card of cards) card.remove();
        if (hadFocus) {
          item.tabIndex = -1;
          item.focus();
        }
        setStatus("running");
      },
    };

    let source = null;
    let lastSeq = 0;
    let notApproved = false; // a gated call of this run was rejected, expired or cancelled
    let callStopped = false; // a hook blocked a call or withheld its result
    const finish = () => { if (source) source.close(); source = null; };
    session.view = { cleanup: finish };

    try {
      const run = await api(`/api/runs/${encodeURIComponent(runId)}`);
      document.title = `Run ${run.run_id} · hookgate`;
      facts.append(
        h("dt", {}, "Agent"), h("dd", {}, visible(await agentName(run.agent_id))),
        h("dt", {}, "Started by"), h("dd", {}, visible(run.user_id)),
        h("dt", {}, "Message"), h("dd", { class: "message" }, visible(run.message)),
        h("dt", {}, "Run id"), h("dd", {}, h("code", {}, run.run_id)));
      setStatus(run.outcome || run.status);
    } catch (err) {
      note.replaceChildren(failure(err));
      return;
    }
    if (session.view?.cleanup !== finish) return; // left the page meanwhile

    source = stream(`/api/runs/${encodeURIComponent(runId)}/events`);
    const onEvent = (message) => {
      const event = JSON.parse(message.data);
      if (event.seq && event.seq <= lastSeq) return; // replayed after a reconnect
      lastSeq = event.seq || lastSeq;
      const item = eventStep(event, page);
      if (item) timeline.append(item);
      if (event.type === "confirmation_resolved") setStatus("running");
      if (event.type === "answer") announce("The run has an answer.");
      if (event.type === "confirmation_resolved" && event.status !== "approved") notApproved = true;
      if (event.type === "tool_blocked" || (event.type === "tool_result" &&
          (event.status === "blocked" || event.status === "withheld"))) callStopped = true;
      if (event.type === "done") {
        // "Completed" alone would read as success when a person said no to a call.
        setStatus(page.finalStatus(event.status));
        finish();
      }
    };
    const types = ["session_start", "model_turn", "tool_call", "tool_blocked", "confirmation_pending",
      "confirmation_resolved", "tool_result", "answer", "error", "done", "plan", "step_skipped",
      "delegate_start", "delegate_end", "message"];
    types.forEach((t) => source.addEventListener(t, onEvent));
    source.addEventListener("error", async () => {
      if (!source) return;
      // EventSource reconnects by itself (sending Last-Event-ID); stop when the run is over or
      // the stream was refused, and say why.
      try {
        const run = await api(`/api/runs/${encodeURIComponent(runId)}`);
        if (FINISHED.has(run.status) && source && source.readyState !== EventSource.OPEN) {
          setStatus(run.outcome || run.status);
          finish();
        }
      } catch (err) {
        finish();
        note.replaceChildren(failure(err));
      }
    });
  }

  function notFoundView() {
    show("Page not found", h("p", {}, "There is nothing at this address. ", h("a", { href: "#/inbox" }, "Go to the inbox"), "."));
  }

  // -- routing --------------------------------------------------------------------------------

  const ROUTES = [
    [/^#\/inbox$/, "inbox", () => inboxView()],
    [/^#\/confirmations\/([^/]+)$/, "inbox", (id) => confirmationView(decodeURIComponent(id))],
    [/^#\/runs$/, "runs", () => runsView()],
    [/^#\/rules$/, "rules", () => rulesView()],
    [/^#\/audit$/, "audit", () => auditView()],
    [/^#\/runs\/([^/]+)$/, "runs", (id) => runView(decodeURIComponent(id))],
  ];

  function leaveView() {
    if (session.view && session.view.cleanup) session.view.cleanup();
    session.view = null;
  }

  /** The identity provider's session of this browser, if any (its cookie is HttpOnly). */
  async function providerSession() {
    let response;
    try {
      response = await fetch("/auth/session");
    } catch {
      return;
    }
    if (!response.ok) return;
    const found = await response.json();
    session.oidc = Boolean(found.oidc);
    if (found.signed_in) session.csrf = found.csrf_token;
  }

  async function route() {
    if (!session.token && session.oidc === null) await providerSession();
    if (!session.token && !session.csrf) {
      signInView();
      return;
    }
    if (!session.me) {
      try {
        session.me = await api("/api/me");
      } catch (err) {
        if (session.token || session.csrf) {
          show("hookgate", failure(err), h("p", {}, h("button", { type: "button", class: "button", onclick: route }, "Try again")));
        }
        return;
      }
      await startSession();
    }
    const hash = location.hash || "";
    if (hash === "" || hash === "#" || hash === "#/") {
      location.replace("#/inbox");
      return;
    }
    leaveView();
    for (const [pattern, section, render] of ROUTES) {
      const match = pattern.exec(hash);
      if (!match) continue;
      for (const link of document.querySelectorAll("[data-nav]")) {
        if (link.dataset.nav === section) link.setAttribute("aria-current", "page");
        else link.removeAttribute("aria-current");
      }
      await render(...match.slice(1));
      return;
    }
    notFoundView();
  }

  document.getElementById("sign-out").addEventListener("click", () => signOut());
  document.getElementById("skip-link").addEventListener("click", (event) => {
    event.preventDefault(); // a plain #main link would change the route
    main.focus();
  });
  window.addEventListener("hashchange", route);
  setInterval(tick, 1000);
  route();
})();
