/**
 * The bucket's next alarm: the earliest of next due, lease deadline, dispatch deadline and the
 * mirror flush, rounded up to the alarm quantum so one firing sends a full batch instead of
 * waking for every single due time (issue 5: per-firing cost dominates).
 */
export function nextAlarmAt(input: {
  candidates: ReadonlyArray<number | null | undefined>;
  now: number;
  quantumMs: number;
}): number | null {
  let earliest: number | null = null;
  for (const at of input.candidates) {
    if (at === null || at === undefined) continue;
    if (earliest === null || at < earliest) earliest = at;
  }
  if (earliest === null) return null;
  const at = Math.max(earliest, input.now);
  if (input.quantumMs <= 1) return at;
  return Math.ceil(at / input.quantumMs) * input.quantumMs;
}
