// The largest job the API accepts in a batch (POST /v1/jobs/batch: no per-item size cap but its
// fields', src/core/job.ts LIMITS and src/schemas/job-input.ts), each field at its limit in the
// characters that cost the most once stored as JSON text in UTF-8: a body of control characters
// (1 byte each, 6 escaped), header values of Latin-1 (2 bytes each), a name of 3-byte characters.
// Its spec is about 0.84 MB; a single POST /v1/jobs (128 KiB) cannot carry it. Used by the
// integration tests of D1's limits and by scripts/heap-peak.mjs.

const LABEL_VALUE = "€".repeat(128);

/** `count` headers of `name`-prefixed names 256 long, values 2,048 Latin-1 characters. */
function headers(prefix, count = 32) {
  return Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`${prefix}-${i}-`.padEnd(256, "h"), String.fromCharCode(0xa0 + (i % 0x5f)).repeat(2048)]),
  );
}

/**
 * @param {string} baseUrl the target's origin and path (a loopback receiver's)
 * @param {Record<string, unknown>} [fields] fields to add or replace (runAt, delay, idempotencyKey, ...)
 * @returns {Record<string, unknown>}
 */
export function largestJob(baseUrl, fields = {}) {
  const url = (tag) => `${baseUrl}${baseUrl.includes("?") ? "&" : "?"}${tag}=`.padEnd(2048, "u");
  return {
    name: "€".repeat(200),
    target: {
      url: url("t"),
      method: "POST",
      headers: headers("x-big"),
      // 65,536 bytes of UTF-8, each written \u0001 in the spec's JSON
      body: "\u0001".repeat(64 * 1024),
    },
    timeoutMs: 60_000,
    metadata: { m: "m".repeat(4 * 1024 - 10) },
    labels: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`label-${i}-`.padEnd(63, "k"), LABEL_VALUE])),
    callback: { url: url("c"), headers: headers("x-cb") },
    failureCallback: { url: url("f"), headers: headers("x-fcb") },
    flowControl: { key: "k".repeat(128), parallelism: 1000 },
    trace: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: `v=${"t".repeat(509)}` },
    ...fields,
  };
}

/**
 * The largest attempt log an execution keeps (src/bucket/store.ts LOG_LIMIT attempts, each with an
 * error excerpt of EXCERPT_LENGTH characters and a response excerpt of RESPONSE_EXCERPT_LENGTH,
 * src/core/response.ts), in 3-byte characters: about 80 KB of JSON.
 * @param {number} at the first attempt's time (epoch ms)
 * @returns {string}
 */
export function largestAttemptLog(at) {
  const attempts = Array.from({ length: 20 }, (_, i) => ({
    attempt: i + 1,
    dueAt: at + i * 1000,
    startedAt: at + i * 1000,
    finishedAt: at + i * 1000 + 500,
    outcome: "failed",
    httpStatus: 500,
    error: "€".repeat(1024),
    waitMs: 1,
    response: "€".repeat(256),
  }));
  return JSON.stringify(attempts);
}

/** The largest labels a job has (16, keys and values at their lengths, values in 3-byte characters), as D1 keeps them. */
export function largestLabelsJson() {
  return JSON.stringify(largestJob("http://x").labels);
}
