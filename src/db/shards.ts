/**
 * The system of record is S D1 databases (DESIGN.md "Scale and shape", revision 3): the bindings
 * DB (shard 0), DB_1, DB_2, ... DB_<S-1>, each with the same migrations. A job lives in one shard
 * for its whole life and its id names it (core/id.ts shardOfId), so a request finds the shard from
 * a job's or an execution's id alone, with no lookup. New jobs spread evenly over the shards
 * configured now (pick); adding a binding moves nothing and strands nothing. Lowering the count
 * would strand the jobs of the shards removed, so it is refused (checkShardCount).
 *
 * Readers that span jobs (lists, the DLQ, bulk actions, the sync pass, metrics) ask every shard
 * and merge; a shard that fails makes such a reader fail with ShardUnavailable naming it (an API
 * list answers 503), while everything that touches only other shards goes on.
 */
import { MAX_SHARDS, shardOfId } from "../core/id";
import { type Db, dbOf } from "./kit";
import { highestBucket, mostShards, recordShardCount, sizeOf } from "./shard-meta";

export interface Shard {
  index: number;
  /** its binding's name: DB for shard 0, DB_<index> after it */
  binding: string;
  db: Db;
}

/**
 * A shard that did not answer, or one an id names that this deployment does not have. Its message
 * is what a caller is answered (a 503), so it names the shard and nothing of the failure: D1's
 * error text carries the statement's SQL and may carry its parameters (job ids, keys, payloads of
 * a tenant). The failure itself is its `cause`, for the logs (describeFailure).
 */
export class ShardUnavailable extends Error {
  constructor(
    readonly shard: number,
    readonly binding: string,
    readonly reason: "failed" | "missing",
    cause?: unknown,
  ) {
    super(
      reason === "missing"
        ? `D1 shard ${shard} (binding ${binding}) is not bound to this deployment`
        : `D1 shard ${shard} (binding ${binding}) did not answer`,
      cause === undefined ? undefined : { cause },
    );
  }
}

/** An error and the chain of its causes, for a log line (never for an answer: a D1 cause holds SQL). */
export function describeFailure(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 5; depth++) {
    parts.push(e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join("\ncaused by: ");
}

/**
 * New jobs have no shard with room: every shard is above SHARD_MAX_BYTES with live jobs (or D1
 * refused a write as full). The API answers 507 naming them; nothing already accepted is touched.
 */
export class ShardsFull extends Error {
  constructor(
    readonly full: readonly { index: number; bytes: number | null }[],
    readonly count: number,
    readonly maxBytes: number,
  ) {
    const gb = (bytes: number) => `${(bytes / 1e9).toFixed(2)} GB`;
    const which = full.map(
      (s) => `${s.index} (${shardBinding(s.index)}${s.bytes === null ? ", refused a write as full" : `, ${gb(s.bytes)}`})`,
    );
    super(
      `no D1 shard has room for new jobs: ${full.length === 1 ? "shard" : "shards"} ${which.join(", ")} ${full.length === 1 ? "is" : "are"} above SHARD_MAX_BYTES (${gb(maxBytes)}): live jobs, or history the purge could not remove yet (see archive_write_failures_total); this request stored no job without an idempotency key, and every job already accepted runs as before. Add a shard (bind ${shardBinding(count)}: docs/deploying.md "Shards"), or let live jobs finish`,
    );
  }
}

/** Whether a D1 error says the database is full (D1's 10 GB, SQLite's SQLITE_FULL). */
export function isFullError(error: unknown): boolean {
  const text = error instanceof Error ? `${error.message} ${error.cause instanceof Error ? error.cause.message : ""}` : String(error);
  return /SQLITE_FULL|database or disk is full|exceeded maximum (db|database) size/i.test(text);
}

/** The binding name of a shard. */
export function shardBinding(index: number): string {
  return index === 0 ? "DB" : `DB_${index}`;
}

export class Shards {
  /** where the next pick starts: spreads consecutive requests (and the items of one) over every shard */
  private next: number;
  /** each shard's size as this isolate last saw it (meta.size_after of a write or a look), and when */
  private readonly sizes = new Map<number, { bytes: number | null; at: number }>();

  constructor(readonly all: readonly Shard[]) {
    this.next = Math.floor(Math.random() * all.length);
  }

  get count(): number {
    return this.all.length;
  }

  /** The shard of a job or execution id; ShardUnavailable ("missing") when the id names one not bound. */
  of(id: string): Shard {
    const index = shardOfId(id) ?? 0;
    const shard = this.all[index];
    if (!shard) throw new ShardUnavailable(index, shardBinding(index), "missing");
    return shard;
  }

  /** Shards for `n` new jobs, evenly: in turn from where the last pick stopped. */
  pick(n: number): number[] {
    const picked = Array.from({ length: n }, (_, i) => (this.next + i) % this.all.length);
    this.next = (this.next + n) % this.all.length;
    return picked;
  }

  /**
   * A shard for a request's new jobs: in turn, skipping one last seen above `maxBytes`
   * (SHARD_MAX_BYTES). A shard's size is looked at (one statement that reads no row) the first time
   * an isolate picks it, and again once SHARD_CHECK_MS has passed while it is full (live jobs finish
   * and their history leaves); every write's meta.size_after keeps it current between. ShardsFull
   * when every shard is full. A shard that does not answer is tried (its failure is a 503 naming it).
   */
  async pickWithRoom(maxBytes: number, now = Date.now()): Promise<number> {
    // the start is taken once: concurrent requests move `next` while this one waits on a look
    const [start] = this.pick(1);
    for (let tried = 0; tried < this.count; tried++) {
      const index = (start! + tried) % this.count;
      if (await this.hasRoom(index, maxBytes, now)) return index;
    }
    const full = this.all.map((s) => ({ index: s.index, bytes: this.sizes.get(s.index)?.bytes ?? null }));
    throw new ShardsFull(full, this.count, maxBytes);
  }

  /** Records a shard's size from a D1 result's meta.size_after; `null`: D1 refused a write as full. */
  noteSize(index: number, bytes: number | null | undefined, now = Date.now()): void {
    if (bytes !== undefined) this.sizes.set(index, { bytes, at: now });
  }

  private async hasRoom(index: number, maxBytes: number, now: number): Promise<boolean> {
    const seen = this.sizes.get(index);
    if (seen && seen.bytes !== null && seen.bytes <= maxBytes) return true;
    if (seen && now - seen.at < SHARD_CHECK_MS) return false;
    // not seen yet, or seen full a while ago: look (a shard that does not answer is tried)
    const bytes = await sizeOf(this.all[index]!.db).catch(() => undefined);
    if (bytes === undefined || bytes === null) return true;
    this.noteSize(index, bytes, now);
    return bytes <= maxBytes;
  }

  /** Runs `read` on every shard at once; the first that fails fails the whole with ShardUnavailable naming it. */
  async everyShard<T>(read: (shard: Shard) => Promise<T>): Promise<T[]> {
    return Promise.all(this.all.map((shard) => this.on(shard, () => read(shard))));
  }

  /** Runs `work` on one shard; a failure becomes ShardUnavailable naming it. */
  async on<T>(shard: Shard, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ShardUnavailable || error instanceof ShardsFull) throw error;
      throw new ShardUnavailable(shard.index, shard.binding, "failed", error);
    }
  }

  /** Items grouped by the shard their id names (`idOf`), in shard order. */
  groupByShard<T>(items: readonly T[], idOf: (item: T) => string): [Shard, T[]][] {
    const groups = new Map<number, T[]>();
    for (const item of items) {
      const shard = this.of(idOf(item)).index;
      const group = groups.get(shard);
      if (group) group.push(item);
      else groups.set(shard, [item]);
    }
    return [...groups].sort(([a], [b]) => a - b).map(([index, group]) => [this.all[index]!, group]);
  }
}

/** Fewer shards are bound than the deployment has had: the jobs of the ones removed would be stranded. */
export class ShardsLowered extends Error {
  constructor(
    readonly bound: number,
    readonly most: number,
  ) {
    super(
      `${bound} D1 shard(s) are bound but this deployment has had ${most}: bind ${Array.from({ length: most - bound }, (_, i) => shardBinding(bound + i)).join(", ")} again (shards can be added, never removed)`,
    );
  }
}

/** how long an isolate trusts its last look at the recorded count (a newer deployment may raise it) */
export const SHARD_CHECK_MS = 60_000;
/** each configuration's last look: when, and whether it found fewer shards bound than recorded */
const checked = new WeakMap<Shards, { at: number; lowered: ShardsLowered | null }>();

/**
 * Refuses fewer shards than the deployment has had (ShardsLowered), and records a higher count.
 * Once a minute per isolate and configuration (1 row read): an isolate of an older version, still
 * serving while a deployment that added a shard rolls out, refuses within SHARD_CHECK_MS instead
 * of listing without the new shard. When shard 0 cannot be asked, the request goes on (what needs
 * only other shards must not stop with it) and the next one asks again. Only the answer is shared
 * between requests, never the pending query: a request awaiting another's I/O hangs when that
 * request is canceled mid-query (the platform never settles it), so requests that arrive before the
 * first answer each ask.
 */
export async function checkShardCount(shards: Shards, now = Date.now()): Promise<void> {
  const last = checked.get(shards);
  if (last && now - last.at < SHARD_CHECK_MS) {
    if (last.lowered) throw last.lowered;
    return;
  }
  let most: number;
  try {
    most = await recordShardCount(shards.all[0]!.db, shards.count);
  } catch (error) {
    console.error("checking the shard count on D1 shard 0 failed; asked again on the next request", error);
    return;
  }
  const lowered = most > shards.count ? new ShardsLowered(shards.count, most) : null;
  checked.set(shards, { at: now, lowered });
  if (lowered) throw lowered;
}

/**
 * The shard an id names, or null when it names one this deployment has never had (no such job).
 * One it has had but does not bind (removed, or added by a newer version still rolling out) is
 * ShardUnavailable: its jobs exist, and a 404 would tell the caller they do not.
 */
export async function shardOfOrNull(shards: Shards, id: string): Promise<Shard | null> {
  try {
    return shards.of(id);
  } catch (error) {
    if (!(error instanceof ShardUnavailable) || error.reason !== "missing") throw error;
    const shard0 = shards.all[0]!;
    if (error.shard < (await shards.on(shard0, () => mostShards(shard0.db)))) throw error;
    return null;
  }
}

const cache = new WeakMap<object, Shards>();

/** The shards bound in `env`: DB, then DB_1, DB_2, ... up to the first missing one. */
export function shardsOf(env: Env): Shards {
  const cached = cache.get(env);
  if (cached) return cached;
  const all: Shard[] = [];
  const bound = env as unknown as Record<string, D1Database | undefined>;
  for (let index = 0; index < MAX_SHARDS; index++) {
    const d1 = bound[shardBinding(index)];
    if (!d1) break;
    all.push({ index, binding: shardBinding(index), db: dbOf(d1) });
  }
  if (all.length === 0) throw new Error("no D1 binding DB: the system of record is missing");
  const shards = new Shards(all);
  cache.set(env, shards);
  return shards;
}

/** The highest bucket any job of any shard names (-1 with none): buckets a lowered BUCKETS must still serve. */
export async function highestBucketOfAll(env: Env): Promise<number> {
  return Math.max(-1, ...(await shardsOf(env).everyShard((shard) => highestBucket(shard.db))));
}
