// The API on this origin, with the key of this browser tab. The key lives in sessionStorage only:
// never a cookie (so no request carries it unasked) and never the URL (so no log or history holds it).

const KEY_ITEM = "edge-scheduler.apiKey";

/** An answer that is not 2xx, with the API's error envelope ({error: {code, message, field}}). */
export class ApiError extends Error {
  /**
   * @param {number} status HTTP status, 0 when no answer came
   * @param {string} code
   * @param {string} message
   * @param {string | null} field
   */
  constructor(status, code, message, field = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }

  /** One line for people: "invalid_field: labels: ... (field labels)". */
  describe() {
    const where = this.field ? ` (field ${this.field})` : "";
    return `${this.status ? `${this.status} ` : ""}${this.code}: ${this.message}${where}`;
  }
}

/** @returns {string | null} */
export function apiKey() {
  return sessionStorage.getItem(KEY_ITEM);
}

/** @param {string} key */
export function signIn(key) {
  sessionStorage.setItem(KEY_ITEM, key);
}

export function signOut() {
  sessionStorage.removeItem(KEY_ITEM);
}

/**
 * Calls the API and answers its parsed JSON body. A 401 forgets the key and sends the tab back to
 * sign-in (the "unauthorized" event); every other error is thrown as an ApiError.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<any>}
 */
export async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${apiKey() ?? ""}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  } catch (error) {
    throw new ApiError(0, "network", `the scheduler did not answer (${error instanceof Error ? error.message : String(error)})`);
  }
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: shown as text below
  }
  if (response.ok) return parsed;
  const envelope = parsed?.error;
  const error = envelope
    ? new ApiError(response.status, envelope.code, envelope.message, envelope.field ?? null)
    : new ApiError(response.status, "http_error", text.slice(0, 200) || response.statusText);
  if (response.status === 401) {
    signOut();
    window.dispatchEvent(new CustomEvent("unauthorized", { detail: error }));
  }
  throw error;
}

/**
 * A query string of the non-empty values, in order ("?status=active&label=team%3Aops").
 * @param {Record<string, string | null | undefined>} params
 */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value) search.set(name, value);
  const text = search.toString();
  return text ? `?${text}` : "";
}
