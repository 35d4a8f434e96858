/**
 * Metric names as in DESIGN.md's failure table; counters live in each bucket and are summed.
 * Flow-control keys are read from their own objects, one series per key (FLOW_KEY_SERIES).
 */
import type { FlowView } from "./flow";
import { LAG_BOUNDS_MS, LAG_OVERFLOW, type LagHistogram, quantileMs } from "./histogram";

export const COUNTERS = [
  "fired_total",
  "succeeded_total",
  "failed_attempts_total",
  "retries_total",
  "dead_total",
  "canceled_total",
  "duplicates_suppressed_total",
  "stale_lease_rejects_total",
  "lease_expired_total",
  "redispatch_total",
  "dispatch_errors_total",
  "scanner_recovered_total",
  "redrive_total",
  "flow_waits_total",
  "malformed_messages_total",
  "do_rows_written_total",
  "d1_rows_written_total",
  "alarms_set_total",
  "do_requests_total",
  "fire_messages_total",
  "archived_executions_total",
  "archive_objects_total",
  "archive_bytes_total",
  "archive_write_failures_total",
  "callbacks_succeeded_total",
  "callbacks_dead_total",
  "callbacks_attempts_total",
  "alerts_sent_total",
  "alerts_failed_total",
  "alerts_throttled_keys_total",
] as const;
export type CounterName = (typeof COUNTERS)[number];

export const COUNTER_HELP: Record<CounterName, string> = {
  fired_total: "executions sent to a fire queue at their due time (first dispatch of an attempt)",
  succeeded_total: "executions whose target answered 2xx",
  failed_attempts_total: "attempts that failed (target error, timeout, lease expiry)",
  retries_total: "failed attempts scheduled again with backoff",
  dead_total: "executions that ended dead, by reason",
  canceled_total: "executions that ended canceled (job canceled or paused, a missed occurrence skipped), however far off they were due",
  duplicates_suppressed_total: "queue deliveries dropped because the execution held a live lease or was terminal",
  stale_lease_rejects_total: "completions, failures or heartbeats rejected because their token was not the live lease",
  lease_expired_total: "leases that expired before completion (crashed or stuck worker)",
  redispatch_total: "executions dispatched again after their dispatch deadline passed unclaimed",
  dispatch_errors_total: "queue sends that failed inside the alarm",
  scanner_recovered_total: "executions the scanner handed to their bucket from D1",
  redrive_total: "dead executions given a fresh attempt budget",
  flow_waits_total:
    "flow-control waits (key over its limits, paused or slowed down by the target), no attempt used: each wait in a bucket, and each execution that waited in a consumer before it started",
  malformed_messages_total: "queue messages that were not a fire message (acked and dropped)",
  do_rows_written_total: "Durable Object SQLite rows written, index entries included (the platform's cursor.rowsWritten)",
  d1_rows_written_total: "D1 rows written by the job path, index entries included (meta.rows_written), by shard",
  alarms_set_total: "Durable Object alarms set (each is billed like a row written)",
  do_requests_total: "Durable Object requests: every RPC call and alarm invocation of a bucket (each is billed)",
  fire_messages_total: "fire queue messages sent (each a group of executions of one bucket; a queue message is billed 3 operations)",
  archived_executions_total: "finished executions written to the R2 archive before they left D1 (all tenants)",
  archive_objects_total: "objects put to the R2 archive (each is a billed class A operation)",
  archive_bytes_total: "compressed bytes put to the R2 archive",
  archive_write_failures_total: "scans whose archive write failed for a shard: its purge waited for the next scan (nothing left D1)",
  callbacks_succeeded_total: "callbacks (a job's callback or failureCallback) whose target answered 2xx",
  callbacks_dead_total: "callbacks that ended dead after their last attempt (they fire no callback of their own)",
  callbacks_attempts_total:
    "callback delivery attempts that ended (answered, failed, timed out); not in fired_total, failed_attempts_total, retries_total or the fire lag",
  alerts_sent_total: "alert digests of dead executions delivered to the tenant's alert target (2xx)",
  alerts_failed_total: "alert digests that failed (kept for the next one, 10 s later)",
  alerts_throttled_keys_total:
    "flow keys reported in a delivered alert digest as throttled by their target past the tenant's throttledForMs (once per throttle episode)",
};

/** The tenant of events that belong to no tenant (a malformed message names none). */
export const SYSTEM_TENANT = "";

export interface CounterSample {
  name: CounterName;
  tenant: string;
  /** dead_total: why it died; d1_rows_written_total: the shard's index; otherwise "" */
  reason: string;
  value: number;
}

export interface BucketMetrics {
  counters: CounterSample[];
  lag: { tenant: string; le: number; count: number }[];
}

/** A D1 shard's gauges (GET /v1/metrics d1_shards): its size against its two watermarks. */
export interface ShardGauges {
  shard: number;
  binding: string;
  /** its size (meta.size_after, bytes); null when it did not answer */
  bytes: number | null;
  /** HISTORY_MAX_BYTES: above it, history is purged before the retention */
  historyMaxBytes: number;
  /** SHARD_MAX_BYTES: above it, the shard takes no new jobs */
  shardMaxBytes: number;
  /** the oldest finished history it holds (RFC 3339; null with none or when it did not answer) */
  oldestHistoryAt: string | null;
  /** why it could not be read */
  error?: string;
}

export interface MetricsSummary {
  counters: Record<string, number>;
  dead_total_by_reason: Record<string, number>;
  /** D1 rows written per shard (its index): the write rate each database takes */
  d1_rows_written_total_by_shard: Record<string, number>;
  fire_lag_ms: {
    count: number;
    p50: number | null;
    p95: number | null;
    p99: number | null;
    buckets: { le: string; count: number }[];
  };
}

/**
 * Sums bucket metrics, optionally for one tenant, into the JSON shape of GET /v1/metrics.
 * Counters of no tenant (SYSTEM_TENANT: e.g. malformed queue messages) belong to every view.
 */
export function summarize(parts: BucketMetrics[], tenant: string | null): MetricsSummary {
  const counters: Record<string, number> = Object.fromEntries(COUNTERS.map((c) => [c, 0]));
  const deadByReason: Record<string, number> = {};
  const d1RowsByShard: Record<string, number> = {};
  const histogram: LagHistogram = new Map();
  for (const part of parts) {
    for (const c of part.counters) {
      if (tenant !== null && c.tenant !== tenant && c.tenant !== SYSTEM_TENANT) continue;
      counters[c.name] = (counters[c.name] ?? 0) + c.value;
      if (c.name === "dead_total") deadByReason[c.reason] = (deadByReason[c.reason] ?? 0) + c.value;
      // counts from before shards were counted apart (no reason) are shard 0's: the only one then
      if (c.name === "d1_rows_written_total") d1RowsByShard[c.reason || "0"] = (d1RowsByShard[c.reason || "0"] ?? 0) + c.value;
    }
    for (const h of part.lag) {
      if (tenant !== null && h.tenant !== tenant) continue;
      histogram.set(h.le, (histogram.get(h.le) ?? 0) + h.count);
    }
  }
  const count = [...histogram.values()].reduce((a, b) => a + b, 0);
  return {
    counters,
    dead_total_by_reason: deadByReason,
    d1_rows_written_total_by_shard: d1RowsByShard,
    fire_lag_ms: {
      count,
      p50: quantileMs(histogram, 0.5),
      p95: quantileMs(histogram, 0.95),
      p99: quantileMs(histogram, 0.99),
      buckets: [...LAG_BOUNDS_MS, LAG_OVERFLOW].map((le) => ({
        le: le === LAG_OVERFLOW ? "+Inf" : String(le),
        count: histogram.get(le) ?? 0,
      })),
    },
  };
}

/** A flow-control key as a metrics read found it: its view, or null when its object did not answer. */
export interface FlowKeyReading {
  key: string;
  view: FlowView | null;
}

/** One tenant's flow-control keys in a metrics read: a bounded page, `truncated` when it has more. */
export interface FlowKeyReadings {
  tenant: string;
  keys: FlowKeyReading[];
  truncated: boolean;
}

/**
 * GET /metrics' series per flow-control key, labeled {tenant, key}: each a field of the key's view
 * (GET /v1/flow-control/:key). The two totals are kept in the object's memory: they restart from 0
 * when it does, as a Prometheus counter may.
 */
export const FLOW_KEY_SERIES = [
  {
    name: "flow_waiting",
    type: "gauge",
    help: "executions of the key told to wait and expected to ask again",
    of: (v: FlowView) => v.waiting,
  },
  { name: "flow_in_flight", type: "gauge", help: "deliveries of the key holding a permit now", of: (v: FlowView) => v.inFlight },
  {
    name: "flow_current_rate",
    type: "gauge",
    help: "deliveries of the key started within the last period",
    of: (v: FlowView) => v.currentRate,
  },
  { name: "flow_paused", type: "gauge", help: "1 while the key is paused", of: (v: FlowView) => (v.paused ? 1 : 0) },
  {
    name: "flow_granted_total",
    type: "counter",
    help: "asks the key granted (deliveries started) since its object started",
    of: (v: FlowView) => v.grantedTotal,
  },
  {
    name: "flow_throttled_total",
    type: "counter",
    help: "asks the key answered with a wait (over its rate or parallelism, paused, or slowed down by a Retry-After), one per ask, since its object started",
    of: (v: FlowView) => v.throttledTotal,
  },
] as const;

/** Prometheus text exposition of a summary, and of a tenant's flow-control keys when given. */
export function toPrometheus(summary: MetricsSummary, flow?: FlowKeyReadings, shards: readonly ShardGauges[] = []): string {
  const lines: string[] = [];
  for (const name of COUNTERS) {
    const metric = `scheduler_${name}`;
    lines.push(`# HELP ${metric} ${COUNTER_HELP[name]}`, `# TYPE ${metric} counter`);
    if (name === "dead_total") {
      const reasons = Object.entries(summary.dead_total_by_reason);
      if (reasons.length === 0) lines.push(`${metric} 0`);
      for (const [reason, value] of reasons) lines.push(`${metric}{reason="${reason}"} ${value}`);
    } else if (name === "d1_rows_written_total") {
      const shards = Object.entries(summary.d1_rows_written_total_by_shard);
      if (shards.length === 0) lines.push(`${metric} 0`);
      for (const [shard, value] of shards) lines.push(`${metric}{shard="${shard}"} ${value}`);
    } else {
      lines.push(`${metric} ${summary.counters[name] ?? 0}`);
    }
  }
  const lag = "scheduler_fire_lag_ms";
  lines.push(`# HELP ${lag} start of an attempt minus its due time`, `# TYPE ${lag} histogram`);
  let cumulative = 0;
  for (const b of summary.fire_lag_ms.buckets) {
    cumulative += b.count;
    lines.push(`${lag}_bucket{le="${b.le}"} ${cumulative}`);
  }
  lines.push(`${lag}_count ${summary.fire_lag_ms.count}`);
  lines.push(...shardLines(shards));
  if (flow) lines.push(...flowKeyLines(flow));
  return `${lines.join("\n")}\n`;
}

/** Each D1 shard's size, watermarks and oldest history: gauges of the whole deployment (every tenant sees them). */
function shardLines(shards: readonly ShardGauges[]): string[] {
  const series: { name: string; help: string; of: (s: ShardGauges) => number | null }[] = [
    { name: "d1_shard_bytes", help: "the D1 shard's size (meta.size_after)", of: (s) => s.bytes },
    {
      name: "d1_shard_history_max_bytes",
      help: "HISTORY_MAX_BYTES: above it history is purged before the retention",
      of: (s) => s.historyMaxBytes,
    },
    { name: "d1_shard_max_bytes", help: "SHARD_MAX_BYTES: above it the shard takes no new jobs", of: (s) => s.shardMaxBytes },
    {
      name: "d1_shard_oldest_history_timestamp_seconds",
      help: "the oldest finished history the shard holds (Unix seconds)",
      of: (s) => (s.oldestHistoryAt === null ? null : Math.floor(Date.parse(s.oldestHistoryAt) / 1000)),
    },
  ];
  const lines: string[] = [];
  for (const { name, help, of } of series) {
    lines.push(`# HELP scheduler_${name} ${help}`, `# TYPE scheduler_${name} gauge`);
    for (const s of shards) {
      const value = of(s);
      if (value !== null) lines.push(`scheduler_${name}{shard="${s.shard}"} ${value}`);
    }
  }
  return lines;
}

function flowKeyLines(flow: FlowKeyReadings): string[] {
  const lines: string[] = [];
  const tenant = `tenant="${labelValue(flow.tenant)}"`;
  const gauge = (name: string, help: string, value: number) =>
    lines.push(`# HELP scheduler_${name} ${help}`, `# TYPE scheduler_${name} gauge`, `scheduler_${name}{${tenant}} ${value}`);
  gauge("flow_keys_listed", "flow-control keys of the tenant this read lists", flow.keys.length);
  gauge(
    "flow_keys_unreadable",
    "listed keys whose object did not answer: their series are left out",
    flow.keys.filter((k) => !k.view).length,
  );
  gauge("flow_keys_truncated", "1 when the tenant has more keys than a read lists: the rest are left out", flow.truncated ? 1 : 0);
  for (const series of FLOW_KEY_SERIES) {
    const metric = `scheduler_${series.name}`;
    lines.push(`# HELP ${metric} ${series.help}`, `# TYPE ${metric} ${series.type}`);
    for (const { key, view } of flow.keys) if (view) lines.push(`${metric}{${tenant},key="${labelValue(key)}"} ${series.of(view)}`);
  }
  return lines;
}

/** A label value as the text format escapes it (backslash, double quote, newline). */
function labelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}
