// Jobs: a page of GET /v1/jobs with its filters (status, label, name, URL), the next page by its
// cursor, and an id search that opens a job's page.
import { ApiError, api, query } from "./api.js";
import { badge, errorNotice, fill, h, table, time } from "./dom.js";

/**
 * Filters GET /v1/jobs refused as unknown on this server (name and url are newer than the list):
 * those are applied to the loaded page here, and the page says so.
 * @type {Set<string>}
 */
const unsupported = new Set();

/** @type {import("./app.js").View} */
export async function jobsView(main, { params }) {
  const filters = {
    status: params.get("status") ?? "",
    label: params.get("label") ?? "",
    name: params.get("name") ?? "",
    url: params.get("url") ?? "",
  };
  const cursor = params.get("cursor") ?? "";
  const results = h("div", { "aria-live": "polite" }, h("p", {}, "Loading…"));
  fill(main, h("h1", { tabindex: -1 }, "Jobs"), findById(), filterForm(filters), results);
  fill(results, await jobPage(filters, cursor));
}

function findById() {
  const input = h("input", { id: "job-id", name: "id", required: true, placeholder: "job_…", spellcheck: "false" });
  return h(
    "form",
    {
      class: "inline",
      role: "search",
      "aria-label": "Open a job by id",
      onsubmit: (/** @type {Event} */ event) => {
        event.preventDefault();
        location.hash = `#/jobs/${encodeURIComponent(/** @type {HTMLInputElement} */ (input).value.trim())}`;
      },
    },
    h("label", { for: "job-id" }, "Job id"),
    input,
    h("button", { type: "submit" }, "Open"),
  );
}

/** @param {Record<string, string>} filters */
function filterForm(filters) {
  const statusSelect = h(
    "select",
    { id: "filter-status", name: "status" },
    ...["", "active", "paused", "canceled", "completed"].map((s) => h("option", { value: s, selected: s === filters.status }, s || "any")),
  );
  const field = (/** @type {string} */ name, /** @type {string} */ label, /** @type {string} */ placeholder) =>
    h(
      "div",
      { class: "field" },
      h("label", { for: `filter-${name}` }, label),
      h("input", { id: `filter-${name}`, name, value: filters[name], placeholder }),
    );
  return h(
    "form",
    {
      class: "filters",
      "aria-label": "Filter jobs",
      onsubmit: (/** @type {Event} */ event) => {
        event.preventDefault();
        const data = new FormData(/** @type {HTMLFormElement} */ (event.currentTarget));
        location.hash = `#/jobs${query(Object.fromEntries([...data].map(([k, v]) => [k, String(v).trim()])))}`;
      },
    },
    h("div", { class: "field" }, h("label", { for: "filter-status" }, "Status"), statusSelect),
    field("label", "Label", "team:ops"),
    field("name", "Name contains", "nightly"),
    field("url", "Target URL contains", "example.com"),
    h("button", { type: "submit" }, "Filter"),
  );
}

/**
 * @param {Record<string, string>} filters
 * @param {string} cursor
 */
async function jobPage(filters, cursor) {
  const local = { name: "", url: "" };
  /** @type {{ jobs: any[], nextCursor: string | null }} */
  let page;
  for (;;) {
    const sent = { ...filters };
    for (const name of unsupported) {
      if (name in local) {
        local[/** @type {"name" | "url"} */ (name)] = sent[name] ?? "";
        delete sent[name];
      }
    }
    try {
      page = await api("GET", `/v1/jobs${query({ ...sent, cursor })}`);
      break;
    } catch (error) {
      // an older server refuses the name/url parameters by name: filter here instead, once
      if (
        error instanceof ApiError &&
        error.code === "unknown_field" &&
        (error.field === "name" || error.field === "url") &&
        !unsupported.has(error.field)
      ) {
        unsupported.add(error.field);
        continue;
      }
      return errorNotice(error);
    }
  }
  const jobs = page.jobs.filter(
    (job) =>
      (!local.name || (job.name ?? "").toLowerCase().includes(local.name.toLowerCase())) &&
      (!local.url || (job.target.url ?? "").toLowerCase().includes(local.url.toLowerCase())),
  );
  const note =
    local.name || local.url
      ? h(
          "p",
          { class: "note" },
          `Name and URL are matched in this page of ${page.jobs.length} jobs only: this server's GET /v1/jobs does not filter by them.`,
        )
      : null;
  const rows = jobs.map((job) =>
    h(
      "tr",
      {},
      h(
        "td",
        {},
        h("a", { href: `#/jobs/${encodeURIComponent(job.id)}` }, job.name ?? job.id),
        job.name ? h("div", { class: "id" }, job.id) : null,
      ),
      h("td", {}, badge(job.status)),
      h("td", {}, job.schedule ? `${job.schedule.cron} (${job.schedule.timezone})` : "once"),
      h("td", {}, time(job.nextRunAt)),
      h("td", { class: "target" }, job.target.url ?? `worker ${job.target.worker}`),
      h(
        "td",
        {},
        Object.entries(job.labels).map(([k, v]) => h("span", { class: "label" }, `${k}:${v}`)),
      ),
    ),
  );
  const next = page.nextCursor
    ? h("a", { class: "button", href: `#/jobs${query({ ...filters, cursor: page.nextCursor })}` }, "Next page")
    : null;
  const first = cursor ? h("a", { class: "button", href: `#/jobs${query(filters)}` }, "First page") : null;
  return h(
    "div",
    {},
    note,
    rows.length ? table("Jobs", ["job", "status", "schedule", "next run", "target", "labels"], rows) : h("p", {}, "No jobs match."),
    h("p", { class: "pager" }, first, next),
  );
}
