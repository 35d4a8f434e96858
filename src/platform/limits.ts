/**
 * What production enforces that the local runtime (workerd, Miniflare) does not, as numbers: the
 * one place each is written. docs/platform-limits.md gives each one's source in Cloudflare's
 * documentation, where the code meets it and the test that holds it; the local profile
 * (platform/profile.ts) enforces the ones a local run can check, so a change that would break in
 * production fails `npm test` first.
 */

/** Work a non-actor handler left in `ctx.waitUntil` lives about this long after the handler returns. */
export const WAIT_UNTIL_AFTER_RETURN_MS = 30_000;

/** A queue consumer invocation (and a cron trigger's) runs at most this long, wall clock. */
export const INVOCATION_WALL_MS = 15 * 60_000;

/** Subrequests (fetch and calls to bindings) one invocation may make on the Workers Paid plan (default). */
export const SUBREQUESTS_PER_INVOCATION = 10_000;

/** D1 queries one invocation may run (Workers Paid; a batch's statements each count). */
export const D1_QUERIES_PER_INVOCATION = 1_000;

/** Connections one invocation holds open at once; more wait until one of these has its response headers. */
export const OPEN_CONNECTIONS_PER_INVOCATION = 6;

/** Bound parameters per SQL statement, in D1 and in Durable Object SQLite alike. */
export const SQL_MAX_BOUND_PARAMETERS = 100;

/** Bytes of one SQL statement's text, in D1 and in Durable Object SQLite alike. */
export const SQL_MAX_STATEMENT_BYTES = 100_000;

/** Bytes one D1 query may return. */
export const D1_MAX_RESULT_BYTES = 50_000_000;

/** Bytes of one queue message's body, of one sendBatch, and messages in one sendBatch. */
export const QUEUE_MESSAGE_BYTES = 128_000;
export const QUEUE_BATCH_BYTES = 256_000;
export const QUEUE_BATCH_MESSAGES = 100;

/** A queue message's longest delay (delaySeconds). */
export const QUEUE_MAX_DELAY_SECONDS = 43_200;

/** A queue consumer's most concurrent invocations (max_concurrency's ceiling). */
export const QUEUE_MAX_CONCURRENCY = 250;

/** Bytes of the arguments (or the result) of one Durable Object RPC call. */
export const RPC_MAX_BYTES = 32 * 1024 * 1024;

/** Requests one Durable Object takes per second before it answers "overloaded" (a soft limit). */
export const OBJECT_REQUESTS_PER_SECOND = 1_000;

/** Memory one isolate has, shared by the requests and the objects it runs. */
export const ISOLATE_MEMORY_BYTES = 128 * 1024 * 1024;

/** After a deploy, a busy Durable Object may run its previous code this long before it is reset. */
export const OBJECT_CODE_UPDATE_MS = 300_000;
