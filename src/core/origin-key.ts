/**
 * The implicit flow-control keys of target origins (issue 13 item 3): a job without a key of its
 * own is governed by its target's origin, a key held by up to ORIGIN_KEY_PARTS objects, each with
 * its share of the parallelism (core/flow.ts governingKey names the part). Pure: names and shares.
 */
/**
 * Names of the implicit origin keys: `origin:` and the target's origin. A job's own key may not
 * start with it (schemas/job-input.ts), so the two never meet.
 */
export const ORIGIN_KEY_PREFIX = "origin:";

/** The implicit key of a URL's origin (scheme://host[:port], a default port left out), or null if it has none. */
export function originKeyOf(url: string): string | null {
  let origin: string;
  try {
    origin = new URL(url).origin;
  } catch {
    return null;
  }
  return origin === "null" ? null : ORIGIN_KEY_PREFIX + origin;
}

/** Whether a name is an origin key as originKeyOf spells it: one name per origin (no path, lower-case host, no default port). */
export function isOriginKey(name: string): boolean {
  return name.startsWith(ORIGIN_KEY_PREFIX) && originKeyOf(name.slice(ORIGIN_KEY_PREFIX.length)) === name;
}

/**
 * An origin's implicit key is held by up to this many objects (its parts), each with its share of
 * the parallelism: every key-less delivery asks and releases its origin's key, about 0.3-0.5
 * requests per execution, so at 10,000 executions/s to one origin a single object would take
 * 3,000-5,000 requests/s against a Durable Object's soft limit of 1,000 (docs/platform-limits.md);
 * 16 parts take under 320 each. An execution asks the part its bucket's hash names
 * (bucketOfExecution): a bucket's groups ask one part. A target's slow-down reaches every part (the
 * part that heard it tells the others: FlowKey.release).
 */
export const ORIGIN_KEY_PARTS = 16;

/**
 * A part holds at least this many slots: an origin's executions spread over the parts by hash, so a
 * part of few slots would often be full while another sits idle (with a parallelism of 2 in two
 * parts, two deliveries could not always run at once). A key of lower parallelism has one part:
 * its throughput, and so its requests, are small (at most parallelism ÷ a target's answer time).
 */
export const ORIGIN_PART_MIN_PARALLELISM = 32;

/** How many parts hold an origin key allowing `parallelism` in flight. */
export function originKeyParts(parallelism: number): number {
  return Math.max(1, Math.min(ORIGIN_KEY_PARTS, Math.floor(parallelism / ORIGIN_PART_MIN_PARALLELISM)));
}

/** One part's share of `parallelism` over `parts` (the shares add up to it; at least 1 each). */
export function originPartParallelism(parallelism: number, part: number, parts: number): number {
  return Math.max(1, Math.floor(parallelism / parts) + (part < parallelism % parts ? 1 : 0));
}

/** The object name of one part of an origin key: `origin:https://api.example.com#3`. */
export function originKeyPart(originKey: string, part: number): string {
  return `${originKey}#${part}`;
}

/** The origin key and part a part's name spells, or null when `name` is not one. */
export function originKeyOfPart(name: string): { originKey: string; part: number } | null {
  const at = name.lastIndexOf("#");
  if (at < 0) return null;
  const base = name.slice(0, at);
  const part = name.slice(at + 1);
  return /^(0|[1-9][0-9]?)$/.test(part) && Number(part) < ORIGIN_KEY_PARTS && isOriginKey(base)
    ? { originKey: base, part: Number(part) }
    : null;
}
