// The console: sign-in, the views' routes (#/jobs, #/jobs/<id>, #/executions, #/dlq, #/live, with
// their filters in the hash, never the key) and the shell around them.
import { ApiError, api, apiKey, signIn, signOut } from "./api.js";
import { errorNotice, fill, h } from "./dom.js";
import { dlqView } from "./view-dlq.js";
import { executionsView } from "./view-executions.js";
import { jobView } from "./view-job.js";
import { jobsView } from "./view-jobs.js";
import { liveView } from "./view-live.js";

/**
 * A view draws itself into `main` and answers how to stop its timers when the route changes.
 * `unreadable` is a hash that could not be decoded (shown as the jobs, with a notice).
 * @typedef {(main: HTMLElement, route: Route) => Promise<(() => void) | void>} View
 * @typedef {{ path: string[], params: URLSearchParams, unreadable?: string }} Route
 */

const main = /** @type {HTMLElement} */ (document.getElementById("main"));
const nav = /** @type {HTMLElement} */ (document.querySelector("nav"));
/** @type {(() => void) | void} */
let stopView;
/** why the last sign-in ended, shown on the sign-in form */
let signedOutBecause = "";

/** @returns {Route} */
function currentRoute() {
  const [path = "", search = ""] = location.hash.replace(/^#\/?/, "").split("?");
  try {
    return { path: path.split("/").filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(search) };
  } catch {
    // a malformed escape ("#/jobs/%E0"): decodeURIComponent throws a URIError
    return { path: [], params: new URLSearchParams(), unreadable: location.hash };
  }
}

/** @param {Route} route @returns {View} */
function viewOf(route) {
  const [first, second] = route.path;
  if (first === "jobs" && second) return jobView;
  if (first === "executions") return executionsView;
  if (first === "dlq") return dlqView;
  if (first === "live") return liveView;
  return jobsView;
}

async function show() {
  stopView?.();
  stopView = undefined;
  const token = {};
  showing = token;
  if (!apiKey()) {
    nav.hidden = true;
    signInForm();
    return;
  }
  nav.hidden = false;
  const route = currentRoute();
  const section = route.path[0] ?? "jobs";
  for (const link of nav.querySelectorAll("a")) {
    if (link.getAttribute("href") === `#/${section}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const view = viewOf(route);
  try {
    const stop = await view(main, route);
    // the route changed while it loaded: stop what it started at once
    if (showing !== token) stop?.();
    else stopView = stop;
  } catch (error) {
    // a view left already: its error is not the newer view's to show
    if (showing !== token) return;
    if (error instanceof ApiError && error.status === 401) return; // the unauthorized handler shows sign-in
    main.append(errorNotice(error));
  }
  if (route.unreadable !== undefined && showing === token) {
    const notice = errorNotice(`This address could not be read (${route.unreadable}); here are the jobs.`);
    const heading = main.querySelector("h1");
    if (heading) heading.after(notice);
    else main.prepend(notice);
  }
}
/** @type {object} the latest show(), so a slow one cannot keep timers of a page left already */
let showing = {};

function signInForm() {
  const input = h("input", {
    id: "api-key",
    name: "api-key",
    type: "password",
    autocomplete: "off",
    required: true,
    spellcheck: "false",
    autofocus: true,
  });
  const status = h("div", { "aria-live": "polite" }, signedOutBecause ? errorNotice(signedOutBecause) : null);
  const form = h(
    "form",
    { class: "sign-in", onsubmit: submit },
    h("label", { for: "api-key" }, "API key"),
    input,
    h("p", { class: "hint" }, "Kept in this browser tab only (sessionStorage): closing the tab forgets it. Sent as Authorization: Bearer."),
    h("button", { type: "submit" }, "Sign in"),
    status,
  );
  fill(main, h("h1", { tabindex: -1 }, "Sign in"), form);
  input.focus();

  /** @param {Event} event */
  async function submit(event) {
    event.preventDefault();
    const key = /** @type {HTMLInputElement} */ (input).value.trim();
    if (!key) return;
    signIn(key);
    try {
      await api("GET", "/v1/jobs?limit=1"); // the cheapest call that checks the key
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 401) {
        signOut();
        fill(status, errorNotice(error));
      }
      return;
    }
    signedOutBecause = "";
    if (!location.hash || location.hash === "#/") location.hash = "#/jobs";
    else await show();
    focusHeading();
  }
}

function focusHeading() {
  /** @type {HTMLElement | null} */ (main.querySelector("h1"))?.focus();
}

window.addEventListener("unauthorized", () => {
  signedOutBecause = "The API refused this key (401). Sign in again.";
  void show();
});
window.addEventListener("hashchange", () => {
  void show().then(focusHeading);
});
/** @type {HTMLElement} */ (document.getElementById("sign-out")).addEventListener("click", () => {
  signOut();
  signedOutBecause = "";
  void show();
});
// the first view drawn: what the browser test reports as the console's time to first render
void show().then(() => performance.mark("console-ready"));
