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
 * ORIGIN_KEY_PARTS objects (core/flow.ts), each its share: one object at 10,000 deliveries/s would
 * pass the soft limit of requests per object; they are listed and alert under the origin key's name.
 *
 * Durable Objects cannot be listed, so the first call that gives the key state (ask, pause,
 * resume, a limits change; never a read) lists it in D1's flow_keys for the metrics, once.
 *
 * Throttle alerts (docs/alerts.md): the key follows its throttle episode (its target's slow-downs
 * chained, core/alert.ts). When one begins it asks its tenant's Alerts object once for the
 * threshold (throttledForMs); with one, the episode is stored and the key's alarm is set for the
 * moment it passes it, and an episode still throttled then is reported to the Alerts object, once.
 * Nothing of it runs on an ask; a tenant without a threshold stores nothing for it.
 */
import { DurableObject } from "cloudflare:workers";
import { alertsOf } from "../alerts/alerts";
import { configOf } from "../config";
import { type ThrottleEpisode, throttleAlertDue, throttleCheckAt, throttleEpisodeAfter } from "../core/alert";
import { bucketOf } from "../core/bucketing";
import type { FlowAnswer, FlowAsk, FlowLimits, FlowView } from "../core/flow";
import { FlowGate } from "../core/flow-gate";
import { originKeyOfPart, originKeyPart, originKeyParts, originPartParallelism } from "../core/origin-key";
import { registerFlowKey } from "../db/queries";
import { shardsOf } from "../db/shards";
import { objectOf } from "../placement";
import { applyMigrations, type SqliteMigration } from "../sqlite-migrations";

export interface FlowKeyView extends FlowView {
  /** "api": set with PATCH and kept until changed; "job": as the latest job asking carries them */
  limitsFrom: "api" | "job" | null;
}

export interface FlowRelease {
  executionId: string;
  /** a 429/503 Retry-After from the target: the whole key waits this long, at most FLOW_WAIT_MAX_MS */
  retryAfterMs?: number;
}

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

/** An origin key's parts' views as one: counts and parallelism added up, paused while any part is, the latest slow-down. */
function mergedView(views: FlowKeyView[]): FlowKeyView {
  const first = views[0]!;
  const sum = (of: (v: FlowKeyView) => number) => views.reduce((n, v) => n + of(v), 0);
  const until = views.map((v) => v.throttledUntil).filter((t): t is number => t !== null);
  return {
    limits: { ...first.limits, parallelism: first.limits.parallelism === null ? null : sum((v) => v.limits.parallelism ?? 0) },
    limitsFrom: views.some((v) => v.limitsFrom === "api") ? "api" : first.limitsFrom,
    paused: views.some((v) => v.paused),
    throttledUntil: until.length === 0 ? null : Math.max(...until),
    inFlight: sum((v) => v.inFlight),
    waiting: sum((v) => v.waiting),
    currentRate: sum((v) => v.currentRate),
    grantedTotal: sum((v) => v.grantedTotal),
    throttledTotal: sum((v) => v.throttledTotal),
  };
}

/**
 * The tenant and key of an object's name as flowKeyName spells it (a part of an origin key is its
 * origin key: core/flow.ts ORIGIN_KEY_PARTS); null without a name.
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
  /** which part of an origin key this is (null: a job's own key) */
  private readonly part: { originKey: string; part: number } | null;
  /** its flow_keys row is written (kept in flow_settings, so it is written once) */
  private registered: boolean;
  /** the flow_keys write in flight, if any (tests await it through runInDurableObject) */
  registering: Promise<void> | null = null;
  /** the target's slow-downs chained into one episode (core/alert.ts); stored only with a threshold */
  private episode: ThrottleEpisode | null;
  /** an origin key's part: whether it took over what the origin's one object held before parts (adoptUnsplit) */
  private adopted: boolean;

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
    this.episode = (settings.get("throttleEpisode") as ThrottleEpisode | null | undefined) ?? null;
    this.adopted = settings.get("adopted") === true;
    this.part = originKeyOfPart(ctx.id.name?.slice(ctx.id.name.lastIndexOf("\n") + 1) ?? "");
    this.durablePermits = this.part === null;
    const now = Date.now();
    const maxWaitMs = configOf(env).FLOW_WAIT_MAX_MS;
    // a slow-down stored before the cap (or under a larger one) holds at most maxWaitMs from now
    const stored = (settings.get("throttledUntil") as number | null | undefined) ?? null;
    const throttledUntil = stored === null ? null : Math.min(stored, now + maxWaitMs);
    if (throttledUntil !== stored) this.put("throttledUntil", throttledUntil);
    this.gate = new FlowGate(this.apiLimits ?? NO_LIMITS, { maxWaitMs, paused: settings.get("paused") === true, throttledUntil });
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
    await this.adoptUnsplit();
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
        if (before === null || before <= now) await this.slowOtherParts(this.gate.throttledUntil);
        await this.followThrottle(this.gate.throttledUntil, now);
      }
    }
  }

  /** Another part of this origin key heard a target slow down until `until`: so does this part (its episode is that part's). */
  async slowDown(until: number): Promise<void> {
    const before = this.gate.throttledUntil;
    this.gate.throttleUntil(until, Date.now());
    if (this.gate.throttledUntil !== before) this.put("throttledUntil", this.gate.throttledUntil);
  }

  private async slowOtherParts(until: number): Promise<void> {
    const name = tenantAndKeyOf(this.ctx.id.name);
    if (!this.part || !name) return;
    const parts = originKeyParts(configOf(this.env).ORIGIN_PARALLELISM);
    await Promise.all(
      Array.from({ length: parts }, (_, part) =>
        part === this.part!.part
          ? undefined
          : flowKeyOf(this.env, name.tenant, originKeyPart(this.part!.originKey, part))
              .slowDown(until)
              .catch((error: unknown) => console.error(`slowing part ${part} of ${this.part!.originKey} down failed`, error)),
      ),
    );
  }

  /** The moment a throttle episode passes its threshold (throttleCheckAt): reported if still throttled. */
  override async alarm(): Promise<void> {
    await this.checkThrottle(Date.now());
  }

  async view(): Promise<FlowKeyView> {
    await this.adoptUnsplit();
    return { ...this.gate.view(Date.now()), limitsFrom: this.apiLimits ? "api" : this.jobLimits ? "job" : null };
  }

  /** Pauses or resumes; a resume also ends a target's slow-down (who resumes wants deliveries now). */
  async setPaused(paused: boolean): Promise<FlowKeyView> {
    await this.adoptUnsplit();
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
    await this.adoptUnsplit();
    this.register();
    const limits = { ...this.gate.limits, ...change };
    this.apiLimits = limits;
    this.gate.limits = limits;
    this.gate.dropSlots();
    this.put("limits", limits);
    await this.endSlowDown();
    return this.view();
  }

  /**
   * A part of an origin key, the first time it is called, takes over what the origin's one object
   * held before keys had parts (a release before ORIGIN_KEY_PARTS): a pause, limits set with PATCH
   * (its share of the parallelism), a slow-down. Once per part (one request); an object that does
   * not answer is asked again on the next call.
   */
  private async adoptUnsplit(): Promise<void> {
    if (this.adopted) return;
    const name = tenantAndKeyOf(this.ctx.id.name);
    if (this.durablePermits || !name) {
      this.adopted = true;
      return;
    }
    const before = await flowKeyOf(this.env, name.tenant, name.key)
      .view()
      .catch((error: unknown) => {
        console.error(`reading origin key ${name.key} as it was before its parts failed; asked again on the next call`, error);
        return null;
      });
    if (before === null || this.adopted) return;
    if (before.paused) {
      this.gate.paused = true;
      this.put("paused", true);
    }
    if (before.limitsFrom === "api" && this.part) {
      const { parallelism } = before.limits;
      const parts = originKeyParts(configOf(this.env).ORIGIN_PARALLELISM);
      this.apiLimits = {
        ...before.limits,
        parallelism: parallelism === null ? null : originPartParallelism(parallelism, this.part.part, parts),
      };
      this.gate.limits = this.apiLimits;
      this.put("limits", this.apiLimits);
    }
    if (before.throttledUntil !== null && before.throttledUntil > Date.now()) {
      this.gate.throttledUntil = before.throttledUntil;
      this.put("throttledUntil", before.throttledUntil);
    }
    this.adopted = true;
    this.put("adopted", true);
  }

  /** Executions already told to wait for it keep their due time (at most FLOW_WAIT_MAX_MS away); new asks start at once. */
  private async endSlowDown(): Promise<void> {
    if (this.episode?.thresholdMs != null) {
      // ended by hand: the episode is over, and its alarm with it
      this.put("throttleEpisode", null);
      await this.ctx.storage.deleteAlarm();
    }
    this.episode = null;
    if (this.gate.throttledUntil === null) return;
    this.gate.throttledUntil = null;
    this.put("throttledUntil", null);
  }

  /**
   * The key's slow-down was set or extended to `until`: the episode goes on or a new one begins.
   * A new one asks the tenant's Alerts object for the threshold (one request per episode, on a
   * release: never on an ask).
   */
  private async followThrottle(until: number, now: number): Promise<void> {
    const { episode, began } = throttleEpisodeAfter(this.episode, until, now);
    this.episode = episode;
    if (began) {
      const name = tenantAndKeyOf(this.ctx.id.name);
      if (!name) return;
      const target = await alertsOf(this.env, name.tenant)
        .target()
        .catch((error: unknown) => {
          console.error(`reading the alert threshold of ${name.tenant} failed; this episode is not reported`, error);
          return null;
        });
      // a release while it asked may have extended it (a copy): set it on whatever is current
      if (this.episode?.since !== episode.since) return;
      this.episode = { ...this.episode, thresholdMs: target?.throttledForMs ?? null };
    }
    await this.checkThrottle(now);
  }

  /** Reports the episode if it passed its threshold (once), else sets the alarm for when it may. */
  private async checkThrottle(now: number): Promise<void> {
    const episode = this.episode;
    const name = tenantAndKeyOf(this.ctx.id.name);
    if (episode === null || episode.thresholdMs === null || !name) return;
    if (throttleAlertDue(episode, now)) {
      const reported = await alertsOf(this.env, name.tenant)
        .recordThrottle({ key: name.key, since: episode.since, throttledUntil: episode.until, thresholdMs: episode.thresholdMs })
        .then(
          () => true,
          (error: unknown) => {
            console.error(`reporting the throttled key ${name.key} failed; its next slow-down tries again`, error);
            return false;
          },
        );
      if (reported && this.episode?.since === episode.since) this.episode = { ...this.episode, reported: true };
    }
    this.put("throttleEpisode", this.episode);
    const at = throttleCheckAt(this.episode);
    if (at !== null && (await this.ctx.storage.getAlarm()) !== at) await this.ctx.storage.setAlarm(at);
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
