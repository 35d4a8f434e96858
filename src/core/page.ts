/**
 * Pages of newest-first lists read by bounded range scans (src/db/range-scan.ts): each source reads
 * at most a budget of keys a page, so its part may be short; merging the parts keeps only what
 * every source has examined, so no row is skipped and none is listed twice.
 */

/** One source's part of a list page, newest first. */
export interface Scan<T> {
  /** the rows that passed the filters, at most limit + 1 */
  rows: T[];
  /** the lowest key examined (inclusive), below which the range goes on; null: the range is done */
  covered: string | null;
}

/**
 * One page newest first from several sources' scans (keys are comparable across them): the rows
 * every source has examined down to, at most `limit`, and the key the next page starts below.
 * A key in two scans is listed once, from the earlier scan (the sort is stable).
 */
export function mergeScans<T>(scans: Scan<T>[], keyOf: (row: T) => string, limit: number): { page: T[]; next: string | null } {
  const covered = scans.reduce<string | null>((c, s) => (s.covered !== null && (c === null || s.covered > c) ? s.covered : c), null);
  const seen = new Set<string>();
  const candidates = scans
    .flatMap((s) => s.rows)
    .filter((r) => covered === null || keyOf(r) >= covered)
    .sort((a, b) => (keyOf(a) < keyOf(b) ? 1 : keyOf(a) > keyOf(b) ? -1 : 0))
    .filter((r) => !seen.has(keyOf(r)) && seen.add(keyOf(r)));
  const page = candidates.slice(0, limit);
  if (candidates.length > limit) return { page, next: keyOf(page[page.length - 1]!) };
  return { page, next: covered };
}
