/**
 * Idempotency keys (invariant 8) across D1 shards: a key must name one job per tenant within the
 * dedupe window whichever shard the job went to, also while the number of shards changes. So a
 * key's home is not a shard but one of KEY_SLOTS objects of its tenant, chosen by the key's hash
 * (a number that never changes): "<tenant>\n<slot>". The object is the single writer of its keys.
 *
 * A create with a key claims it here first, naming the job id it is about to insert; the first
 * claim within the window wins and every later one is told the winner (its job id and request
 * hash). The job row is inserted after the claim: if that insert fails, a retry of the same
 * request gets the same winner, finds no job under its id, and inserts the job under that id
 * (use-cases/create.ts): the key never names two jobs, and an accepted request is never lost. A job the
 * purge of finished history took within the window (the watermark's purge takes history minutes
 * old) is never inserted again: a key claimed before the shard's purge mark (db/purge-mark.ts
 * purgeMark) is answered from the archive or refused (409 idempotency_job_purged).
 *
 * Cost: one request per slot a create touches, 1 row written per new key (WITHOUT ROWID, no
 * index), 1 row deleted when it expires (an alarm sweeps expired keys once a day).
 */
import { DurableObject } from "cloudflare:workers";
import { configOf } from "../config";
import { applyMigrations, type SqliteMigration } from "../sqlite-migrations";
import type { KeyClaim, KeyOwner } from "./key-claims";

/** expired keys are swept this often */
const SWEEP_MS = 86_400_000;

const MIGRATIONS: ReadonlyArray<SqliteMigration> = [
  {
    id: 1,
    sql: `CREATE TABLE idempotency_keys (
      key TEXT PRIMARY KEY,
      job_id TEXT NOT NULL,
      request_hash TEXT NOT NULL,
      created_at INTEGER NOT NULL
    ) WITHOUT ROWID`,
  },
];

export class IdempotencyKeys extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    applyMigrations(this.sql, MIGRATIONS);
  }

  /**
   * Each key's owner after this call: a key claimed within the window keeps its job; a new or
   * expired one is now this claim's. Writes 1 row per key it gives away.
   */
  async claim(claims: KeyClaim[], now: number): Promise<KeyOwner[]> {
    const windowMs = configOf(this.env).IDEMPOTENCY_WINDOW_MS;
    const owners = claims.map((c): KeyOwner => {
      const held = this.sql
        .exec<{ job_id: string; request_hash: string; created_at: number }>(
          "SELECT job_id, request_hash, created_at FROM idempotency_keys WHERE key = ?",
          c.key,
        )
        .toArray()[0];
      if (held && held.created_at > now - windowMs)
        return { key: c.key, jobId: held.job_id, requestHash: held.request_hash, claimedAt: held.created_at };
      this.sql.exec("INSERT OR REPLACE INTO idempotency_keys VALUES (?, ?, ?, ?)", c.key, c.jobId, c.requestHash, now);
      return { key: c.key, jobId: c.jobId, requestHash: c.requestHash, claimedAt: now };
    });
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(now + SWEEP_MS);
    return owners;
  }

  /**
   * Gives up keys this request claimed for a job it could not store (its shard refused the write as
   * full): only a key still naming that job. A retry then claims it afresh, for a shard with room.
   */
  async release(keys: { key: string; jobId: string }[]): Promise<void> {
    for (const k of keys) this.sql.exec("DELETE FROM idempotency_keys WHERE key = ? AND job_id = ?", k.key, k.jobId);
  }

  /** Deletes the keys older than the window; armed again while keys remain. */
  override async alarm(): Promise<void> {
    const now = Date.now();
    this.sql.exec("DELETE FROM idempotency_keys WHERE created_at <= ?", now - configOf(this.env).IDEMPOTENCY_WINDOW_MS);
    if (this.sql.exec("SELECT 1 FROM idempotency_keys LIMIT 1").toArray().length > 0) await this.ctx.storage.setAlarm(now + SWEEP_MS);
  }
}
