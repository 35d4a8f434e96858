/**
 * Debounce keys (docs/debounce.md): the single writer of a tenant's debounce keys, each key's
 * open window (core/debounce.ts). A tenant's keys are spread over DEBOUNCE_SLOTS objects (use-cases/debounce.ts) by the
 * key's hash ("<tenant>\n<slot>", as IdempotencyKeys), so a key has one home whatever D1 shard its
 * jobs are in. Creates with one key run here one at a time, each to its end (its D1 write and its
 * bucket's copy, use-cases/debounce.ts), so a later accepted create's change always lands after an
 * earlier one's; creates with other keys do not wait for them.
 *
 * A create is decided at the object's clock when its turn comes, not at its request's stamp: with
 * many creates waiting on one key the last is decided seconds after it was sent, and its job may
 * have come due meanwhile (core/debounce.ts DUE_MARGIN_MS).
 *
 * Cost: one request per debounced create, 1 row written per debounced create (the key's window;
 * 2 for an idempotent replay that found no window to join: written, then put back), 1 row deleted
 * when the window has closed (an alarm sweeps closed windows once a day).
 */
import { DurableObject } from "cloudflare:workers";
import type { DebounceMode, DebounceWindow } from "../core/debounce";
import { applyMigrations, type SqliteMigration } from "../sqlite-migrations";
import { type DebounceAnswer, settleDebounced } from "../use-cases/debounce";
import type { PreparedJob } from "../use-cases/validation";

/** closed windows are swept this often */
const SWEEP_MS = 86_400_000;

const MIGRATIONS: ReadonlyArray<SqliteMigration> = [
  {
    id: 1,
    sql: `CREATE TABLE debounce_windows (
      key TEXT PRIMARY KEY,
      job_id TEXT NOT NULL,
      mode TEXT NOT NULL,
      first_at INTEGER NOT NULL,
      ends_at INTEGER NOT NULL,
      last_at INTEGER NOT NULL
    ) WITHOUT ROWID`,
  },
];

export class DebounceKeys extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** per key: the create running now, the next waits for it */
  private readonly running = new Map<string, Promise<unknown>>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    applyMigrations(this.sql, MIGRATIONS);
  }

  /** Runs a debounced create after the ones with its key before it; writes 1 row when the window opens or moves. */
  async submit(tenant: string, prepared: PreparedJob, now: number): Promise<DebounceAnswer> {
    const key = prepared.spec.debounce!.key;
    const before = this.running.get(key) ?? Promise.resolve();
    const run = before.then(() => this.settle(tenant, prepared, now));
    const done = run.catch(() => undefined);
    this.running.set(key, done);
    void done.then(() => {
      if (this.running.get(key) === done) this.running.delete(key);
    });
    return run;
  }

  private async settle(tenant: string, prepared: PreparedJob, requestNow: number): Promise<DebounceAnswer> {
    const key = prepared.spec.debounce!.key;
    const held = this.windowOf(key);
    // this object's clock now that the create's turn has come (its request's stamp is from before it
    // waited behind the key's earlier creates); the key's time never goes back
    const now = Math.max(Date.now(), requestNow, held?.lastAt ?? 0);
    // armed before any window is written, so a window written by a create cut short is swept too
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(now + SWEEP_MS);
    return settleDebounced(this.env, tenant, prepared, held, now, (window) => this.keep(key, window, now));
  }

  /** Writes a key's window (1 row), or removes it (null). */
  private keep(key: string, w: DebounceWindow | null, now: number): void {
    if (w === null) {
      this.sql.exec("DELETE FROM debounce_windows WHERE key = ?", key);
      return;
    }
    this.sql.exec(
      `INSERT INTO debounce_windows VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET
         job_id = excluded.job_id, mode = excluded.mode, first_at = excluded.first_at, ends_at = excluded.ends_at, last_at = excluded.last_at`,
      key,
      w.jobId,
      w.mode,
      w.firstAt,
      w.endsAt,
      now,
    );
  }

  private windowOf(key: string): (DebounceWindow & { lastAt: number }) | null {
    const row = this.sql
      .exec<{ job_id: string; mode: string; first_at: number; ends_at: number; last_at: number }>(
        "SELECT job_id, mode, first_at, ends_at, last_at FROM debounce_windows WHERE key = ?",
        key,
      )
      .toArray()[0];
    if (!row) return null;
    return { jobId: row.job_id, mode: row.mode as DebounceMode, firstAt: row.first_at, endsAt: row.ends_at, lastAt: row.last_at };
  }

  /** Deletes closed windows; armed again while windows remain. */
  override async alarm(): Promise<void> {
    const now = Date.now();
    this.sql.exec("DELETE FROM debounce_windows WHERE ends_at <= ?", now);
    if (this.sql.exec("SELECT 1 FROM debounce_windows LIMIT 1").toArray().length > 0) await this.ctx.storage.setAlarm(now + SWEEP_MS);
  }
}
