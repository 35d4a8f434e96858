// Markdown tables of figures, for the reports of `npm run bench:peers` and `npm run bench:floor`:
// each figure shown as the range over the runs (min–max, or one value when they agree), durations
// in the unit people read them in. Pure: test/unit/bench-peers.test.ts holds it.

const DASH = "–";

/** A Markdown table: a header row, the separator, one row per entry (null/undefined shown as –). */
export function markdownTable(head, rows) {
  const cell = (v) => (v === null || v === undefined || v === "" ? DASH : String(v).replaceAll("|", "\\|"));
  return [`| ${head.join(" | ")} |`, `| ${head.map(() => "---").join(" | ")} |`, ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`)].join(
    "\n",
  );
}

/** the finite numbers of `values`, in order */
function finite(values) {
  return values.filter((v) => typeof v === "number" && Number.isFinite(v));
}

/**
 * "a–b unit", or one value when they are all equal; null when there is none.
 * @param {unknown[]} values
 * @param {(x: number) => string} show formats one number
 * @param {string} [unit]
 */
export function range(values, show, unit = "") {
  const xs = finite(values);
  if (xs.length === 0) return null;
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  const text = lo === hi ? show(lo) : `${show(lo)}–${show(hi)}`;
  return unit ? `${text} ${unit}` : text;
}

/** 1,960 (grouped thousands, rounded) */
export const count = (x) => Math.round(x).toLocaleString("en-US");

/**
 * Durations in ms as people read them: "88–90 ms" below a second, else seconds ("6.84–6.98 s"
 * below 10 s, "15.9–17.9 s" above). The unit follows the largest value, so one range has one unit.
 */
export function durationRange(valuesMs) {
  const xs = finite(valuesMs);
  if (xs.length === 0) return null;
  const hi = Math.max(...xs);
  if (hi < 1000) return range(xs, (v) => count(v), "ms");
  const digits = hi < 10_000 ? 2 : 1;
  return range(
    xs.map((v) => v / 1000),
    (v) => v.toFixed(digits),
    "s",
  );
}
