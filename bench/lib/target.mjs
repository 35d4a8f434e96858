// The loopback webhook target: the shared receiver (test/support/receiver.mjs, keep-alive on
// 127.0.0.1) answering 200 once the body is read, or `delayMs` later (the crash scenario's 2 s
// handler, the mixed scenario's slow and hanging target, a second Target). It records, for every
// request, when its headers arrived, its webhook-id, attempt and the job index carried in the
// body, and when the 200 was fully written. Recording is a push and a few property writes per
// request: the bench process shares the 2 cores with the runtime, so it must stay cheap (no
// headers or bytes kept, no signature check here; the e2e tests verify signatures).
import { OK, startReceiver } from "../../test/support/receiver.mjs";

/** @typedef {{ at: number, id: string, attempt: number, i: number, answeredAt: number | null }} Arrival */

/**
 * Longest delay a Node timer takes (about 24.8 days); a longer one would fire after 1 ms. A
 * "hanging" path is a delay longer than the job's timeout: the scheduler gives up and closes the
 * request first, and close() (the receiver's stop()) cancels the pending answers, so it stays prompt.
 */
const MAX_DELAY_MS = 2 ** 31 - 1;

export class Target {
  /**
   * @param {{ delayMs?: number, arrivals?: Arrival[] }} [options] `arrivals`: record into this
   *   array (another Target's), so two origins share one record
   */
  constructor(options = {}) {
    this.delayMs = checkedDelay("delayMs", options.delayMs ?? 0);
    /** @type {Arrival[]} shared with another Target when given (two origins, one record) */
    this.arrivals = options.arrivals ?? [];
    /** @type {import("../../test/support/receiver.mjs").Receiver | null} */
    this.receiver = null;
    this.url = "";
  }

  async listen() {
    const answer = this.delayMs > 0 ? { ...OK, afterMs: this.delayMs } : OK;
    /** the bench's record of each request the receiver saw */
    const arrivalOf = new WeakMap();
    this.receiver = await startReceiver({
      respond: () => answer,
      onRequest: (request) => {
        /** @type {Arrival} */
        const arrival = { at: request.at, id: request.webhookId, attempt: request.attempt, i: indexOf(request.body), answeredAt: null };
        arrivalOf.set(request, arrival);
        this.arrivals.push(arrival);
      },
      onAnswered: (request) => {
        arrivalOf.get(request).answeredAt = request.completedAt;
      },
    });
    this.url = this.receiver.url;
    return this;
  }

  async close() {
    const receiver = this.receiver;
    this.receiver = null;
    await receiver?.stop();
  }
}

/**
 * @param {string} name
 * @param {number} ms
 */
function checkedDelay(name, ms) {
  if (typeof ms !== "number" || !(ms >= 0 && ms <= MAX_DELAY_MS))
    throw new Error(`Target ${name} must be in 0..${MAX_DELAY_MS} ms, got ${ms}`);
  return ms;
}

/**
 * The job index the bench put in the body ({"i": <index>}); -1 if unreadable.
 * @param {string} body
 */
function indexOf(body) {
  try {
    return JSON.parse(body).i;
  } catch {
    return -1;
  }
}
