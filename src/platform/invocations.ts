/**
 * The local profile's record of invocations: each one (a fetch, a queue batch, a cron run, a Durable
 * Object call) carried by AsyncLocalStorage through all its promises, what it spent against
 * platform/limits.ts, the breaches and the peaks. platform/profile.ts wraps the bindings that spend it.
 */

import { AsyncLocalStorage } from "node:async_hooks";
import * as LIMITS from "./limits";

export type ProfileMode = "enforce" | "meter";

/** A limit production would have enforced at this point. */
export class PlatformLimitError extends Error {
  constructor(
    readonly limit: string,
    detail: string,
  ) {
    super(`platform limit exceeded (${limit}): ${detail} [the local profile, src/platform/profile.ts; docs/platform-limits.md]`);
    this.name = "PlatformLimitError";
  }
}

/** One invocation as the platform counts it. */
interface Invocation {
  kind: string;
  /** D1 statements run (a batch's each count) */
  d1Queries: number;
  /** the Durable Object whose call this is (a call it makes to itself stays in it) */
  owner?: object;
  subrequests: number;
  /** fetches waiting for their response headers */
  open: number;
  /** fetches waiting for a connection */
  waiting: (() => void)[];
  /** why its further I/O is refused, once it is */
  cut: string | null;
}

const invocations = new AsyncLocalStorage<Invocation>();

let mode: ProfileMode = "enforce";

/** Whether the profile only counts requests (the bench), measuring no sizes. */
export function metering(): boolean {
  return mode === "meter";
}

/** The invocation the caller runs in; undefined outside any (as tests make calls). */
export function currentInvocation() {
  return invocations.getStore();
}

/** The profile's mode from the Worker's vars: PLATFORM_LIMITS "enforce" (the default) or "meter". */
export function configureProfile(env: { PLATFORM_LIMITS?: string }): void {
  mode = env.PLATFORM_LIMITS === "meter" ? "meter" : "enforce";
}

/** How long an invocation's waitUntil work lives after its handler returns: production's, or PLATFORM_WAIT_UNTIL_MS (a test scales it). */
function waitUntilAfterReturnMs(env: { PLATFORM_WAIT_UNTIL_MS?: string }): number {
  const ms = Number(env.PLATFORM_WAIT_UNTIL_MS);
  return Number.isFinite(ms) && ms > 0 ? ms : LIMITS.WAIT_UNTIL_AFTER_RETURN_MS;
}

// ---------------------------------------------------------------------------------------------
// what was seen: breaches, peaks

interface Violation {
  limit: string;
  message: string;
  invocation: string;
}

const violations: Violation[] = [];
export const peaks = {
  subrequestsPerInvocation: 0,
  d1QueriesPerInvocation: 0,
  openConnections: 0,
  d1ResultBytes: 0,
  rpcBytes: 0,
  queueMessageBytes: 0,
};
/** requests per Durable Object: the current second's count and the highest second seen, by "<binding>:<name>" */
const objectRates = new Map<string, { second: number; count: number; peak: number; total: number }>();

/** Breaches recorded since the last call (a test that provokes one takes it; the test setup fails on any other). */
export function takeViolations(): Violation[] {
  return violations.splice(0);
}

/** What the profile saw: breaches, the peaks, and the busiest Durable Objects (requests in their busiest second). */
export function platformReport(top = 10) {
  const objects = [...objectRates]
    .map(([object, r]) => ({ object, peakPerSecond: r.peak, total: r.total }))
    .sort((a, b) => b.peakPerSecond - a.peakPerSecond)
    .slice(0, top);
  return { mode, violations: violations.length, peaks: { ...peaks }, objects };
}

/** Forgets the peaks and per-object counts (the bench resets between scenarios). */
export function resetReport(): void {
  objectRates.clear();
  for (const key of Object.keys(peaks) as (keyof typeof peaks)[]) peaks[key] = 0;
}

export function breach(limit: string, detail: string): void {
  const error = new PlatformLimitError(limit, detail);
  if (mode === "meter") return;
  violations.push({ limit, message: error.message, invocation: invocations.getStore()?.kind ?? "(none)" });
  console.error(error.message);
  throw error;
}

// ---------------------------------------------------------------------------------------------
// invocations

function newInvocation(kind: string): Invocation {
  return { kind, subrequests: 0, d1Queries: 0, open: 0, waiting: [], cut: null };
}

/** Runs `work` as one invocation of `kind`; an object's call to itself stays in the invocation that made it. */
export function runAsInvocation<T>(kind: string, work: () => T, owner?: object): T {
  if (owner !== undefined && invocations.getStore()?.owner === owner) return work();
  return invocations.run({ ...newInvocation(kind), owner }, work);
}

/** A subrequest of the current invocation (outside any, as tests make them: not counted). */
export function subrequest(what: string): void {
  const invocation = invocations.getStore();
  if (!invocation) return;
  if (invocation.cut) breach("invocation ended", `${what} after ${invocation.cut} (${invocation.kind})`);
  invocation.subrequests += 1;
  peaks.subrequestsPerInvocation = Math.max(peaks.subrequestsPerInvocation, invocation.subrequests);
  if (invocation.subrequests > LIMITS.SUBREQUESTS_PER_INVOCATION)
    breach("subrequests per invocation", `${invocation.subrequests} > ${LIMITS.SUBREQUESTS_PER_INVOCATION} in ${invocation.kind}`);
}

/**
 * A non-actor handler (fetch, queue, scheduled): `waitUntil` work is cut WAIT_UNTIL_AFTER_RETURN_MS
 * after `handler` settles, and a queue or cron invocation's I/O at INVOCATION_WALL_MS.
 */
export async function runHandler<T>(
  kind: string,
  env: { PLATFORM_WAIT_UNTIL_MS?: string },
  ctx: ExecutionContext,
  handler: (ctx: ExecutionContext) => T | Promise<T>,
  { wallMs }: { wallMs?: number } = {},
): Promise<T> {
  const invocation = newInvocation(kind);
  const wall = wallMs === undefined ? undefined : setTimeout(() => (invocation.cut ??= `${wallMs} ms of wall time`), wallMs);
  const left: Promise<unknown>[] = [];
  const wrapped: ExecutionContext = {
    waitUntil: (promise) => {
      left.push(promise);
      ctx.waitUntil(promise);
    },
    passThroughOnException: () => ctx.passThroughOnException(),
    props: ctx.props,
  } as ExecutionContext;
  try {
    return await invocations.run(invocation, () => handler(wrapped));
  } finally {
    const cutMs = waitUntilAfterReturnMs(env);
    const cut = setTimeout(() => (invocation.cut ??= `the handler returned ${cutMs} ms ago (waitUntil)`), cutMs);
    // the timers end with the work they bound
    ctx.waitUntil(
      Promise.allSettled(left).then(() => {
        clearTimeout(cut);
        clearTimeout(wall);
      }),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// fetch: subrequests, six connections waiting for headers

/**
 * Runs `request` on one of the invocation's connections: fetch, queue sends and R2 calls count, a
 * service binding or a Durable Object call does not (docs/platform-limits.md). With six waiting for
 * their answer, production queues the next until one has it; its timeout (the caller's signal) runs
 * meanwhile.
 */
export async function onConnection<T>(request: () => Promise<T>): Promise<T> {
  const invocation = invocations.getStore();
  if (!invocation) return request();
  if (invocation.open >= LIMITS.OPEN_CONNECTIONS_PER_INVOCATION) await new Promise<void>((resolve) => invocation.waiting.push(resolve));
  invocation.open += 1;
  peaks.openConnections = Math.max(peaks.openConnections, invocation.open);
  try {
    return await request();
  } finally {
    invocation.open -= 1;
    invocation.waiting.shift()?.();
  }
}

/** A request to one Durable Object: per second, against the soft limit. */
export function objectRequest(object: string): void {
  const second = Math.floor(performance.now() / 1_000);
  let rate = objectRates.get(object);
  if (!rate) {
    rate = { second, count: 0, peak: 0, total: 0 };
    objectRates.set(object, rate);
  }
  if (rate.second !== second) {
    rate.second = second;
    rate.count = 0;
  }
  rate.count += 1;
  rate.total += 1;
  rate.peak = Math.max(rate.peak, rate.count);
  if (rate.count > LIMITS.OBJECT_REQUESTS_PER_SECOND)
    breach("requests per Durable Object", `${rate.count} requests within one second to ${object} (overloaded)`);
}
