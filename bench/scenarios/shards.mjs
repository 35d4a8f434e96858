// shards: the system of record across D1 shards (issue "10k jobs/s for a month"). A stack with
// BENCH_SHARDS_COUNT shards (default 4); N jobs (BENCH_SHARDS_N, default 200,000) created through
// POST /v1/jobs/batch in chunks of 1000, due far ahead (nothing fires while it runs). Reports how
// evenly they spread (from the ids, which name their shard), the D1 rows written per shard (the
// scheduler's own d1_rows_written_total by shard, from meta.rows_written), and the time and the D1
// rows read to page through all of the tenant's jobs with GET /v1/jobs (S shard pages of limit + 1
// rows each per page, measured per page in test/integration/shards.test.ts).
import { enqueueSequential, rate } from "../lib/jobs.mjs";
import { withSession } from "../lib/session.mjs";
import { round, summary } from "../lib/stats.mjs";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

/** The shard a job id names (src/core/id.ts shardOfId): the mark "u", then two digits; none is shard 0. */
function shardOfId(id) {
  const random = id.slice(-16);
  if (random[0] !== "u") return 0;
  return ALPHABET.indexOf(random[1]) * 32 + ALPHABET.indexOf(random[2]);
}

export async function shards(params, ctx) {
  const { n, shards: count, pageLimit } = params;
  return withSession("shards", { ...ctx, shards: count }, async ({ quiet, loadAvgAtStart, target, api, sampler, schedulerFigures }) => {
    const url = `${target.url}/far`;
    const dueAt = Date.now() + 3 * 3_600_000; // beyond the lookahead: the jobs stay in D1
    const order = Array.from({ length: n }, (_, i) => i);
    sampler.mark("start");
    const t0 = Date.now();
    const enq = await enqueueSequential(api, order, (i) => ({ target: { url, body: { i } }, runAt: dueAt }), n);
    sampler.mark("enqueued");
    const created = enq.ids.filter((id) => id !== null);
    const perShard = new Array(count).fill(0);
    for (const id of created) perShard[shardOfId(id)] += 1;
    const largest = Math.max(...perShard);
    const smallest = Math.min(...perShard);
    const before = await schedulerFigures();

    // page through every job of the tenant
    const pageMs = [];
    const seen = new Set();
    let cursor = null;
    let pages = 0;
    const p0 = Date.now();
    for (let guard = 0; guard < Math.ceil(n / pageLimit) + 10; guard++) {
      const s = Date.now();
      const res = await api.request("GET", `/v1/jobs?limit=${pageLimit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      pageMs.push(Date.now() - s);
      if (res.status !== 200) throw new Error(`GET /v1/jobs answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
      pages += 1;
      for (const job of res.body.jobs) seen.add(job.id);
      cursor = res.body.nextCursor;
      if (cursor === null) break;
    }
    const pagingMs = Date.now() - p0;
    sampler.mark("end");
    return {
      scenario: "shards",
      params: { n, shards: count, chunk: 1000, pageLimit, settings: ctx.settings },
      enqueue: {
        ms: enq.endedAt - t0,
        jobsPerSec: rate(created.length, enq.endedAt - t0),
        refused: enq.refused,
        firstError: enq.firstError,
      },
      spread: { jobsPerShard: perShard, largestOverSmallest: smallest === 0 ? null : round(largest / smallest, 3) },
      rowsWritten: {
        d1Total: before.counters?.d1_rows_written_total ?? null,
        perShard: before.d1RowsByShard ?? null,
        perJob: created.length === 0 ? null : round((before.counters?.d1_rows_written_total ?? 0) / created.length, 3),
      },
      paging: {
        pages,
        listed: seen.size,
        complete: seen.size === created.length,
        ms: pagingMs,
        pageMs: summary(pageMs),
        rowsReadEstimate: pages * count * (pageLimit + 1),
        rowsReadPerPage: count * (pageLimit + 1),
      },
      quietBeforeStart: quiet,
      loadAvgAtStart,
      runtime: {
        cpuSeconds: sampler.cpu("start", "end"),
        cpuSecondsEnqueue: sampler.cpu("start", "enqueued"),
        peakRssMb: sampler.peakRssMb(),
      },
    };
  });
}
