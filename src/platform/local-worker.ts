/**
 * The Worker as every local run runs it (`npm start`, the end-to-end tests, the bench and the
 * integration tests): src/index.ts under the local profile (platform/profile.ts), which enforces
 * what production enforces and workerd does not. wrangler.toml's `main` stays src/index.ts: the
 * generated local configs (scripts/local-env.mjs, vitest.config.ts) name this file instead, so
 * nothing here is deployed.
 *
 * It also plays one part of the platform the local queue lacks: production runs up to
 * max_concurrency consumer invocations of a queue at once, the local queue one batch at a time. So a
 * queue invocation is answered to the local queue once every message of its batch is acked or
 * retried, while its handler runs on (as the same invocation: under the wall-time limit, its own
 * `waitUntil` work cut when it returns); the local config sets queue_consumer_no_wait_for_wait_until
 * so that the local queue does not wait for it. GET /__platform answers platformReport() (the bench
 * reads it), POST /__platform/reset forgets it.
 */

import * as scheduler from "../index";
import { configureProfile, platformReport, resetReport, runAsInvocation, runHandler } from "./invocations";
import { INVOCATION_WALL_MS, QUEUE_MAX_CONCURRENCY } from "./limits";
import { limitedEnv, limitedFetch, limitState } from "./profile";

globalThis.fetch = limitedFetch(globalThis.fetch);

const worker = scheduler.default;

/** Consumer invocations of each queue whose batch is answered while their handler runs on. */
const runningOn = new Map<string, number>();

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    configureProfile(env);
    const { pathname } = new URL(request.url);
    if (pathname === "/__platform") return Response.json(platformReport());
    if (pathname === "/__platform/reset" && request.method === "POST") {
      resetReport();
      return new Response(null, { status: 204 });
    }
    return runHandler("fetch", env, ctx, (inner) => worker.fetch(request, limitedEnv(env), inner));
  },

  async queue(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
    configureProfile(env);
    const settled = onceSettled(batch);
    const handled = runHandler(
      `queue ${batch.queue}`,
      env,
      ctx,
      (inner) => (worker.queue as ExportedHandlerQueueHandler<Env>)(batch, limitedEnv(env), inner),
      {
        wallMs: INVOCATION_WALL_MS,
      },
    );
    const first = await Promise.race([handled.then(() => "handled" as const), settled.then(() => "settled" as const)]);
    const running = runningOn.get(batch.queue) ?? 0;
    if (first === "handled" || running >= QUEUE_MAX_CONCURRENCY - 1) return handled;
    // every message is settled: the local queue may go on, as production's would with another invocation
    runningOn.set(batch.queue, running + 1);
    ctx.waitUntil(handled.finally(() => runningOn.set(batch.queue, (runningOn.get(batch.queue) ?? 1) - 1)));
  },

  async scheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
    configureProfile(env);
    return runHandler(
      "scheduled",
      env,
      ctx,
      (inner) => (worker.scheduled as ExportedHandlerScheduledHandler<Env>)(controller, limitedEnv(env), inner),
      {
        wallMs: INVOCATION_WALL_MS,
      },
    );
  },
} satisfies ExportedHandler<Env, unknown>;

/** Resolves once every message of the batch was acked or retried (never, for an empty batch). */
function onceSettled(batch: MessageBatch<unknown>): Promise<void> {
  let unsettled = batch.messages.length;
  const { promise, resolve } = Promise.withResolvers<void>();
  const settle = () => {
    unsettled -= 1;
    if (unsettled === 0) resolve();
  };
  for (const message of batch.messages) {
    let done = false;
    const once =
      <A extends unknown[]>(method: (...args: A) => void) =>
      (...args: A) => {
        method.apply(message, args);
        if (!done) {
          done = true;
          settle();
        }
      };
    message.ack = once(message.ack);
    message.retry = once(message.retry);
  }
  const { ackAll, retryAll } = batch;
  batch.ackAll = () => {
    ackAll.apply(batch);
    resolve();
  };
  batch.retryAll = (options) => {
    retryAll.apply(batch, [options]);
    resolve();
  };
  return promise;
}

type ObjectClass = new (ctx: DurableObjectState, env: Env) => object;

/**
 * A Durable Object class under the profile: its state's SQL and its env's bindings checked, and each
 * call from outside it (an RPC, its alarm, a fetch) one invocation. A method it calls on itself stays
 * part of the invocation that called it.
 */
function limitedObject<C extends ObjectClass>(Base: C): C {
  const Limited = class extends (Base as ObjectClass) {
    constructor(ctx: DurableObjectState, env: Env) {
      configureProfile(env);
      super(limitState(ctx), limitedEnv(env));
    }
  };
  for (const name of Object.getOwnPropertyNames(Base.prototype)) {
    const descriptor = Object.getOwnPropertyDescriptor(Base.prototype, name);
    if (name === "constructor" || typeof descriptor?.value !== "function") continue;
    Object.defineProperty(Limited.prototype, name, {
      ...descriptor,
      // the class's method as it is at the call (a test may spy on it)
      value(this: object, ...args: unknown[]) {
        return runAsInvocation(`${Base.name}.${name}`, () => Reflect.apply(Base.prototype[name], this, args), this);
      },
    });
  }
  Object.defineProperty(Limited, "name", { value: Base.name });
  return Limited as unknown as C;
}

export const Bucket = limitedObject(scheduler.Bucket);
export const FlowKey = limitedObject(scheduler.FlowKey);
export const BulkAction = limitedObject(scheduler.BulkAction);
export const PullQueue = limitedObject(scheduler.PullQueue);
export const IdempotencyKeys = limitedObject(scheduler.IdempotencyKeys);
export const DebounceKeys = limitedObject(scheduler.DebounceKeys);
export const Alerts = limitedObject(scheduler.Alerts);
