// A minimal API client for the bench: bearer auth, JSON, a timeout on every request.
export class Api {
  constructor(baseUrl, apiKey) {
    this.baseUrl = baseUrl;
    this.apiKey = apiKey;
  }

  use(baseUrl) {
    this.baseUrl = baseUrl;
  }

  async request(method, path, body, timeoutMs = 60_000) {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.apiKey}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let parsed = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed };
  }

  /**
   * POST /v1/jobs/batch with `specs` (at most 1000). Returns the job ids in order (null for a
   * refused item), the refusals, and the request's wall time.
   */
  async createBatch(specs) {
    const sentAt = Date.now();
    const res = await this.request("POST", "/v1/jobs/batch", { jobs: specs });
    const doneAt = Date.now();
    if (res.status !== 200) {
      return {
        ids: specs.map(() => null),
        refused: specs.length,
        error: `HTTP ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`,
        sentAt,
        doneAt,
      };
    }
    let refused = 0;
    let error = null;
    const ids = res.body.results.map((r) => {
      if (r.status === 201 || r.status === 200) return r.job.id;
      refused += 1;
      error ??= JSON.stringify(r).slice(0, 300);
      return null;
    });
    return { ids, refused, error, sentAt, doneAt };
  }

  metrics() {
    return this.request("GET", "/v1/metrics", undefined, 30_000);
  }

  executions(jobId) {
    return this.request("GET", `/v1/jobs/${jobId}/executions`, undefined, 30_000);
  }
}

/** The figures of /v1/metrics the bench reports (counters and the scheduler's own claim lag). */
export async function schedulerFigures(api, settings = {}) {
  try {
    const res = await api.metrics();
    if (res.status !== 200) return { error: `HTTP ${res.status}` };
    const m = res.body;
    const counters = Object.fromEntries(Object.entries(m.counters).filter(([, v]) => v !== 0));
    const per = perExecution(m.counters);
    return {
      counters,
      deadByReason: m.dead_total_by_reason,
      d1RowsByShard: m.d1_rows_written_total_by_shard,
      claimLagMs: m.fire_lag_ms,
      perExecution: per,
      objects: await objectFigures(api, per?.finished ?? 0, Number(settings.BUCKETS ?? 0)),
    };
  } catch (error) {
    return { error: String(error) };
  }
}

/**
 * What the platform bills and what the scheduler repeated, per finished execution, from the
 * scheduler's own counters (rows from cursor.rowsWritten and meta.rows_written; the history purge
 * after HISTORY_RETENTION_MS is not in a bench run: test/integration/rows.test.ts measures it).
 */
export function perExecution(c) {
  const finished = (c.succeeded_total ?? 0) + (c.dead_total ?? 0) + (c.canceled_total ?? 0);
  if (finished === 0) return null;
  const per = (n) => Math.round(((n ?? 0) / finished) * 1000) / 1000;
  return {
    finished,
    doRows: per(c.do_rows_written_total),
    d1Rows: per(c.d1_rows_written_total),
    rows: per((c.do_rows_written_total ?? 0) + (c.d1_rows_written_total ?? 0)),
    alarmsSet: per(c.alarms_set_total),
    doRequests: per(c.do_requests_total),
    // messages sent (groups); before groups every dispatch was its own message
    queueMessages: per(c.fire_messages_total ?? (c.fired_total ?? 0) + (c.redispatch_total ?? 0)),
    executionsPerMessage: c.fire_messages_total
      ? Math.round((((c.fired_total ?? 0) + (c.redispatch_total ?? 0)) / c.fire_messages_total) * 100) / 100
      : 1,
    redispatches: per(c.redispatch_total),
    duplicatesSuppressed: per(c.duplicates_suppressed_total),
  };
}

/** The design rate (DESIGN.md): what the hottest object must carry at it, derived from the per-execution figures. */
export const DESIGN_RATE_PER_SECOND = 10_000;
/** production's default BUCKETS (src/config.ts), which shares the design rate between the bucket objects */
const PRODUCTION_BUCKETS = 32;
/** a Durable Object's soft limit of requests per second (docs/platform-limits.md) */
const OBJECT_SOFT_LIMIT_PER_SECOND = 1_000;

/**
 * Requests per Durable Object (issue 35 item 6), as the stack's local profile counted them at the
 * callers (GET /__platform: src/platform/local-worker.ts): each object's requests per finished
 * execution, its busiest second here, and the requests per second it would take at the design rate
 * of 10,000 executions/s. A bucket carries 1/BUCKETS of the executions (here the local BUCKETS, in
 * production 32), so its figure is scaled by local/production buckets; any other object (a flow
 * key's part, a tenant's objects) is taken to carry here the share it would carry there, the whole
 * rate of one tenant and one origin in the worst case.
 */
async function objectFigures(api, finished, localBuckets) {
  try {
    const res = await api.request("GET", "/__platform", undefined, 10_000);
    if (res.status !== 200 || finished === 0) return res.status === 200 ? null : { error: `HTTP ${res.status}` };
    const objects = res.body.objects.map((o) => {
      const perExecution = o.total / finished;
      const share = o.object.startsWith("BUCKET:") && localBuckets > 0 ? localBuckets / PRODUCTION_BUCKETS : 1;
      return {
        object: o.object,
        requests: o.total,
        peakPerSecondHere: o.peakPerSecond,
        perExecution: Math.round(perExecution * 1000) / 1000,
        atDesignRatePerSecond: Math.round(perExecution * DESIGN_RATE_PER_SECOND * share),
      };
    });
    objects.sort((a, b) => b.atDesignRatePerSecond - a.atDesignRatePerSecond);
    const hottest = objects[0] ?? null;
    return {
      hottestAtDesignRate: hottest,
      underHalfSoftLimit: hottest === null || hottest.atDesignRatePerSecond < OBJECT_SOFT_LIMIT_PER_SECOND / 2,
      top: objects.slice(0, 5),
    };
  } catch (error) {
    return { error: String(error) };
  }
}
