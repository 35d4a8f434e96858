// The one reader of env vars for the Node-side runs (bench, soak, e2e, scripts): a number, a
// boolean, a string or a list, with a default when unset or empty, and an error naming the
// variable on bad input. And the one prefix that sets a scheduler setting for a run:
// SCHEDULER_<NAME>=value (SCHEDULER_BUCKETS=16), <NAME> being a setting of src/config.ts.
// scripts/config.mjs checks the names and values against that schema.

/** Prefix of "set this scheduler setting for the run". Nothing of node, npm, wrangler or vite reads it. */
export const SETTING_PREFIX = "SCHEDULER_";

function read(name, env) {
  const raw = env[name];
  return raw === undefined || raw.trim() === "" ? undefined : raw.trim();
}

/**
 * A number from text, or an error naming `name`.
 * @param {{ min?: number, max?: number, integer?: boolean }} [options] min defaults to 0
 */
export function parseNumber(name, text, { min = 0, max = Infinity, integer = false } = {}) {
  const n = Number(text);
  if (text.trim() === "" || !Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < min || n > max) {
    const range = max === Infinity ? `>= ${min}` : `in ${min}..${max}`;
    throw new Error(`${name} must be ${integer ? "an integer" : "a number"} ${range}, got "${text}"`);
  }
  return n;
}

/** @param {{ min?: number, max?: number, integer?: boolean, env?: Record<string, string | undefined> }} [options] */
export function envNumber(name, fallback, { env = process.env, ...range } = {}) {
  const raw = read(name, env);
  return raw === undefined ? fallback : parseNumber(name, raw, range);
}

/**
 * A non-negative integer option of a runner script (npm run fuzz, npm run model): `--<name> <n>` on
 * the command line, else the environment's `<PREFIX>_<NAME>`, else `fallback`. A bad value ends
 * the process with exit code 2, naming the option.
 */
export function integerOption(prefix, name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  const raw = at >= 0 ? (process.argv[at + 1] ?? "") : read(`${prefix}_${name.toUpperCase()}`, process.env);
  if (raw === undefined) return fallback;
  try {
    return parseNumber(`--${name}`, raw, { integer: true });
  } catch (error) {
    console.error(error.message);
    process.exit(2);
  }
}

/** 1/true/yes or 0/false/no, any case. */
export function envBool(name, fallback, { env = process.env } = {}) {
  const raw = read(name, env);
  if (raw === undefined) return fallback;
  const v = raw.toLowerCase();
  if (["1", "true", "yes"].includes(v)) return true;
  if (["0", "false", "no"].includes(v)) return false;
  throw new Error(`${name} must be 1/true/yes or 0/false/no, got "${raw}"`);
}

/** @param {{ oneOf?: string[], env?: Record<string, string | undefined> }} [options] */
export function envString(name, fallback, { oneOf, env = process.env } = {}) {
  const raw = read(name, env);
  if (raw === undefined) return fallback;
  if (oneOf && !oneOf.includes(raw)) throw new Error(`${name} must be one of ${oneOf.join(", ")}, got "${raw}"`);
  return raw;
}

/**
 * A comma-separated list, each item trimmed and checked by `item` (default: kept as text).
 * @template T
 * @param {{ item?: (text: string) => T, env?: Record<string, string | undefined> }} [options]
 */
export function envList(name, fallback, { item = (text) => text, env = process.env } = {}) {
  const raw = read(name, env);
  if (raw === undefined) return fallback;
  const items = raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new Error(`${name} must list at least one item, got "${raw}"`);
  return items.map(item);
}

/**
 * Scheduler settings for this run: { NAME: value } from SCHEDULER_<NAME>=value. `legacy`
 * prefixes (e.g. "BENCH_VAR_") are still read, with a warning; SCHEDULER_ wins over them.
 * @param {{ env?: Record<string, string | undefined>, legacy?: string[], warn?: (message: string) => void }} [options]
 */
export function settingOverrides({ env = process.env, legacy = [], warn = (m) => console.warn(m) } = {}) {
  const out = {};
  for (const prefix of legacy) {
    for (const [key, value] of Object.entries(env)) {
      if (!key.startsWith(prefix) || value === undefined) continue;
      const name = key.slice(prefix.length);
      warn(`${key} is deprecated and will be removed: use ${SETTING_PREFIX}${name}`);
      out[name] = value;
    }
  }
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith(SETTING_PREFIX) && value !== undefined) out[key.slice(SETTING_PREFIX.length)] = value;
  }
  return out;
}
