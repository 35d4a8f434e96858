/** Parsing of user-facing times and durations; RFC 3339 only at the API edge. */
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** "500ms" | "30s" | "5m" | "2h" | "1d" | milliseconds as a number -> ms, or undefined when malformed. */
export function parseDurationMs(input: string | number): number | undefined {
  if (typeof input === "number") return Number.isFinite(input) && input >= 0 ? Math.round(input) : undefined;
  const match = DURATION.exec(input.trim());
  if (!match) return undefined;
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  return Number.isFinite(ms) ? Math.round(ms) : undefined;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** RFC 3339 with an explicit offset, or epoch ms -> epoch ms; undefined when malformed. */
export function parseInstant(input: string | number): number | undefined {
  if (typeof input === "number") return Number.isSafeInteger(input) && input >= 0 ? input : undefined;
  if (!RFC3339.test(input)) return undefined;
  const ms = Date.parse(input);
  return Number.isFinite(ms) ? ms : undefined;
}

export function toRfc3339(at: number | null | undefined): string | null {
  return at === null || at === undefined ? null : new Date(at).toISOString();
}
