// Building the page: elements from plain values (text is always set as text, never parsed as HTML,
// so nothing the API returns can inject markup), and the readable forms of times and durations.
import { query } from "./api.js";

/**
 * An element: `attrs` sets attributes (on* keys add listeners; false/null/undefined are left
 * out), children are nodes or text.
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node | string | number | null | undefined | false | (Node | string)[])} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * An SVG element with attributes.
 * @param {string} tag
 * @param {Record<string, string | number>} [attrs]
 * @param {...(Node | string)} children
 * @returns {SVGElement}
 */
export function svg(tag, attrs = {}, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  for (const child of children) element.append(child);
  return element;
}

/**
 * @param {Element} parent
 * @param {any[]} children
 */
function append(parent, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
}

/**
 * Replaces an element's children, keeping the keyboard focus: when the focused element is inside
 * and carries a `data-key`, its replacement (the new element with the same key) is focused
 * afterwards; if that one is gone or disabled, the nearest keyed control after it (else before it)
 * that can take focus. A view that redraws every few seconds then does not throw a keyboard user
 * back to the top of the page.
 * @param {Element} element
 * @param {...any} children
 */
export function fill(element, ...children) {
  const active = document.activeElement;
  const inside = active instanceof HTMLElement && active !== element && element.contains(active);
  /** the keys of the controls inside, in page order, from the focused one on, then those before it */
  let keys = [];
  if (inside && active.dataset.key !== undefined) {
    const all = [...element.querySelectorAll("[data-key]")].map((e) => /** @type {HTMLElement} */ (e).dataset.key ?? "");
    const at = all.indexOf(active.dataset.key);
    keys = [...all.slice(at), ...all.slice(0, at).reverse()];
  }
  element.replaceChildren();
  append(element, children);
  for (const key of keys) {
    const next = /** @type {HTMLElement | null} */ (element.querySelector(`[data-key="${CSS.escape(key)}"]`));
    if (!next) continue;
    next.focus({ preventScroll: true });
    if (document.activeElement === next) break;
  }
}

/**
 * An RFC 3339 instant as local date and time with seconds (the instant itself in the title).
 * @param {string | null | undefined} instant
 */
export function time(instant) {
  if (!instant) return h("span", {}, "—");
  const at = new Date(instant);
  const text = at.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
  return h("time", { datetime: instant, title: instant }, text);
}

/**
 * A duration in ms as "850 ms", "2.4 s", "3.2 min".
 * @param {number | null | undefined} ms
 */
export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  if (Math.abs(ms) < 1000) return `${Math.round(ms)} ms`;
  if (Math.abs(ms) < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (Math.abs(ms) < 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/**
 * A list's page links: "First page" when not on it, "Next page" when the API gave a cursor.
 * @param {string} route e.g. "#/jobs"
 * @param {Record<string, string>} filters the route's query, without the cursor
 * @param {string | undefined} cursor this page's
 * @param {string | null} nextCursor
 */
export function pager(route, filters, cursor, nextCursor) {
  return h(
    "p",
    { class: "pager" },
    cursor ? h("a", { class: "button", href: `${route}${query(filters)}` }, "First page") : null,
    nextCursor ? h("a", { class: "button", href: `${route}${query({ ...filters, cursor: nextCursor })}` }, "Next page") : null,
  );
}

/**
 * An error for people, in a live region: the API's code, message and field.
 * @param {unknown} error
 */
export function errorNotice(error) {
  const text =
    error && typeof error === "object" && "describe" in error && typeof error.describe === "function" ? error.describe() : String(error);
  return h("p", { class: "error", role: "alert" }, text);
}

/**
 * A status as a badge (its class colours it; the word itself carries the meaning).
 * @param {string} status
 */
export function badge(status) {
  return h("span", { class: `badge badge-${status}` }, status);
}

/**
 * A table in a region that scrolls on its own on a narrow screen (the page itself never does);
 * focusable, so a keyboard can scroll it.
 * @param {string} label
 * @param {string[]} headings
 * @param {HTMLElement[]} rows
 */
export function table(label, headings, rows) {
  return h(
    "div",
    { class: "table", role: "region", "aria-label": label, tabindex: 0, "data-key": `table:${label}` },
    h("table", {}, h("thead", {}, h("tr", {}, ...headings.map((x) => h("th", { scope: "col" }, x)))), h("tbody", {}, ...rows)),
  );
}

/** A target that is not a URL: "worker billing" (a handler Worker) or "pull video-encode" (a pull queue). */
export function targetName(target) {
  return target.worker !== undefined ? `worker ${target.worker}` : `pull ${target.pull}`;
}

/** A handler Worker's or pull queue's payload after its name: " {…}", or nothing without one. */
export function payloadText(payload) {
  return payload === null || payload === undefined ? "" : ` ${JSON.stringify(payload)}`;
}
