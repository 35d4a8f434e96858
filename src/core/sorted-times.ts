/** Ascending arrays of times (a gate's starts and rate slots): counted, inserted and removed by binary search. */

/** How many of an ascending array are below `value` (or at it too, if `orAt`). */
export function countBelow(sorted: number[], value: number, orAt = false): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < value || (orAt && sorted[mid] === value)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function insertSorted(sorted: number[], value: number): void {
  sorted.splice(countBelow(sorted, value, true), 0, value);
}

export function removeSorted(sorted: number[], value: number): void {
  const at = countBelow(sorted, value);
  if (sorted[at] === value) sorted.splice(at, 1);
}
