/**
 * One flow-control key of one tenant (issue 13): the single owner of its limits, so they hold
 * across every consumer invocation and bucket. The consumer asks it before a delivery and tells
 * it when the delivery ended; the API reads it, pauses, resumes and changes its limits.
 *
 * Kept durably (SQLite): the limits set through the API, the pause, a target's slow-down, and
 * the permits in flight (a restart must not forget a slot that a delivery still holds: two rows
 * written per flow-controlled delivery, an insert and a delete). Kept in memory only: the start
 * times of the current rate window and the waiters' order (after a restart the window starts
 * empty: at most one period may then start up to twice the rate).
 */
import { DurableObject } from "cloudflare:workers";
import { type FlowAnswer, type FlowAsk, FlowGate, type FlowLimits, type FlowView } from "../core/flow";
import { applyMigrations, type SqliteMigration } from "../sqlite-migrations";

export interface FlowKeyView extends FlowView {
  /** "api": set with PATCH and kept until changed; "job": as the latest job asking carries them */
  limitsFrom: "api" | "job" | null;
}

export interface FlowRelease {
  executionId: string;
  /** a 429/503 Retry-After from the target: the whole key waits this long */
  retryAfterMs?: number;
}

/** The object of a tenant's key: one per tenant and key name. */
export function flowKeyOf(env: Env, tenant: string, key: string): DurableObjectStub<FlowKey> {
  return env.FLOW_KEY.getByName(`${tenant}\n${key}`);
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
    this.gate = new FlowGate(
      this.apiLimits ?? NO_LIMITS,
      settings.get("paused") === true,
      (settings.get("throttledUntil") as number | undefined) ?? null,
    );
    this.dropLapsedPermits(Date.now());
    for (const p of this.sql.exec<{ execution_id: string; lapse_at: number; hold_ms: number }>(`SELECT * FROM flow_permits`)) {
      this.gate.restore(p.execution_id, p.lapse_at, p.hold_ms);
    }
  }

  /** Asks for permits; `limits` are the ones the asking executions' jobs carry. */
  async ask(limits: FlowLimits, asks: FlowAsk[]): Promise<FlowAnswer[]> {
    this.jobLimits = limits;
    this.gate.limits = this.apiLimits ?? limits;
    const now = Date.now();
    this.dropLapsedPermits(now);
    const answers = this.gate.ask(asks, now);
    for (const a of answers) {
      const permit = a.granted ? this.gate.permitOf(a.executionId) : undefined;
      if (permit) this.sql.exec(`INSERT OR REPLACE INTO flow_permits VALUES (?, ?, ?)`, a.executionId, permit.lapseAt, permit.holdMs);
    }
    return answers;
  }

  /** Deliveries that ended: their slots are free; a Retry-After slows the whole key. */
  async release(releases: FlowRelease[]): Promise<void> {
    const now = Date.now();
    const before = this.gate.throttledUntil;
    for (const r of releases) {
      // a permit that lapsed in memory still has its row: delete whatever is there
      this.sql.exec(`DELETE FROM flow_permits WHERE execution_id = ?`, r.executionId);
      this.gate.release(r.executionId, now, r.retryAfterMs);
    }
    if (this.gate.throttledUntil !== before) this.put("throttledUntil", this.gate.throttledUntil);
  }

  async view(): Promise<FlowKeyView> {
    return { ...this.gate.view(Date.now()), limitsFrom: this.apiLimits ? "api" : this.jobLimits ? "job" : null };
  }

  async setPaused(paused: boolean): Promise<FlowKeyView> {
    this.gate.paused = paused;
    this.put("paused", paused);
    return this.view();
  }

  /** Changes the given limits (null lifts one), merged here so two changes never overwrite each other; they win over the jobs' until changed again. */
  async changeLimits(change: Partial<FlowLimits>): Promise<FlowKeyView> {
    const limits = { ...this.gate.limits, ...change };
    this.apiLimits = limits;
    this.gate.limits = limits;
    this.put("limits", limits);
    return this.view();
  }

  /** Permits whose consumer never released them: their slot came back when they lapsed. */
  private dropLapsedPermits(now: number): void {
    this.sql.exec(`DELETE FROM flow_permits WHERE lapse_at <= ?`, now);
  }

  private put(name: string, value: unknown): void {
    this.sql.exec(`INSERT OR REPLACE INTO flow_settings VALUES (?, ?)`, name, JSON.stringify(value));
  }
}
