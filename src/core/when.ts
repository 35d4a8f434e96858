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

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** The last instant accepted anywhere: the end of year 9999 (dates past it do not format). */
export const MAX_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * RFC 3339 with an explicit offset, or epoch ms -> epoch ms; undefined when malformed or past MAX_INSTANT.
 * Calendar fields are range-checked: Date.parse would roll 30 February over into March.
 */
export function parseInstant(input: string | number): number | undefined {
  if (typeof input === "number") return Number.isSafeInteger(input) && input >= 0 && input <= MAX_INSTANT ? input : undefined;
  const m = RFC3339.exec(input);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) return undefined;
  const offsetMinutes = m[8] ? 0 : (m[9] === "-" ? -1 : 1) * (Number(m[10]) * 60 + Number(m[11]));
  if (!m[8] && (Number(m[10]) > 23 || Number(m[11]) > 59)) return undefined;
  const fraction = m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0;
  const ms = Date.UTC(year, month - 1, day, hour, minute, second, fraction) - offsetMinutes * 60_000;
  return ms >= 0 && ms <= MAX_INSTANT ? ms : undefined;
}

export function toRfc3339(at: number): string;
export function toRfc3339(at: number | null | undefined): string | null;
export function toRfc3339(at: number | null | undefined): string | null {
  return at === null || at === undefined ? null : new Date(at).toISOString();
}
