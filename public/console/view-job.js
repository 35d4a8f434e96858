// A job's page: its schedule, target, labels, priority and status; cancel, pause, resume; an edit form that
// PATCHes; and every execution with a timeline of its attempts. Refreshed every few seconds while
// open, the form excepted (it keeps what you are typing).
import { api, query } from "./api.js";
import { badge, duration, errorNotice, fill, h, payloadText, svg, targetName, time } from "./dom.js";
import { redriveButton } from "./redrive.js";

const REFRESH_MS = 2000;
const TERMINAL = new Set(["succeeded", "dead", "canceled"]);
/** GET /v1/jobs/:id/executions answers at most this many (the latest due first) */
const JOB_EXECUTIONS_MAX = 100;

/** @type {import("./app.js").View} */
export async function jobView(main, { path }) {
  const id = path[1] ?? "";
  const base = `/v1/jobs/${encodeURIComponent(id)}`;
  const summary = h("section", { "aria-labelledby": "summary-title" });
  const notices = h("div", { "aria-live": "polite" });
  const executions = h("section", { "aria-labelledby": "executions-title" });
  const heading = h("h1", { tabindex: -1 }, id);
  fill(main, heading, notices, summary, executions);

  /** the job and its executions, read together */
  const read = () => Promise.all([api("GET", base), api("GET", `${base}/executions`)]);
  let [job, list] = await read();
  heading.textContent = job.name ? `${job.name}` : "Job";
  const editor = editForm(job, base, notices, refresh);
  draw();
  summary.after(editor);

  function draw() {
    fill(summary, h("h2", { id: "summary-title" }, "Job"), describe(job), buttons(job, base, notices, refresh));
    fill(
      executions,
      h("h2", { id: "executions-title" }, "Executions"),
      h(
        "p",
        {},
        list.executions.length >= JOB_EXECUTIONS_MAX ? `The latest ${JOB_EXECUTIONS_MAX} are shown here. ` : null,
        // the job's own list stops at 100; the executions view pages through all of them
        h("a", { href: `#/executions${query({ jobId: job.id })}`, "data-key": "all-executions" }, "All executions of this job"),
      ),
      executionList(list.executions, notices, refresh),
    );
  }

  /** one read at a time (a slow answer is not overtaken by the next tick's); asked for meanwhile, one more after it */
  let reading = false;
  let again = false;
  async function refresh() {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      [job, list] = await read();
      draw();
    } catch (error) {
      fill(notices, errorNotice(error));
    } finally {
      reading = false;
    }
    if (again) {
      again = false;
      await refresh();
    }
  }

  const timer = setInterval(() => {
    // a tick while a read is in flight is skipped (only a change made here asks for one more)
    if (document.visibilityState === "visible" && !reading) void refresh();
  }, REFRESH_MS);
  return () => clearInterval(timer);
}

/** @param {any} job */
function describe(job) {
  const row = (/** @type {string} */ term, /** @type {any} */ detail) => [h("dt", {}, term), h("dd", {}, detail)];
  const target = job.target.url ? `${job.target.method} ${job.target.url}` : `${targetName(job.target)}${payloadText(job.target.payload)}`;
  const labels = Object.entries(job.labels);
  return h(
    "dl",
    { class: "facts" },
    row("id", h("span", { class: "id" }, job.id)),
    row("status", badge(job.status)),
    row("schedule", job.schedule ? `cron ${job.schedule.cron} in ${job.schedule.timezone} (catch-up ${job.schedule.catchUp})` : "once"),
    row("next run", time(job.nextRunAt)),
    job.nextRuns?.length
      ? row("then", h("ul", { class: "plain" }, ...job.nextRuns.slice(1).map((/** @type {string} */ at) => h("li", {}, time(at)))))
      : null,
    row("target", h("span", { class: "target" }, target)),
    job.debounce
      ? row(
          "debounce",
          `key ${job.debounce.key}, ${job.debounce.mode}, ${duration(job.debounce.delayMs)}` +
            (job.debounce.maxDelayMs === null ? "" : `, at most ${duration(job.debounce.maxDelayMs)}`),
        )
      : null,
    row("labels", labels.length ? labels.map(([k, v]) => h("span", { class: "label" }, `${k}:${v}`)) : "none"),
    row(
      "retry",
      `${job.retry.maxAttempts} attempts, ${duration(job.retry.initialDelayMs)} × ${job.retry.factor} up to ${duration(job.retry.maxDelayMs)}`,
    ),
    row("timeout", duration(job.timeoutMs)),
    // the W3C trace it was created in: its trace id finds it in a tracing backend
    job.trace ? row("trace", h("span", { class: "id", "data-trace": "" }, job.trace.traceparent.split("-")[1])) : null,
    row("priority", `${job.priority}${job.priority === 5 ? " (default)" : ""}`),
    row("created", time(job.createdAt)),
  );
}

/**
 * Cancel, pause and resume, each enabled only where the API would accept it.
 * @param {any} job
 * @param {string} base
 * @param {HTMLElement} notices
 * @param {() => Promise<void>} refresh
 */
function buttons(job, base, notices, refresh) {
  const recurring = Boolean(job.schedule);
  const live = job.status === "active" || job.status === "paused";
  /** @param {string} label @param {string} method @param {string} path @param {boolean} enabled */
  const button = (label, method, path, enabled) =>
    h(
      "button",
      {
        type: "button",
        disabled: !enabled,
        // the refresh draws a new button: fill() gives it the focus back by this key
        "data-key": `action:${label}`,
        onclick: async (/** @type {Event} */ event) => {
          const target = /** @type {HTMLButtonElement} */ (event.currentTarget);
          // busy, not disabled: a disabled button would drop the keyboard focus
          if (target.getAttribute("aria-disabled") === "true") return;
          target.setAttribute("aria-disabled", "true");
          try {
            const changed = await api(method, `${base}${path}`);
            fill(notices, h("p", { class: "ok" }, `${label}: the job is ${changed.status}.`));
          } catch (error) {
            fill(notices, errorNotice(error));
          }
          target.removeAttribute("aria-disabled");
          await refresh();
        },
      },
      label,
    );
  return h(
    "div",
    { class: "actions" },
    button("Cancel job", "DELETE", "", live),
    button("Pause", "POST", "/pause", recurring && job.status === "active"),
    button("Resume", "POST", "/resume", recurring && job.status === "paused"),
  );
}

/**
 * "team:ops, env:prod" (or one per line) as a labels object; empty is null (removes them).
 * @param {string} text
 */
function parseLabels(text) {
  const pairs = text
    .split(/[,\n]/)
    .map((p) => p.trim())
    .filter(Boolean);
  if (pairs.length === 0) return null;
  return Object.fromEntries(
    pairs.map((p) => {
      const colon = p.indexOf(":");
      // a pair without a colon is sent as a key with an empty value: the API names it in its refusal
      return colon < 0 ? [p, ""] : [p.slice(0, colon).trim(), p.slice(colon + 1).trim()];
    }),
  );
}

/**
 * The edit form: only the fields you changed are sent (PATCH merges), each error names its field.
 * @param {any} job
 * @param {string} base
 * @param {HTMLElement} notices
 * @param {() => Promise<void>} refresh
 */
function editForm(job, base, notices, refresh) {
  const recurring = Boolean(job.schedule);
  const labelsText = Object.entries(job.labels)
    .map(([k, v]) => `${k}:${v}`)
    .join(", ");
  /** @type {[string, string, string, string][]} name, label, initial value, hint */
  const fields = [
    ["name", "Name", job.name ?? "", ""],
    ["labels", "Labels", labelsText, "key:value, comma-separated; empty removes them"],
    ["priority", "Priority", String(job.priority), "0-9: higher goes first among your due executions waiting their turn"],
    ...(recurring
      ? /** @type {[string, string, string, string][]} */ ([
          ["cron", "Cron", job.schedule.cron, ""],
          ["timezone", "Time zone", job.schedule.timezone, "IANA, e.g. Europe/Berlin"],
        ])
      : /** @type {[string, string, string, string][]} */ ([
          ["runAt", "Run at", "", "RFC 3339, e.g. 2026-12-01T14:00:00Z"],
          ["delay", "Or delay", "", "e.g. 30s, 5m, 2h"],
        ])),
  ];
  const status = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "edit", "aria-labelledby": "edit-title", onsubmit: submit },
    h("h2", { id: "edit-title" }, "Edit"),
    ...fields.map(([name, label, value, hint]) =>
      h(
        "div",
        { class: "field" },
        h("label", { for: `edit-${name}` }, label),
        h("input", { id: `edit-${name}`, name, value, "data-initial": value, "aria-describedby": hint ? `edit-${name}-hint` : null }),
        hint ? h("small", { id: `edit-${name}-hint` }, hint) : null,
      ),
    ),
    h("button", { type: "submit" }, "Save changes"),
    status,
  );
  return form;

  /** @param {Event} event */
  async function submit(event) {
    event.preventDefault();
    /** @type {Record<string, unknown>} */
    const change = {};
    for (const input of form.querySelectorAll("input")) {
      const value = input.value.trim();
      if (value === input.dataset.initial) continue;
      if (input.name === "labels") change.labels = parseLabels(value);
      else if (input.name === "name") change.name = value || null;
      else if (input.name === "priority") change.priority = /^\d+$/.test(value) ? Number(value) : value;
      else if (value) change[input.name] = input.name === "runAt" && /^\d+$/.test(value) ? Number(value) : value;
    }
    if (Object.keys(change).length === 0) {
      fill(status, h("p", {}, "Nothing changed."));
      return;
    }
    try {
      const changed = await api("PATCH", base, change);
      for (const input of form.querySelectorAll("input")) {
        if (input.name === "runAt" || input.name === "delay") input.value = "";
        else input.dataset.initial = input.value.trim();
      }
      fill(status, h("p", { class: "ok" }, `Saved: ${Object.keys(change).join(", ")}. Next run ${changed.nextRunAt ?? "none"}.`));
      fill(notices);
      await refresh();
    } catch (error) {
      fill(status, errorNotice(error));
      const field = error && typeof error === "object" && "field" in error ? String(error.field).split(".")[0] : "";
      /** @type {HTMLElement | null} */ (form.querySelector(`[name="${CSS.escape(field)}"]`))?.focus();
    }
  }
}

/**
 * @param {any[]} executions
 * @param {HTMLElement} notices
 * @param {() => Promise<void>} refresh
 */
function executionList(executions, notices, refresh) {
  if (executions.length === 0) return h("p", {}, "No executions yet.");
  return h(
    "ol",
    { class: "executions" },
    ...executions.map((e) =>
      h(
        "li",
        { class: "execution", "data-status": e.status, "data-execution": e.id },
        h(
          "p",
          {},
          badge(e.status),
          " ",
          h("span", { class: "id" }, e.id),
          " due ",
          time(e.dueAt),
          e.finishedAt ? [" · finished ", time(e.finishedAt)] : null,
          e.deadReason ? ` · dead: ${e.deadReason}` : null,
          ...(e.callbacks ?? []).map((/** @type {{kind: string, status: string, attempts: number}} */ c) =>
            h(
              "span",
              { class: "callback", "data-callback": c.kind },
              ` · ${c.kind === "success" ? "callback" : "failure callback"} `,
              badge(c.status),
              ` (${c.attempts} attempts)`,
            ),
          ),
        ),
        e.status === "dead" ? redriveButton(e.id, notices, refresh) : null,
        attemptTimeline(e),
      ),
    ),
  );
}

/**
 * The attempts on one time axis (each: its due time, then a bar from start to end, coloured by
 * outcome), and the same facts as a list.
 * @param {any} e an execution with its attempts
 */
function attemptTimeline(e) {
  const attempts = /** @type {any[]} */ (e.attempts);
  if (attempts.length === 0) return h("p", { class: "note" }, TERMINAL.has(e.status) ? "No attempt was made." : "No attempt yet.");
  const now = Date.now();
  const at = (/** @type {string | null} */ s) => (s ? Date.parse(s) : now);
  const start = Math.min(...attempts.map((a) => at(a.dueAt)));
  const end = Math.max(start + 1, ...attempts.map((a) => at(a.finishedAt)));
  const width = 600;
  const rowHeight = 14;
  const x = (/** @type {number} */ t) => 4 + ((t - start) / (end - start)) * (width - 8);
  const picture = svg("svg", {
    viewBox: `0 0 ${width} ${attempts.length * rowHeight + 4}`,
    class: "timeline",
    "aria-hidden": "true",
    preserveAspectRatio: "none",
  });
  attempts.forEach((a, i) => {
    const y = i * rowHeight + 2;
    const left = x(at(a.startedAt));
    picture.append(
      svg("line", { x1: x(at(a.dueAt)), x2: x(at(a.dueAt)), y1: y, y2: y + rowHeight - 2, class: "due" }),
      svg("rect", {
        x: left,
        y: y + 2,
        width: Math.max(2, x(at(a.finishedAt)) - left),
        height: rowHeight - 6,
        class: `outcome-${a.outcome ?? "running"}`,
      }),
    );
  });
  const items = attempts.map((a) =>
    h(
      "li",
      { class: "attempt", "data-outcome": a.outcome ?? "running" },
      h("strong", {}, `#${a.attempt} ${a.outcome ?? "running"}`),
      a.httpStatus === null ? null : ` · HTTP ${a.httpStatus}`,
      " · due ",
      time(a.dueAt),
      " · start ",
      time(a.startedAt),
      " · end ",
      time(a.finishedAt),
      ` · lag ${duration(a.lagMs)}`,
      a.waitMs ? ` · waited ${duration(a.waitMs)} for flow control` : null,
      a.spanId ? [" · span ", h("span", { class: "id", "data-span": "" }, a.spanId)] : null,
      a.error ? h("div", { class: "excerpt" }, a.error) : null,
      // the first 256 characters of a successful attempt's response body, as text (never markup)
      typeof a.responseExcerpt === "string"
        ? h("div", { class: "excerpt response" }, h("span", { class: "excerpt-label" }, "response"), " ", a.responseExcerpt)
        : null,
    ),
  );
  return h("div", { class: "attempts" }, picture, h("ol", { class: "timeline-list", "aria-label": `Attempts of ${e.id}` }, ...items));
}
