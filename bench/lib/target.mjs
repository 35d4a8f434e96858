// The loopback webhook target: the shared receiver (test/support/receiver.mjs, keep-alive on
// 127.0.0.1) answering 200 once the body is read, or `delayMs` later (the crash scenario's 2 s
// handler). It records, for every request, when its headers arrived, its webhook-id, attempt and
// the job index carried in the body, and when the 200 was fully written. Recording is a push and
// a few property writes per request: the bench process shares the 2 cores with the runtime, so it
// must stay cheap (no headers or bytes kept, no signature check here; the e2e tests verify
// signatures).
import { OK, startReceiver } from "../../test/support/receiver.mjs";

/** @typedef {{ at: number, id: string, attempt: number, i: number, answeredAt: number | null }} Arrival */

export class Target {
  /** @param {{ delayMs?: number }} [options] */
  constructor(options = {}) {
    this.delayMs = options.delayMs ?? 0;
    /** @type {Arrival[]} */
    this.arrivals = [];
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
