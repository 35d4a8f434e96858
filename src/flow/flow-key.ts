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

export interface FlowKeyView extends FlowView {
  /** "api": set with PATCH and kept until changed; "job": as the latest job asking carries them */
  limitsFrom: "api" | "job" | null;
}

export interface FlowRelease {
  executionId: string;
  /** a 429/503 Retry-After from the target: the whole key waits this long */
  retryAfterMs?: number;
}

const NO_LIMITS: FlowLimits = { rate: null, periodMs: 1_000, parallelism: null };

export class FlowKey extends DurableObject<Env> {
  private readonly gate: FlowGate;
  private apiLimits: FlowLimits | null;
  private jobLimits: FlowLimits | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS flow_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT`);
    sql.exec(
      `CREATE TABLE IF NOT EXISTS flow_permits (execution_id TEXT PRIMARY KEY, lapse_at INTEGER NOT NULL, hold_ms INTEGER NOT NULL) STRICT`,
    );
    const settings = new Map(
      sql
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
    for (const p of sql.exec<{ execution_id: string; lapse_at: number; hold_ms: number }>(`SELECT * FROM flow_permits`)) {
      this.gate.restore(p.execution_id, p.lapse_at, p.hold_ms);
    }
  }

  /** Asks for permits; `limits` are the ones the asking executions' jobs carry. */
  async ask(limits: FlowLimits, asks: FlowAsk[]): Promise<FlowAnswer[]> {
    this.jobLimits = limits;
    this.gate.limits = this.apiLimits ?? limits;
    const now = Date.now();
    const answers = this.gate.ask(asks, now);
    const sql = this.ctx.storage.sql;
    for (const a of answers) {
      if (!a.granted) continue;
      const lapseAt = this.gate.inFlight.get(a.executionId)!;
      const hold = asks.find((x) => x.executionId === a.executionId)!.holdMs;
      sql.exec(`INSERT OR REPLACE INTO flow_permits VALUES (?, ?, ?)`, a.executionId, lapseAt, hold);
    }
    return answers;
  }

  /** Deliveries that ended: their slots are free; a Retry-After slows the whole key. */
  async release(releases: FlowRelease[]): Promise<void> {
    const now = Date.now();
    const before = this.gate.throttledUntil;
    const sql = this.ctx.storage.sql;
    for (const r of releases) {
      if (this.gate.inFlight.has(r.executionId)) sql.exec(`DELETE FROM flow_permits WHERE execution_id = ?`, r.executionId);
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

  /** Limits set through the API win over the jobs' until changed again; null gives the key back to its jobs. */
  async setLimits(limits: FlowLimits | null): Promise<FlowKeyView> {
    this.apiLimits = limits;
    if (limits) this.put("limits", limits);
    else this.ctx.storage.sql.exec(`DELETE FROM flow_settings WHERE name = 'limits'`);
    this.gate.limits = limits ?? this.jobLimits ?? NO_LIMITS;
    return this.view();
  }

  private put(name: string, value: unknown): void {
    this.ctx.storage.sql.exec(`INSERT OR REPLACE INTO flow_settings VALUES (?, ?)`, name, JSON.stringify(value));
  }
}
