/**
 * Flow-control permits for a batch's deliveries (core/flow.ts; each key's gate is a FlowKey
 * object, flow/flow-key.ts). A lease governed by a key (its job's own, else its HTTP target's
 * origin's; a handler Worker has none) starts only with its key's permit, and frees it when its
 * delivery ends. The delivery loop asks `acquire` before it starts a lease and tells `release`
 * its outcome (fire.ts deliverAll); what a key holds back longer than the consumer waits goes
 * back to its bucket as a wait.
 *
 * Requests: one ask per key per lane's worth of leases (DELIVERY_CONCURRENCY), one more per short
 * wait, a heartbeat to the bucket before a start that waited, and the releases per key gathered
 * into as few round trips as they allow (round-trips.ts).
 */
import type { Bucket } from "../bucket/bucket";
import type { LeaseGrant } from "../bucket/protocol";
import type { Config } from "../config";
import { type FlowAnswer, type FlowAsk, type FlowRelease, type GoverningKey, governingKey } from "../core/flow";
import { isHttpTarget } from "../core/job";
import type { DeliveryOutcome } from "../core/response";
import { flowKeyName, flowKeyOf } from "../flow/flow-key";
import { RoundTrips } from "./round-trips";

type Lease = LeaseGrant;
type BucketStub = DurableObjectStub<Bucket>;

/** Whether a lease may start now (after `flowWaitMs` spent waiting here), or waits in its bucket until `retryAt`. */
export type Permit = { start: true; flowWaitMs: number } | { start: false; retryAt: number };

/**
 * A wait for a permit this short is spent in the consumer, asking the key again when it said to,
 * instead of in the bucket: a slot freed by a delivery that just ended is taken a round trip
 * later, not after an alarm, a queue and a claim (about 100 ms locally, which held a key limited
 * to 50/s near 22/s), and no row moves. The lease is heartbeated meanwhile. A longer wait (a
 * pause, a Retry-After, a far rate slot) goes back to the bucket at once.
 */
const CONSUMER_WAIT = { eachMaxMs: 500, totalMs: 2_000, eachMinMs: 20 } as const;

/** The permits of one batch's leases, in the order the delivery loop starts them. */
export class Permits {
  private readonly governed: { lease: Lease; stub: BucketStub; flow: GoverningKey | null }[];
  private readonly placeOf: Map<Lease, number>;
  private readonly answers = new Map<string, Promise<FlowAnswer>>();
  private asked = 0;
  private readonly releasers = new Map<string, RoundTrips<FlowRelease>>();

  constructor(
    leases: { lease: Lease; stub: BucketStub }[],
    private readonly env: Env,
    private readonly config: Config,
  ) {
    // each lease's key: its job's own, else its HTTP target's origin's (a handler Worker has none)
    this.governed = leases.map((c) => {
      const url = isHttpTarget(c.lease.target) ? c.lease.target.url : null;
      return { ...c, flow: governingKey(c.lease.flowControl, url, config.ORIGIN_PARALLELISM, c.lease.executionId) };
    });
    this.placeOf = new Map(leases.map((c, i) => [c.lease, i]));
  }

  /**
   * The lease's permit, asked when it is about to start: flow control first, a short wait spent
   * here, asking again. After a wait here it starts only if the lease is still ours and the job
   * still active (a cancel or pause meanwhile): else its permit is freed, and it waits (which ends
   * it canceled).
   */
  async acquire(lease: Lease): Promise<Permit> {
    const place = this.placeOf.get(lease)!;
    this.askAhead(place);
    const { stub, flow } = this.governed[place]!;
    if (!flow) return { start: true, flowWaitMs: 0 };
    const first = this.answers.get(lease.executionId) ?? this.askAgain(lease, flow);
    const { answer, waitedMs } = await waitForPermit(await first, () => this.askAgain(lease, flow));
    if (!answer.granted) return { start: false, retryAt: answer.retryAt };
    if (waitedMs > 0 && !(await stillToStart(stub, lease))) {
      this.releaserOf(lease.tenant, flow.key).add({ executionId: lease.executionId });
      return { start: false, retryAt: Date.now() };
    }
    return { start: true, flowWaitMs: waitedMs };
  }

  /** Frees the permit of a lease whose delivery ended (none without a key). */
  release(lease: Lease, outcome: DeliveryOutcome): void {
    const { flow } = this.governed[this.placeOf.get(lease)!]!;
    if (flow) this.releaserOf(lease.tenant, flow.key).add(flowReleaseOf(lease, outcome));
  }

  /** Once every release was sent (answered or not). */
  async drained(): Promise<void> {
    await Promise.all([...this.releasers.values()].map((r) => r.drained()));
  }

  /**
   * Permits are asked for a lane's worth of leases at a time, when the first of them is about to
   * start: asked all at once, the leases of a large batch waiting for a lane would hold their
   * keys' permits meanwhile, and a busy key would send the rest back to their buckets.
   */
  private askAhead(place: number): void {
    if (place < this.asked) return;
    const next = this.governed.slice(this.asked, this.asked + this.config.DELIVERY_CONCURRENCY);
    this.asked += next.length;
    for (const [id, answer] of askFlowKeys(next, this.env, this.config)) this.answers.set(id, answer);
  }

  /** One lease's ask again, after a wait. */
  private async askAgain(lease: Lease, flow: GoverningKey): Promise<FlowAnswer> {
    return (await askKey(this.env, lease.tenant, flow, [flowAskOf(lease, this.config)]))[0]!;
  }

  /** A key's releases, in as few round trips as they allow; one that fails is not retried: its permits lapse. */
  private releaserOf(tenant: string, key: string): RoundTrips<FlowRelease> {
    const name = flowKeyName(tenant, key);
    let releaser = this.releasers.get(name);
    if (!releaser) {
      const stub = flowKeyOf(this.env, tenant, key);
      releaser = new RoundTrips((releases) =>
        stub.release(releases).catch((error: unknown) => console.error("flow release failed (the permits lapse)", error)),
      );
      this.releasers.set(name, releaser);
    }
    return releaser;
  }
}

/**
 * Asks each flow-control key once (one RPC per key per lane's worth of leases, an origin's
 * included) which of its leases may start now: each governed lease's answer, by execution id.
 * The others (no key, origin keys off) start without waiting for it.
 */
function askFlowKeys(leases: { lease: Lease; flow: GoverningKey | null }[], env: Env, config: Config): Map<string, Promise<FlowAnswer>> {
  const governed = leases.flatMap(({ lease, flow }) => (flow ? [{ lease, flow }] : []));
  const byKey = Map.groupBy(governed, ({ lease, flow }) => flowKeyName(lease.tenant, flow.key));
  const answers = new Map<string, Promise<FlowAnswer>>();
  for (const group of byKey.values()) {
    const asks = group.map(({ lease }) => flowAskOf(lease, config));
    const asked = askKey(env, group[0]!.lease.tenant, group[0]!.flow, asks);
    for (const [i, a] of asks.entries())
      answers.set(
        a.executionId,
        asked.then((all) => all[i]!),
      );
  }
  return answers;
}

/**
 * Asks again while each wait is short and their sum within CONSUMER_WAIT.totalMs (at least
 * eachMinMs apiece: at most 100 asks); returns the last answer and the time waited here.
 */
async function waitForPermit(first: FlowAnswer, askAgain: () => Promise<FlowAnswer>): Promise<{ answer: FlowAnswer; waitedMs: number }> {
  let answer = first;
  let waitedMs = 0;
  while (!answer.granted) {
    const wait = Math.max(CONSUMER_WAIT.eachMinMs, answer.retryAt - Date.now());
    if (wait > CONSUMER_WAIT.eachMaxMs || waitedMs + wait > CONSUMER_WAIT.totalMs) break;
    await scheduler.wait(wait);
    waitedMs += wait;
    answer = await askAgain();
  }
  return { answer, waitedMs };
}

/** Whether a lease that waited may start: still live (a heartbeat, which also extends it) and its job not canceled or paused. */
async function stillToStart(stub: BucketStub, lease: Lease): Promise<boolean> {
  try {
    const [result] = await stub.heartbeat([{ executionId: lease.executionId, token: lease.token }]);
    return result?.ok === true && result.canceled !== true;
  } catch (error) {
    // unknown: start it (at-least-once; a stale lease's outcome is fenced off by the bucket)
    console.error("heartbeat before a waited start failed", error);
    return true;
  }
}

/** A lease's ask: its permit may be held for its timeout plus the lease (a dead consumer's slot comes back then). */
function flowAskOf(lease: Lease, config: Config): FlowAsk {
  return {
    executionId: lease.executionId,
    firstDueAt: lease.firstDueAt,
    holdMs: lease.timeoutMs + config.LEASE_MS,
    priority: lease.priority,
  };
}

/** Asks a key; an unreachable key holds its asks for a second (its limits are never assumed away). */
function askKey(env: Env, tenant: string, flow: GoverningKey, asks: FlowAsk[]): Promise<FlowAnswer[]> {
  return flowKeyOf(env, tenant, flow.key)
    .ask(flow.limits, asks)
    .catch((error: unknown): FlowAnswer[] => {
      console.error(`flow key ${flow.key} unreachable`, error);
      return asks.map((a) => ({ executionId: a.executionId, granted: false, retryAt: Date.now() + 1_000 }));
    });
}

/** Frees the delivery's slot of its key; a 429 or 503 with Retry-After slows the whole key that long (at most FLOW_WAIT_MAX_MS: FlowGate.release caps it). */
function flowReleaseOf(lease: Lease, outcome: DeliveryOutcome): FlowRelease {
  const slowDown =
    outcome.kind === "failed" && (outcome.httpStatus === 429 || outcome.httpStatus === 503) ? outcome.retryAfterMs : undefined;
  return { executionId: lease.executionId, ...(slowDown === undefined ? {} : { retryAfterMs: slowDown }) };
}
