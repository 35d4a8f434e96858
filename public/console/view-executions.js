// Executions across jobs: GET /v1/executions with its filters (status, job, label, target URL,
// HTTP status, a due-time window), page by page.
import { api, query } from "./api.js";
import { badge, errorNotice, fill, h, pager, table, time } from "./dom.js";

const FILTERS = /** @type {const} */ ([
  ["status", "Status", "dead"],
  ["jobId", "Job id", "job_…"],
  ["label", "Label", "team:ops"],
  ["url", "Target URL starts with", "https://api.example.com"],
  ["httpStatus", "HTTP status", "500"],
  ["from", "Due from", "2026-12-01T00:00:00Z"],
  ["to", "Due at or before", "2026-12-02T00:00:00Z"],
]);

/** @type {import("./app.js").View} */
export async function executionsView(main, { params }) {
  /** @type {Record<string, string>} */
  const filters = Object.fromEntries(FILTERS.map(([name]) => [name, params.get(name) ?? ""]));
  const cursor = params.get("cursor") ?? "";
  const results = h("div", { "aria-live": "polite" }, h("p", {}, "Loading…"));
  const form = h(
    "form",
    {
      class: "filters",
      "aria-label": "Filter executions",
      onsubmit: (/** @type {Event} */ event) => {
        event.preventDefault();
        const data = new FormData(/** @type {HTMLFormElement} */ (event.currentTarget));
        location.hash = `#/executions${query(Object.fromEntries([...data].map(([k, v]) => [k, String(v).trim()])))}`;
      },
    },
    ...FILTERS.map(([name, label, placeholder]) =>
      name === "status"
        ? h(
            "div",
            { class: "field" },
            h("label", { for: "exe-status" }, label),
            h(
              "select",
              { id: "exe-status", name },
              ...["", "pending", "scheduled", "dispatched", "running", "succeeded", "dead", "canceled"].map((s) =>
                h("option", { value: s, selected: s === filters.status }, s || "any"),
              ),
            ),
          )
        : h(
            "div",
            { class: "field" },
            h("label", { for: `exe-${name}` }, label),
            h("input", { id: `exe-${name}`, name, value: filters[name], placeholder }),
          ),
    ),
    h("button", { type: "submit" }, "Filter"),
  );
  fill(main, h("h1", { tabindex: -1 }, "Executions"), form, results);

  let page;
  try {
    page = await api("GET", `/v1/executions${query({ ...filters, cursor })}`);
  } catch (error) {
    fill(results, errorNotice(error));
    return;
  }
  const rows = page.executions.map((/** @type {any} */ e) =>
    h(
      "tr",
      {},
      h("td", {}, h("span", { class: "id" }, e.id)),
      h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(e.jobId)}` }, e.jobId)),
      h("td", {}, badge(e.status)),
      h("td", {}, time(e.dueAt)),
      h("td", {}, String(e.attempts)),
      h("td", {}, e.lastHttpStatus === null ? "—" : String(e.lastHttpStatus)),
      h("td", { class: "excerpt" }, e.lastError ?? ""),
    ),
  );
  fill(
    results,
    rows.length
      ? table("Executions", ["execution", "job", "status", "due", "attempts", "last HTTP", "last error"], rows)
      : h(
          "p",
          {},
          page.nextCursor
            ? "None on this page (the API reads a bounded range per page); the next page may have some."
            : "No executions match.",
        ),
    pager("#/executions", filters, cursor, page.nextCursor),
  );
}
