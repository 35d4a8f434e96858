// Dead letters: GET /v1/dlq page by page; redrive one, the selected ones, or all matching a filter
// (POST /v1/dlq/redrive answers 202 with a bulk action, whose progress is followed here). The
// tenant's alert target (GET /v1/alerts, read-only here) says where deaths are also sent.
import { ApiError, api, query } from "./api.js";
import { badge, duration, errorNotice, fill, h, pager, table, time } from "./dom.js";
import { redriveButton } from "./redrive.js";

const ACTION_POLL_MS = 1000;
/** an action runs 50 a page, a page per alarm: this bounds the wait for one of 1,000 ids with room */
const ACTION_POLL_LIMIT = 600;

/** @type {import("./app.js").View} */
export async function dlqView(main, { params }) {
  const cursor = params.get("cursor") ?? "";
  const progress = h("section", { class: "progress", "aria-live": "polite", "aria-labelledby": "progress-title" });
  const notices = h("div", { "aria-live": "polite" });
  const listing = h("div", {}, h("p", {}, "Loading…"));
  const alerts = h("section", { "aria-labelledby": "alerts-title" }, h("h2", { id: "alerts-title" }, "Alert target"));
  fill(main, h("h1", { tabindex: -1 }, "Dead letters"), notices, listing, alerts, filterForm(), progress);
  let stopped = false;

  /** Starts a bulk redrive and follows its action until it is done (or the view closes). @param {unknown} body */
  async function bulkRedrive(body) {
    let action;
    try {
      action = await api("POST", "/v1/dlq/redrive", body);
    } catch (error) {
      fill(progress, errorNotice(error));
      return;
    }
    for (let polls = 0; !stopped; polls++) {
      showAction(progress, action);
      if (action.status === "done" || polls >= ACTION_POLL_LIMIT) break;
      await new Promise((resolve) => setTimeout(resolve, ACTION_POLL_MS));
      try {
        action = await api("GET", `/v1/actions/${encodeURIComponent(action.id)}`);
      } catch (error) {
        fill(progress, errorNotice(error));
        return;
      }
    }
    if (!stopped) await load();
  }

  function filterForm() {
    const reason = h(
      "select",
      { id: "dlq-reason", name: "deadReason" },
      ...["", "permanent", "attempts_exhausted", "poison"].map((r) => h("option", { value: r }, r || "any")),
    );
    const job = h("input", { id: "dlq-job", name: "jobId", placeholder: "job_…", spellcheck: "false" });
    return h(
      "form",
      {
        class: "filters",
        "aria-labelledby": "dlq-filter-title",
        onsubmit: (/** @type {Event} */ event) => {
          event.preventDefault();
          const filter = Object.fromEntries(
            [
              ["jobId", /** @type {HTMLInputElement} */ (job).value.trim()],
              ["deadReason", /** @type {HTMLSelectElement} */ (reason).value],
            ].filter(([, v]) => v),
          );
          void bulkRedrive({ filter });
        },
      },
      h("h2", { id: "dlq-filter-title" }, "Redrive by filter"),
      h("div", { class: "field" }, h("label", { for: "dlq-job" }, "Job id"), job),
      h("div", { class: "field" }, h("label", { for: "dlq-reason" }, "Dead reason"), reason),
      h("button", { type: "submit" }, "Redrive all matching"),
    );
  }

  async function load() {
    let page;
    try {
      page = await api("GET", `/v1/dlq${query({ cursor, limit: "50" })}`);
    } catch (error) {
      fill(listing, errorNotice(error));
      return;
    }
    if (page.executions.length === 0) {
      fill(listing, h("p", {}, cursor ? "No more dead letters." : "No dead letters."), pager("#/dlq", {}, cursor, null));
      return;
    }
    const boxes = page.executions.map((/** @type {any} */ e) =>
      h("input", { type: "checkbox", value: e.id, "aria-label": `Select ${e.id}` }),
    );
    const all = h("input", {
      type: "checkbox",
      "aria-label": "Select all on this page",
      onchange: (/** @type {Event} */ event) => {
        const checked = /** @type {HTMLInputElement} */ (event.currentTarget).checked;
        for (const box of /** @type {HTMLInputElement[]} */ (boxes)) box.checked = checked;
      },
    });
    const rows = page.executions.map((/** @type {any} */ e, /** @type {number} */ i) =>
      h(
        "tr",
        { "data-execution": e.id },
        h("td", {}, boxes[i]),
        h("td", {}, h("span", { class: "id" }, e.id)),
        h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(e.jobId)}` }, e.jobId)),
        h("td", {}, badge(e.deadReason ?? "dead")),
        h("td", {}, String(e.attempts)),
        h("td", {}, e.lastHttpStatus === null ? "—" : String(e.lastHttpStatus)),
        h("td", { class: "excerpt" }, e.lastError ?? ""),
        h("td", {}, time(e.finishedAt)),
        h("td", {}, redriveButton(e.id, notices, load)),
      ),
    );
    const selected = () => boxes.filter((/** @type {any} */ b) => b.checked).map((/** @type {any} */ b) => b.value);
    fill(
      listing,
      h(
        "div",
        { class: "actions" },
        h("label", { class: "check" }, all, "Select all on this page"),
        h(
          "button",
          {
            type: "button",
            id: "redrive-selected",
            onclick: () => {
              const ids = selected();
              if (ids.length === 0) fill(notices, errorNotice("Select at least one dead letter."));
              else void bulkRedrive({ ids });
            },
          },
          "Redrive selected",
        ),
      ),
      table("Dead letters", ["", "execution", "job", "reason", "attempts", "last HTTP", "last error", "dead at", ""], rows),
      pager("#/dlq", {}, cursor, page.nextCursor),
    );
  }

  await Promise.all([load(), showAlertTarget(alerts)]);
  return () => {
    stopped = true;
  };
}

/**
 * Where the tenant's deaths (and throttled flow keys) are sent as digests, or that none is set.
 * @param {HTMLElement} region
 */
async function showAlertTarget(region) {
  const title = h("h2", { id: "alerts-title" }, "Alert target");
  let target;
  try {
    target = await api("GET", "/v1/alerts");
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      fill(region, title, h("p", { "data-alerts": "none" }, "None: dead executions are only listed here (set one with PUT /v1/alerts)."));
    } else fill(region, title, errorNotice(error));
    return;
  }
  const row = (/** @type {string} */ term, /** @type {any} */ detail) => [h("dt", {}, term), h("dd", {}, detail)];
  const headers = Object.keys(target.headers);
  fill(
    region,
    title,
    h(
      "dl",
      { class: "facts", "data-alerts": "set" },
      row("url", h("span", { class: "target" }, target.url)),
      // header names only: their values may be credentials
      row("headers", headers.length ? headers.join(", ") : "none"),
      row("digests", `at most one per ${duration(target.digestIntervalMs)}, listing at most ${target.digestMaxListed} deaths`),
      row(
        "throttled keys",
        target.throttledForMs === null ? "not reported" : `reported when throttled longer than ${duration(target.throttledForMs)}`,
      ),
    ),
  );
}

/**
 * A bulk action's progress: a progress bar over what it matched, and its counts and failures.
 * @param {HTMLElement} region
 * @param {any} action
 */
function showAction(region, action) {
  const finished = action.done + action.failed;
  fill(
    region,
    h("h2", { id: "progress-title" }, `Bulk ${action.kind} ${action.id}`),
    h("progress", { max: Math.max(1, action.matched), value: finished, "aria-label": "Bulk action progress" }),
    h(
      "p",
      { class: "counts", "data-status": action.status },
      `${action.status === "done" ? "Done" : "Running"}: matched ${action.matched}, done ${action.done}, failed ${action.failed}.`,
    ),
    action.failures.length
      ? h("ul", { class: "plain" }, ...action.failures.map((/** @type {any} */ f) => h("li", {}, `${f.id}: ${f.code}`)))
      : null,
  );
}
