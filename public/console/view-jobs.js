// Jobs: a page of GET /v1/jobs with its filters (status, label, name, URL), the next page by its
// cursor, and an id search that opens a job's page.
import { api, query } from "./api.js";
import { badge, errorNotice, fill, h, pager, table, targetName, time } from "./dom.js";

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
    field("name", "Name starts with", "nightly"),
    field("url", "Target URL starts with", "https://api.example.com"),
    h("button", { type: "submit" }, "Filter"),
  );
}

/**
 * @param {Record<string, string>} filters
 * @param {string} cursor
 */
async function jobPage(filters, cursor) {
  /** @type {{ jobs: any[], nextCursor: string | null }} */
  let page;
  try {
    // name and url are case-sensitive prefixes, matched by the API over every page
    page = await api("GET", `/v1/jobs${query({ ...filters, cursor })}`);
  } catch (error) {
    return errorNotice(error);
  }
  const rows = page.jobs.map((job) =>
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
      h("td", { class: "target" }, job.target.url ?? targetName(job.target)),
      h(
        "td",
        {},
        Object.entries(job.labels).map(([k, v]) => h("span", { class: "label" }, `${k}:${v}`)),
      ),
    ),
  );
  return h(
    "div",
    {},
    rows.length
      ? table("Jobs", ["job", "status", "schedule", "next run", "target", "labels"], rows)
      : h("p", {}, page.nextCursor ? "None on this page; the next page may have some." : "No jobs match."),
    pager("#/jobs", filters, cursor, page.nextCursor),
  );
}
