// The example handler Worker: what a job's payload asks of it, it does, to show each outcome.
//   {"failTimes": n}      attempts 1..n fail (odd ones with a plain Error, even ones with RetryLater), then success
//   {"permanent": true}   fails at once, no retries (PermanentError)
//   anything else         success
// The kit is imported from its source by relative path: wrangler's bundler (esbuild) compiles it
// with this Worker. (Its package name resolves to the built dist/, which a checkout lacks.)
import { type HandlerDelivery, PermanentError, RetryLater, ScheduledHandler } from "../../../packages/handler/src/index.ts";

/** This Worker has no bindings of its own. */
type Env = Record<string, never>;

interface Payload {
  failTimes?: number;
  permanent?: boolean;
}

export class Handler extends ScheduledHandler<Env, Payload | null> {
  protected override handle({ executionId, jobId, attempt, payload }: HandlerDelivery<Payload | null>): string {
    console.log(`example handler: job ${jobId} execution ${executionId} attempt ${attempt}`, JSON.stringify(payload));
    if (payload?.permanent === true) throw new PermanentError("example handler: permanent failure asked for by the payload");
    const failTimes = payload?.failTimes ?? 0;
    if (attempt <= failTimes) {
      const message = `example handler: failing attempt ${attempt} of ${failTimes} as the payload asks`;
      if (attempt % 2 === 1) throw new Error(message);
      throw new RetryLater(message, { afterMs: 100 });
    }
    return `example handler: done on attempt ${attempt}`;
  }
}

// A Worker needs a default export; this one only says what it is.
export default {
  fetch(): Response {
    return new Response("example handler: called over a service binding by edge-scheduler\n");
  },
};
