// The loopback webhook target, one for every user: the integration tests (receiver-setup.ts, over
// GET /__requests), the end-to-end tests (test/e2e/harness.ts), the bench (bench/lib/target.mjs)
// and the soak (scripts/soak.mjs). A keep-alive Node HTTP server on 127.0.0.1 that reads each
// body, answers as `respond` says (at once or later) and notes how the answer ended. What it
// keeps is chosen by the caller: `record` keeps headers and exact bytes (tests), hooks count
// (bench, soak); the bench shares 2 cores with the runtime, so the default path does no more
// than a few property writes. Types: receiver.d.mts.
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

/**
 * @typedef {import("./receiver.d.mts").Received} Received
 * @typedef {import("./receiver.d.mts").Recorded} Recorded
 * @typedef {import("./receiver.d.mts").Answer} Answer
 * @typedef {import("./receiver.d.mts").ReceiverOptions} ReceiverOptions
 * @typedef {import("./receiver.d.mts").Receiver} Receiver
 */

/** @type {Answer} */
export const OK = Object.freeze({ status: 200, body: "ok" });

/**
 * Behaviour by path, for tests that pick a target's answer in its URL:
 * /fail/<status>[?retryAfter=<s>], /hang/<ms> (200 after ms), /flaky/<n> (503 n times per path
 * and query, then 200); anything else 200.
 * @returns {(request: Received) => Answer}
 */
export function byPath() {
  /** @type {Map<string, number>} */
  const flakySeen = new Map();
  return (request) => {
    const url = new URL(request.path, "http://127.0.0.1");
    const [, kind, arg] = url.pathname.split("/");
    if (kind === "fail") {
      const retryAfter = url.searchParams.get("retryAfter");
      return { status: Number(arg), body: `failing with ${arg}`, ...(retryAfter ? { headers: { "retry-after": retryAfter } } : {}) };
    }
    if (kind === "hang") return { status: 200, body: "late", afterMs: Number(arg) };
    if (kind === "flaky") {
      const seen = (flakySeen.get(request.path) ?? 0) + 1;
      flakySeen.set(request.path, seen);
      return seen <= Number(arg) ? { status: 503, body: "not yet" } : OK;
    }
    return OK;
  };
}

/**
 * Starts a receiver on 127.0.0.1. Stop it with its own stop().
 * @param {ReceiverOptions} [options]
 * @returns {Promise<Receiver>}
 */
export async function startReceiver(options = {}) {
  const { port = 0, respond = byPath(), record = false, secret, onRequest, onAnswered } = options;
  const webhook = secret === undefined ? null : new Webhook(secret);
  /** @type {Recorded[]} */
  const received = [];
  /** @type {Set<NodeJS.Timeout>} */
  const timers = new Set();

  /**
   * @param {Received} request
   * @param {import("node:http").ServerResponse} res
   * @param {Answer} answer
   */
  const write = (request, res, answer) => {
    if (res.destroyed || res.writableEnded) return; // the caller went away first: no answer was given
    const body = answer.body ?? "";
    request.status = answer.status;
    // a known length, so the connection is reused at once (writeHead alone would make it chunked)
    res.writeHead(answer.status, { "content-length": Buffer.byteLength(body), ...answer.headers });
    res.end(body);
  };

  /**
   * @param {import("node:http").IncomingMessage} req
   * @param {import("node:http").ServerResponse} res
   */
  const handle = (req, res) => {
    const at = Date.now();
    const path = req.url ?? "/";
    if (record && path.startsWith("/__requests")) return list(received, path, res);
    const h = req.headers;
    /** @type {Received} */
    const request = {
      path,
      method: req.method ?? "",
      headers: undefined,
      body: "",
      bodyBase64: undefined,
      at,
      webhookId: String(h["webhook-id"] ?? ""),
      attempt: Number(h["x-scheduler-attempt"] ?? 0),
      jobId: String(h["x-scheduler-job-id"] ?? ""),
      signatureError: undefined,
      status: null,
      completedAt: null,
      aborted: false,
    };
    res.on("finish", () => {
      request.completedAt = Date.now();
      onAnswered?.(request);
    });
    res.on("close", () => {
      if (request.completedAt === null) request.aborted = true;
    });
    /** @type {Buffer[]} */
    const chunks = [];
    let read = false;
    /** @param {boolean} whole */
    const arrived = (whole) => {
      if (read) return;
      read = true;
      const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      request.body = bytes.toString("utf8");
      if (record) {
        request.headers = joined(h);
        request.bodyBase64 = bytes.toString("base64");
        received.push(/** @type {Recorded} */ (request));
      }
      if (webhook) request.signatureError = verify(webhook, request.body, h);
      if (!whole) request.aborted = true; // the caller went away mid-body: keep what arrived, answer nothing
      onRequest?.(request);
      if (!whole) return;
      const answer = respond(request);
      if (!answer.afterMs) return write(request, res, answer);
      const timer = setTimeout(() => {
        timers.delete(timer);
        write(request, res, answer);
      }, answer.afterMs);
      timers.add(timer);
    };
    req.on("data", (/** @type {Buffer} */ chunk) => chunks.push(chunk));
    req.on("end", () => arrived(true));
    req.on("error", () => arrived(false));
    req.on("close", () => arrived(false)); // after "end" when whole, so only a cut-off body gets here
  };

  const server = createServer({ keepAlive: true, keepAliveInitialDelay: 1000 }, handle);
  // idle connections outlive any caller's pool timeout, so a reused socket is never closed under a
  // request in flight; no server-side time limit on a request (hanging targets are the point)
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 70_000;
  server.requestTimeout = 0;
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(undefined));
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the receiver did not bind a TCP port");
  return {
    url: `http://127.0.0.1:${address.port}`,
    port: address.port,
    received,
    async stop() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}

/**
 * GET /__requests?path=<prefix>: what was received whose path starts with prefix, as JSON.
 * @param {Recorded[]} received
 * @param {string} path
 * @param {import("node:http").ServerResponse} res
 */
function list(received, path, res) {
  const prefix = new URL(path, "http://127.0.0.1").searchParams.get("path") ?? "";
  const body = JSON.stringify(received.filter((r) => r.path.startsWith(prefix)));
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** @param {import("node:http").IncomingHttpHeaders} headers */
function joined(headers) {
  /** @type {Record<string, string>} */
  const out = {};
  for (const [k, v] of Object.entries(headers)) out[k] = Array.isArray(v) ? v.join(", ") : (v ?? "");
  return out;
}

/**
 * @param {Webhook} webhook
 * @param {string} body
 * @param {import("node:http").IncomingHttpHeaders} headers
 * @returns {string | null}
 */
function verify(webhook, body, headers) {
  try {
    webhook.verify(body, /** @type {Record<string, string>} */ (headers), { jsonParse: false });
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
