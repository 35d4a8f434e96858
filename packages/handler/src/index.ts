/**
 * edge-scheduler-handler: write a handler Worker that edge-scheduler calls over a service binding.
 *
 *   import { ScheduledHandler, PermanentError, RetryLater } from "edge-scheduler-handler";
 *
 *   export class Handler extends ScheduledHandler<Env, { orderId: string }> {
 *     async handle({ executionId, payload }) {
 *       // return to succeed; throw RetryLater / any error to retry, PermanentError to give up
 *     }
 *   }
 *
 * The scheduler's binding names the entrypoint (`entrypoint = "Handler"`) and calls its `deliver`
 * method once per attempt; `deliver` runs `handle` and turns what it returned or threw into a
 * HandlerResult (protocol.ts).
 */
import { WorkerEntrypoint } from "cloudflare:workers";
import type { HandlerDelivery, HandlerResult } from "./protocol.ts";
import { runHandler } from "./run.ts";

export { HANDLER_METHOD, type HandlerDelivery, type HandlerResult } from "./protocol.ts";
export { type Handle, PermanentError, RetryLater, runHandler } from "./run.ts";

/**
 * A handler Worker's entrypoint: extend it, implement `handle`, export the class under the name
 * the scheduler's service binding gives as its entrypoint. `this.env` and `this.ctx` are
 * WorkerEntrypoint's.
 */
export abstract class ScheduledHandler<Env = unknown, Payload = unknown> extends WorkerEntrypoint<Env> {
  /** The RPC method the scheduler calls (HANDLER_METHOD), once per attempt. */
  async deliver(delivery: HandlerDelivery<Payload>): Promise<HandlerResult> {
    return runHandler((d) => this.handle(d), delivery);
  }

  /**
   * One attempt. Return (a string returned is kept as the attempt's detail) to succeed; throw
   * PermanentError to fail the execution at once, RetryLater (optionally with afterMs) or any
   * other error to have it retried with the job's backoff. The execution id is the same on every
   * attempt: use it as the idempotency key of what you do.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: void, not undefined, so `async handle() {}` (Promise<void>) implements it
  protected abstract handle(delivery: HandlerDelivery<Payload>): Promise<void | string> | void | string;
}
