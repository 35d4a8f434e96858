/** Type-prefixed, time-sortable ids (job_..., exe_..., act_...): 10 chars of time, 16 of randomness. */
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

/** A job, an execution, a bulk action. */
export type IdKind = "job" | "exe" | "act";

/**
 * An id of `kind` as a regular expression's source (no anchors): its prefix and 26 digits. The one
 * place the shape is spelled; every check of an id, and of a token holding one, builds on it.
 */
export function idPattern(kind: IdKind): string {
  return `${kind}_[0-9a-z]{26}`;
}

const ID_SHAPES = { job: anchored("job"), exe: anchored("exe"), act: anchored("act") };

function anchored(kind: IdKind): RegExp {
  return new RegExp(`^${idPattern(kind)}$`);
}

/** An id of `kind` in its whole shape (anchored); the regular expression itself for a schema. */
export function idShape(kind: IdKind): RegExp {
  return ID_SHAPES[kind];
}

/** Whether `text` has the shape of an id of `kind`. */
export function isId(kind: IdKind, text: string): boolean {
  return ID_SHAPES[kind].test(text);
}

export function newId(prefix: IdKind, now: number, random: Uint8Array): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  let rand = "";
  for (let i = 0; i < 16; i++) rand += ALPHABET[(random[i] ?? 0) % 32];
  return `${prefix}_${time}${rand}`;
}

/**
 * The system of record is S D1 databases (shards, db/shards.ts), and a job lives in one for its
 * whole life. Its id says which, so any request finds the shard from the id alone (and from any of
 * its executions' ids, which end with the job's random part): that part starts with SHARD_MARK, a
 * letter the alphabet never writes, then the shard in two digits, then 13 random ones (65 bits).
 * An id without the mark (made before shards existed) is shard 0's.
 */
export const SHARD_MARK = "u";
/** shards an id can name: two digits of the alphabet */
export const MAX_SHARDS = 32 * 32;

/** A new job id in `shard`: its time, SHARD_MARK, the shard, and 13 random digits from `random`. */
export function newJobId(now: number, random: Uint8Array, shard: number): string {
  if (!Number.isInteger(shard) || shard < 0 || shard >= MAX_SHARDS) throw new RangeError(`shard ${shard} is not 0..${MAX_SHARDS - 1}`);
  const id = newId("job", now, random);
  return `${id.slice(0, 14)}${SHARD_MARK}${ALPHABET[shard >> 5]}${ALPHABET[shard % 32]}${id.slice(14, 27)}`;
}

/** The shard of a job or execution id (its last 16 digits): the marked one, else 0; null when the mark is followed by no shard. */
export function shardOfId(id: string): number | null {
  const random = id.slice(-16);
  if (random[0] !== SHARD_MARK) return 0;
  const high = ALPHABET.indexOf(random[1] ?? "");
  const low = ALPHABET.indexOf(random[2] ?? "");
  return high < 0 || low < 0 ? null : high * 32 + low;
}

/**
 * An occurrence's execution id follows from its job and due time, so the same occurrence always
 * has the same id: a retried alarm, a repeated hand-off or a duplicate mirror collapse on it.
 */
export function occurrenceId(jobId: string, occurrenceAt: number): string {
  const jobRandom = jobId.slice(-16);
  return `exe_${newId("exe", occurrenceAt, new Uint8Array(16)).slice(4, 14)}${jobRandom}`;
}

/**
 * A one-off job has one execution, named after the job (its random and time parts), so the
 * execution id and the job id are found from each other without a lookup.
 */
export function oneOffExecutionId(jobId: string): string {
  return `exe_${jobId.slice(4)}`;
}

export function jobIdOfOneOff(executionId: string): string {
  return `job_${executionId.slice(4)}`;
}

/**
 * The lowest execution id of an instant (its time part alone): ids of executions due at or after
 * `at` sort at or above it. An occurrence's id carries its due time, so due-time bounds are id bounds.
 */
export function executionIdFloor(at: number): string {
  return newId("exe", at, new Uint8Array(0)).slice(0, 14);
}

/** The time part of an id (epoch ms): an occurrence's due time, a one-off's creation; undefined when not an id. */
export function timeOfId(id: string): number | undefined {
  const time = id.slice(4, 14);
  if (time.length !== 10) return undefined;
  let at = 0;
  for (const char of time) {
    const digit = ALPHABET.indexOf(char);
    if (digit < 0) return undefined;
    at = at * 32 + digit;
  }
  return at;
}
