// A handler Worker for the integration tests, bound to the scheduler as TEST_HANDLER (entrypoint
// Handler; vitest.config.ts). What it does is chosen by each job's payload:
//   {"answer": v}   returns v as is (undefined when absent): the classification tests
//   {"throw": "m"}  throws an Error with message m
//   {"sleepMs": n}  answers after n ms (a handler slower than the job's timeoutMs)
// It keeps every delivery it got; calls() returns them.
import { WorkerEntrypoint } from "cloudflare:workers";

const received = [];

export class Handler extends WorkerEntrypoint {
  async deliver(delivery) {
    received.push(delivery);
    const payload = delivery.payload ?? {};
    if (payload.throw !== undefined) throw new Error(payload.throw);
    if (payload.sleepMs !== undefined) await new Promise((resolve) => setTimeout(resolve, payload.sleepMs));
    return payload.answer;
  }

  calls() {
    return received;
  }
}

export default {
  fetch() {
    return new Response("test handler: called over a service binding");
  },
};
