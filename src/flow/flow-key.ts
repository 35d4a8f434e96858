/**
 * One flow-control key of one tenant (issue 13): the single owner of its limits, so they hold
 * across every consumer invocation and bucket. The consumer asks it before a delivery and tells
 * it when the delivery ended; the API reads it, pauses, resumes and changes its limits.
 *
 * Kept durably (SQLite): the limits set through the API, the pause, a target's slow-down, and
 * the permits in flight of a job's own key (a restart must not forget a slot that a delivery
 * still holds: three rows written per delivery, an insert with its index entry and a delete).
 * Kept in memory only: the start times of the current rate window, the waiters' order and rate
 * slots (after a restart the window starts empty: at most one period may then start up to twice
 * the rate; a waiter told a slot is then served as a new asker), and
 * the permits of an origin's implicit key: that limit is a default guard against bursts, not a
 * promise the user made to a target, so after a restart it may briefly admit up to twice its
 * parallelism rather than write three rows for every key-less delivery. An origin's key is held by
 * ORIGIN_KEY_PARTS objects (core/origin-key.ts), each its share: one object at 10,000 deliveries/s would
 * pass the soft limit of requests per object; they are listed and alert under the origin key's name.
 *
 * Durable Objects cannot be listed, so the first call that gives the key state (ask, pause,
 * resume, a limits change; never a read) lists it in D1's flow_keys for the metrics, once.
 *
 * Throttle alerts (docs/alerts.md): the key follows its target's slow-downs and reports an episode
 * that passes its tenant's threshold (throttle-alert.ts). An origin key's part tells its siblings of
 * a slow-down and adopts what the origin's one object held before parts (origin-part.ts).
 */
import { DurableObject } from "cloudflare:workers";
import { configOf } from "../config";
import type { ThrottleEpisode } from "../core/alert";
import { bucketOf } from "../core/bucketing";
import type { FlowAnswer, FlowAsk, FlowKeyView, FlowLimits, FlowRelease } from "../core/flow";
import { FlowGate } from "../core/flow-gate";
import { originKeyOfPart, originKeyPart, originKeyParts, originPartParallelism } from "../core/origin-key";
import { registerFlowKey } from "../db/flow-keys";
import { shardsOf } from "../db/shards";
import { objectOf } from "../placement";
import { applyMigrations, type SqliteMigration } from "../sqlite-migrations";
import { mergedView, OriginPart } from "./origin-part";
import { ThrottleAlert } from "./throttle-alert";

/** The name of a tenant's key object (and the one string that tells two keys apart): a key holds no newline. */
export function flowKeyName(tenant: string, key: string): string {
  return `${tenant}\n${key}`;
}

/** The object of a tenant's key: one per tenant and key name. */
export function flowKeyOf(env: Env, tenant: string, key: string): DurableObjectStub<FlowKey> {
  return objectOf(env, env.FLOW_KEY, flowKeyName(tenant, key));
}

/** What the API does with a key: one object's, or an origin key's parts together. */
export interface FlowKeyControl {
  view(): Promise<FlowKeyView>;
  setPaused(paused: boolean): Promise<FlowKeyView>;
  changeLimits(change: Partial<FlowLimits>): Promise<FlowKeyView>;
}

/**
 * A tenant's origin key as the API shows and changes it: every part at once (core/flow.ts
 * ORIGIN_KEY_PARTS, as many as `originParallelism` makes), a PATCHed parallelism split between them
 * (one slot each at least); the view adds theirs up.
 */
export function originKeyControl(env: Env, tenant: string, originKey: string, originParallelism: number): FlowKeyControl {
  const count = originKeyParts(originParallelism);
  const parts = Array.from({ length: count }, (_, part) => flowKeyOf(env, tenant, originKeyPart(originKey, part)));
  const all = async (each: (part: DurableObjectStub<FlowKey>, index: number) => Promise<FlowKeyView>) =>
    mergedView(await Promise.all(parts.map(each)));
  return {
    view: () => all((p) => p.view()),
    setPaused: (paused) => all((p) => p.setPaused(paused)),
    changeLimits: (change) =>
      all((p, part) =>
        p.changeLimits({
          ...change,
          ...(change.parallelism == null ? {} : { parallelism: originPartParallelism(change.parallelism, part, count) }),
        }),
      ),
  };
}

/**
 * The tenant and key of an object's name as flowKeyName spells it (a part of an origin key is its
 * origin key: core/origin-key.ts ORIGIN_KEY_PARTS); null without a name.
 */
function tenantAndKeyOf(name: string | undefined): { tenant: string; key: string } | null {
  const at = name?.lastIndexOf("\n") ?? -1;
  if (name === undefined || at < 0) return null;
  const key = name.slice(at + 1);
  return { tenant: name.slice(0, at), key: originKeyOfPart(key)?.originKey ?? key };
}

const FLOW_KEY_MIGRATIONS: ReadonlyArray<SqliteMigration> = [
  {
    id: 1,
    sql: `
      CREATE TABLE flow_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
      CREATE TABLE flow_permits (execution_id TEXT PRIMARY KEY, lapse_at INTEGER NOT NULL, hold_ms INTEGER NOT NULL) STRICT;
    `,
  },
];

const NO_LIMITS: FlowLimits = { rate: null, periodMs: 1_000, parallelism: null };

export class FlowKey extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly gate: FlowGate;
  private apiLimits: FlowLimits | null;
  private jobLimits: FlowLimits | null = null;
  /** whether permits are kept in storage (a job's own key) or in memory only (an origin's key) */
  private readonly durablePermits: boolean;
  /** the part of an origin key this is (null: a job's own key, or an unnamed object) */
  private readonly part: OriginPart | null;
  /** its flow_keys row is written (kept in flow_settings, so it is written once) */
  private registered: boolean;
  /** the flow_keys write in flight, if any (tests await it through runInDurableObject) */
  registering: Promise<void> | null = null;
  /** the target's slow-downs chained into one episode (core/alert.ts); stored only with a threshold */
  private readonly throttle: ThrottleAlert;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    applyMigrations(this.sql, FLOW_KEY_MIGRATIONS);
    const settings = new Map(
      this.sql
        .exec<{ name: string; value: string }>(`SELECT name, value FROM flow_settings`)
        .toArray()
        .map((r) => [r.name, JSON.parse(r.value) as unknown]),
    );
    this.apiLimits = (settings.get("limits") as FlowLimits | undefined) ?? null;
    this.registered = settings.get("registered") === true;
    const name = tenantAndKeyOf(ctx.id.name);
    const put = (setting: string, value: unknown) => this.put(setting, value);
    this.throttle = new ThrottleAlert(
      { env, storage: ctx.storage, name, put },
      (settings.get("throttleEpisode") as ThrottleEpisode | null | undefined) ?? null,
    );
    const part = originKeyOfPart(ctx.id.name?.slice(ctx.id.name.lastIndexOf("\n") + 1) ?? "");
    this.durablePermits = part === null;
    const now = Date.now();
    const maxWaitMs = configOf(env).FLOW_WAIT_MAX_MS;
    // a slow-down stored before the cap (or under a larger one) holds at most maxWaitMs from now
    const stored = (settings.get("throttledUntil") as number | null | undefined) ?? null;
    const throttledUntil = stored === null ? null : Math.min(stored, now + maxWaitMs);
    if (throttledUntil !== stored) this.put("throttledUntil", throttledUntil);
    this.gate = new FlowGate(this.apiLimits ?? NO_LIMITS, { maxWaitMs, paused: settings.get("paused") === true, throttledUntil });
    this.part =
      part && name
        ? new OriginPart(
            {
              gate: this.gate,
              keyObject: (key) => flowKeyOf(env, name.tenant, key),
              partCount: () => originKeyParts(configOf(env).ORIGIN_PARALLELISM),
              setApiLimits: (limits) => {
                this.apiLimits = limits;
                this.gate.limits = limits;
                this.put("limits", limits);
              },
              put,
            },
            part,
            settings.get("adopted") === true,
          )
        : null;
    this.dropLapsedPermits(now);
    // oldest lapse first: past the gate's bound it keeps the latest
    for (const p of this.sql.exec<{ execution_id: string; lapse_at: number; hold_ms: number }>(
      `SELECT * FROM flow_permits ORDER BY lapse_at`,
    )) {
      this.gate.restore(p.execution_id, p.lapse_at, p.hold_ms);
    }
  }

  /** Asks for permits; `limits` are the ones the asking executions' jobs carry. */
  async ask(limits: FlowLimits, asks: FlowAsk[]): Promise<FlowAnswer[]> {
    await this.part?.adoptUnsplit();
    this.register();
    this.jobLimits = limits;
    this.gate.limits = this.apiLimits ?? limits;
    const now = Date.now();
    if (this.durablePermits) this.dropLapsedPermits(now); // the gate drops its own lapsed permits
    const answers = this.gate.ask(asks, now);
    for (const a of answers) {
      const permit = a.granted ? this.gate.permitOf(a.executionId) : undefined;
      if (permit && this.durablePermits)
        this.sql.exec(`INSERT OR REPLACE INTO flow_permits VALUES (?, ?, ?)`, a.executionId, permit.lapseAt, permit.holdMs);
    }
    return answers;
  }

  /**
   * Deliveries that ended: their slots are free; a Retry-After slows the whole key. A part of an
   * origin key that a target's answer slows down when it was not slowed tells the other parts (once
   * an episode: they answer no more deliveries meanwhile).
   */
  async release(releases: FlowRelease[]): Promise<void> {
    const now = Date.now();
    const before = this.gate.throttledUntil;
    for (const r of releases) {
      // a permit that lapsed in memory still has its row: delete whatever is there
      if (this.durablePermits) this.sql.exec(`DELETE FROM flow_permits WHERE execution_id = ?`, r.executionId);
      this.gate.release(r.executionId, now, r.retryAfterMs);
    }
    if (this.gate.throttledUntil !== before) {
      this.put("throttledUntil", this.gate.throttledUntil);
      if (this.gate.throttledUntil !== null) {
        if (before === null || before <= now) await this.part?.slowOthers(this.gate.throttledUntil);
        await this.throttle.follow(this.gate.throttledUntil, now);
      }
    }
  }

  /** Another part of this origin key heard a target slow down until `until`: so does this part (its episode is that part's). */
  async slowDown(until: number): Promise<void> {
    const before = this.gate.throttledUntil;
    this.gate.throttleUntil(until, Date.now());
    if (this.gate.throttledUntil !== before) this.put("throttledUntil", this.gate.throttledUntil);
  }

  /** The moment a throttle episode passes its threshold (throttleCheckAt): reported if still throttled. */
  override async alarm(): Promise<void> {
    await this.throttle.check(Date.now());
  }

  async view(): Promise<FlowKeyView> {
    await this.part?.adoptUnsplit();
    return { ...this.gate.view(Date.now()), limitsFrom: this.apiLimits ? "api" : this.jobLimits ? "job" : null };
  }

  /** Pauses or resumes; a resume also ends a target's slow-down (who resumes wants deliveries now). */
  async setPaused(paused: boolean): Promise<FlowKeyView> {
    await this.part?.adoptUnsplit();
    this.register();
    this.gate.paused = paused;
    this.put("paused", paused);
    if (!paused) await this.endSlowDown();
    return this.view();
  }

  /**
   * Changes the given limits (null lifts one), merged here so two changes never overwrite each
   * other; they win over the jobs' until changed again. Ends a target's slow-down, as a resume does.
   */
  async changeLimits(change: Partial<FlowLimits>): Promise<FlowKeyView> {
    await this.part?.adoptUnsplit();
    this.register();
    const limits = { ...this.gate.limits, ...change };
    this.apiLimits = limits;
    this.gate.limits = limits;
    this.gate.dropSlots();
    this.put("limits", limits);
    await this.endSlowDown();
    return this.view();
  }

  /** Executions already told to wait for it keep their due time (at most FLOW_WAIT_MAX_MS away); new asks start at once. */
  private async endSlowDown(): Promise<void> {
    await this.throttle.end();
    if (this.gate.throttledUntil === null) return;
    this.gate.throttledUntil = null;
    this.put("throttledUntil", null);
  }

  /**
   * Lists the key in D1's flow_keys unless it is already. In the background: a slow or failing D1
   * never delays or fails the call; a failed write is tried again by a later call. An object
   * without a name (addressed by id, or a name over 1,024 bytes) is not listed.
   */
  private register(): void {
    if (this.registered || this.registering !== null) return;
    const name = tenantAndKeyOf(this.ctx.id.name);
    if (!name) return;
    // a key is listed in one shard (by its name's hash; the metrics read every shard's list)
    const shards = shardsOf(this.env);
    const shard = shards.all[bucketOf(flowKeyName(name.tenant, name.key), shards.count)]!;
    this.registering = registerFlowKey(shard.db, name.tenant, name.key, Date.now())
      .then(
        () => {
          this.registered = true;
          this.put("registered", true);
        },
        (error: unknown) => console.error(`listing flow key ${name.key} in D1 failed; its next call tries again`, error),
      )
      .finally(() => {
        this.registering = null;
      });
  }

  /** Permits whose consumer never released them: their slot came back when they lapsed. */
  private dropLapsedPermits(now: number): void {
    this.sql.exec(`DELETE FROM flow_permits WHERE lapse_at <= ?`, now);
  }

  private put(name: string, value: unknown): void {
    this.sql.exec(`INSERT OR REPLACE INTO flow_settings VALUES (?, ?)`, name, JSON.stringify(value));
  }
}
