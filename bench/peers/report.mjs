// The Markdown tables of `npm run bench:peers`, from its JSON lines: one table per scenario, a row
// per peer and delivery mode, each figure as the range over the runs (min–max, or one value).
// Pure: no I/O, so test/unit/bench-peers.test.ts holds it.
import { count, durationRange, markdownTable, range } from "../lib/table.mjs";

const DELIVERY = { http: "webhook (DELIVER=http)", none: "no-op handler" };

/** Lines grouped by peer, delivery mode and scenario, in the order they first appear. */
function groups(lines) {
  const out = new Map();
  for (const line of lines) {
    if (line.error) continue;
    const key = `${line.peer}|${line.deliver}|${line.scenario}`;
    if (!out.has(key)) out.set(key, []);
    out.get(key).push(line);
  }
  return [...out.values()];
}

/** A row's first cells: the peer, the delivery mode, the runs, the jobs */
function rowHead(runs) {
  const first = runs[0];
  return [
    first.peer,
    DELIVERY[first.deliver] ?? first.deliver,
    runs.length,
    range(
      runs.map((r) => r.params.n),
      count,
    ),
  ];
}

/** the figures every table ends with: missing, duplicates, CPU per delivery, other processes' CPU */
function rowTail(runs) {
  return [
    range(
      runs.map((r) => r.missing),
      count,
    ),
    range(
      runs.map((r) => r.duplicates),
      count,
    ),
    range(
      runs.map((r) => r.runtime.cpuMsPerDelivery?.all),
      (v) => v.toFixed(2),
      "ms",
    ),
    range(
      runs.map((r) => r.runtime.machine.otherCpuSeconds),
      (v) => v.toFixed(1),
      "s",
    ),
  ];
}

const TAIL_HEAD = ["missing", "duplicates", "CPU per delivery (worker + Redis + producer)", "other processes' CPU"];

/** The tables for `lines` (bench:peers JSON lines; error lines are skipped), with a line naming the versions. */
export function peersReport(lines) {
  const all = groups(lines);
  const parts = [];
  const delayed = all.filter((runs) => runs[0].scenario === "delayed");
  if (delayed.length > 0) {
    const p = delayed[0][0].params;
    parts.push(
      `### delayed: jobs due evenly over ${p.spreadMs / 1000} s from ${p.leadMs / 1000} s after the enqueue starts\n`,
      markdownTable(
        ["peer", "delivery", "runs", "jobs", "enqueue (jobs/s)", "lag p50", "lag p95", "lag p99", "lag max", "over 2 s", ...TAIL_HEAD],
        delayed.map((runs) => [
          ...rowHead(runs),
          range(
            runs.map((r) => r.enqueue.jobsPerSec),
            count,
          ),
          durationRange(runs.map((r) => r.lagMs.p50)),
          durationRange(runs.map((r) => r.lagMs.p95)),
          durationRange(runs.map((r) => r.lagMs.p99)),
          durationRange(runs.map((r) => r.lagMs.max)),
          range(
            runs.map((r) => r.over2s),
            count,
          ),
          ...rowTail(runs),
        ]),
      ),
    );
  }
  const burst = all.filter((runs) => runs[0].scenario === "burst");
  if (burst.length > 0) {
    parts.push(
      `${parts.length ? "\n" : ""}### burst: every job due at one instant, after all are created\n`,
      markdownTable(
        [
          "peer",
          "delivery",
          "runs",
          "jobs",
          "enqueue (jobs/s)",
          "first arrival after due",
          "drain (due to last arrival)",
          "drain rate (jobs/s)",
          "lag p99",
          ...TAIL_HEAD,
        ],
        burst.map((runs) => [
          ...rowHead(runs),
          range(
            runs.map((r) => r.enqueue.jobsPerSec),
            count,
          ),
          durationRange(runs.map((r) => r.firstArrivalAfterDueMs)),
          durationRange(runs.map((r) => r.drainMs)),
          range(
            runs.map((r) => r.drainJobsPerSec),
            count,
          ),
          durationRange(runs.map((r) => r.lagMs.p99)),
          ...rowTail(runs),
        ]),
      ),
    );
  }
  const ok = lines.filter((l) => !l.error);
  if (ok.length > 0) {
    const versions = [
      ...new Set(
        ok.map((l) =>
          Object.entries(l.versions ?? {})
            .map(([k, v]) => `${k} ${v}`)
            .join(", "),
        ),
      ),
    ];
    const at = ok.map((l) => l.at).sort();
    parts.push(`\n${versions.join("; ")}; ${ok[0].machine.cpus} cores, node ${ok[0].machine.node}; ${at[0]} to ${at[at.length - 1]}`);
  }
  const failed = lines.filter((l) => l.error);
  if (failed.length > 0) parts.push(`\n${failed.length} run(s) failed: ${failed.map((l) => `${l.deliver} ${l.scenario}`).join(", ")}`);
  return `${parts.join("\n")}\n`;
}
