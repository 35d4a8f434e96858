/**
 * Metrics named as in DESIGN.md's failure table, summed over bucket Durable Objects, per tenant,
 * and exposed as Prometheus text.
 */
import { describe, expect, it } from "vitest";
import type { FlowView } from "../../src/core/flow";
import { LAG_BOUNDS_MS, LAG_OVERFLOW } from "../../src/core/histogram";
import { type BucketMetrics, COUNTER_HELP, COUNTERS, FLOW_KEY_SERIES, summarize, toPrometheus } from "../../src/core/metrics";

const parts: BucketMetrics[] = [
  {
    counters: [
      { name: "fired_total", tenant: "acme", reason: "", value: 10 },
      { name: "succeeded_total", tenant: "acme", reason: "", value: 7 },
      { name: "dead_total", tenant: "acme", reason: "permanent", value: 2 },
      { name: "dead_total", tenant: "globex", reason: "attempts_exhausted", value: 1 },
      { name: "fired_total", tenant: "globex", reason: "", value: 4 },
    ],
    lag: [
      { tenant: "acme", le: 5, count: 6 },
      { tenant: "globex", le: 100, count: 2 },
    ],
  },
  {
    counters: [
      { name: "fired_total", tenant: "acme", reason: "", value: 5 },
      { name: "dead_total", tenant: "acme", reason: "permanent", value: 1 },
      { name: "dead_total", tenant: "acme", reason: "poison", value: 3 },
      { name: "stale_lease_rejects_total", tenant: "globex", reason: "", value: 9 },
    ],
    lag: [
      { tenant: "acme", le: 5, count: 4 },
      { tenant: "acme", le: LAG_OVERFLOW, count: 1 },
    ],
  },
  { counters: [], lag: [] },
];

describe("summarize", () => {
  it("sums every bucket's counters for all tenants", () => {
    const s = summarize(parts, null);
    expect(s.counters.fired_total).toBe(19);
    expect(s.counters.succeeded_total).toBe(7);
    expect(s.counters.dead_total).toBe(7);
    expect(s.counters.stale_lease_rejects_total).toBe(9);
    expect(s.dead_total_by_reason).toEqual({ permanent: 3, attempts_exhausted: 1, poison: 3 });
  });

  it("filters by tenant", () => {
    const acme = summarize(parts, "acme");
    expect(acme.counters.fired_total).toBe(15);
    expect(acme.counters.dead_total).toBe(6);
    expect(acme.counters.stale_lease_rejects_total).toBe(0);
    expect(acme.dead_total_by_reason).toEqual({ permanent: 3, poison: 3 });
    expect(acme.fire_lag_ms.count).toBe(11);

    const globex = summarize(parts, "globex");
    expect(globex.counters.fired_total).toBe(4);
    expect(globex.counters.stale_lease_rejects_total).toBe(9);
    expect(globex.dead_total_by_reason).toEqual({ attempts_exhausted: 1 });
    expect(globex.fire_lag_ms.count).toBe(2);
  });

  it("reports every counter, zero when no bucket has it, and an unknown tenant sees nothing", () => {
    const s = summarize(parts, "initech");
    expect(Object.keys(s.counters).sort()).toEqual([...COUNTERS].sort());
    for (const name of COUNTERS) expect(s.counters[name]).toBe(0);
    expect(s.dead_total_by_reason).toEqual({});
    expect(s.fire_lag_ms).toMatchObject({ count: 0, p50: null, p95: null, p99: null });
  });

  it("dead_total equals the sum of its reasons", () => {
    for (const tenant of [null, "acme", "globex"]) {
      const s = summarize(parts, tenant);
      expect(Object.values(s.dead_total_by_reason).reduce((a, b) => a + b, 0)).toBe(s.counters.dead_total);
    }
  });

  it("merges lag histograms across buckets, one entry per bin with +Inf last", () => {
    const s = summarize(parts, null);
    expect(s.fire_lag_ms.buckets.map((b) => b.le)).toEqual([...LAG_BOUNDS_MS.map(String), "+Inf"]);
    const byLe = Object.fromEntries(s.fire_lag_ms.buckets.map((b) => [b.le, b.count]));
    expect(byLe["5"]).toBe(10);
    expect(byLe["100"]).toBe(2);
    expect(byLe["+Inf"]).toBe(1);
    expect(s.fire_lag_ms.count).toBe(13);
    expect(s.fire_lag_ms.buckets.reduce((a, b) => a + b.count, 0)).toBe(13);
    // p50: rank 6.5 of 13 falls in [0,5] holding 10 -> 3.25; p99: rank 12.87 is in the overflow
    expect(s.fire_lag_ms.p50).toBe(3);
    expect(s.fire_lag_ms.p99).toBe(60_000);
  });
});

describe("toPrometheus", () => {
  const text = toPrometheus(summarize(parts, null));
  const lines = text.split("\n");

  it("ends with a newline and has no blank lines inside", () => {
    expect(text.endsWith("\n")).toBe(true);
    expect(lines.slice(0, -1).every((l) => l.length > 0)).toBe(true);
  });

  it.each([...COUNTERS])("exposes %s with HELP and TYPE counter lines before its samples", (name) => {
    const metric = `scheduler_${name}`;
    const help = lines.indexOf(`# HELP ${metric} ${COUNTER_HELP[name]}`);
    const type = lines.indexOf(`# TYPE ${metric} counter`);
    expect(help).toBeGreaterThanOrEqual(0);
    expect(type).toBe(help + 1);
    const samples = lines.filter((l) => l.startsWith(`${metric} `) || l.startsWith(`${metric}{`));
    expect(samples.length).toBeGreaterThan(0);
    for (const s of samples) expect(lines.indexOf(s)).toBeGreaterThan(type);
  });

  it("writes the summed counter values", () => {
    expect(lines).toContain("scheduler_fired_total 19");
    expect(lines).toContain("scheduler_succeeded_total 7");
    expect(lines).toContain("scheduler_stale_lease_rejects_total 9");
    expect(lines).toContain("scheduler_lease_expired_total 0");
  });

  it("labels dead_total by reason (failure rows: poison, target keeps failing)", () => {
    expect(lines).toContain('scheduler_dead_total{reason="permanent"} 3');
    expect(lines).toContain('scheduler_dead_total{reason="attempts_exhausted"} 1');
    expect(lines).toContain('scheduler_dead_total{reason="poison"} 3');
    expect(lines).not.toContain("scheduler_dead_total 7");
  });

  it("writes dead_total 0 when nothing died", () => {
    expect(toPrometheus(summarize([], null)).split("\n")).toContain("scheduler_dead_total 0");
  });

  it("exposes fire lag as a cumulative histogram ending in +Inf = _count", () => {
    expect(lines).toContain("# TYPE scheduler_fire_lag_ms histogram");
    const buckets = lines.filter((l) => l.startsWith("scheduler_fire_lag_ms_bucket{"));
    expect(buckets.map((l) => /le="([^"]+)"/.exec(l)![1])).toEqual([...LAG_BOUNDS_MS.map(String), "+Inf"]);
    const values = buckets.map((l) => Number(l.split(" ")[1]));
    for (let i = 1; i < values.length; i++) expect(values[i]!).toBeGreaterThanOrEqual(values[i - 1]!);
    expect(buckets).toContain('scheduler_fire_lag_ms_bucket{le="5"} 10');
    expect(buckets).toContain('scheduler_fire_lag_ms_bucket{le="50"} 10');
    expect(buckets).toContain('scheduler_fire_lag_ms_bucket{le="100"} 12');
    expect(buckets).toContain('scheduler_fire_lag_ms_bucket{le="60000"} 12');
    expect(buckets.at(-1)).toBe('scheduler_fire_lag_ms_bucket{le="+Inf"} 13');
    expect(lines).toContain("scheduler_fire_lag_ms_count 13");
  });

  it("every sample line is name{labels} value", () => {
    for (const l of lines.filter((x) => x && !x.startsWith("#"))) {
      expect(l).toMatch(
        /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*\})? -?\d+(\.\d+)?$/,
      );
    }
  });
});

describe("toPrometheus with flow-control keys (issue 13 item 5)", () => {
  const view = (v: Partial<FlowView>): FlowView => ({
    limits: { rate: 10, periodMs: 1_000, parallelism: 2 },
    paused: false,
    throttledUntil: null,
    inFlight: 0,
    waiting: 0,
    currentRate: 0,
    grantedTotal: 0,
    throttledTotal: 0,
    ...v,
  });
  const flow = {
    tenant: "acme",
    keys: [
      { key: "billing-api", view: view({ waiting: 3, inFlight: 2, currentRate: 5, grantedTotal: 12, throttledTotal: 7 }) },
      { key: "origin:https://api.example.com", view: view({ paused: true }) },
      { key: "down", view: null },
    ],
    truncated: true,
  };
  const text = toPrometheus(summarize(parts, null), flow);
  const lines = text.split("\n");

  it("writes each key's view as series labeled {tenant, key}, HELP and TYPE before the samples", () => {
    const at = (series: string) => lines.indexOf(series);
    for (const s of FLOW_KEY_SERIES) {
      const type = at(`# TYPE scheduler_${s.name} ${s.type}`);
      expect(lines[type - 1]).toBe(`# HELP scheduler_${s.name} ${s.help}`);
      const samples = lines.filter((l) => l.startsWith(`scheduler_${s.name}{`));
      expect(samples).toHaveLength(2);
      for (const sample of samples) expect(at(sample)).toBeGreaterThan(type);
    }
    expect(lines).toEqual(
      expect.arrayContaining([
        'scheduler_flow_waiting{tenant="acme",key="billing-api"} 3',
        'scheduler_flow_in_flight{tenant="acme",key="billing-api"} 2',
        'scheduler_flow_current_rate{tenant="acme",key="billing-api"} 5',
        'scheduler_flow_paused{tenant="acme",key="billing-api"} 0',
        'scheduler_flow_granted_total{tenant="acme",key="billing-api"} 12',
        'scheduler_flow_throttled_total{tenant="acme",key="billing-api"} 7',
        'scheduler_flow_paused{tenant="acme",key="origin:https://api.example.com"} 1',
      ]),
    );
  });

  it("leaves out the series of a key whose object did not answer, and counts it; says when keys were left out", () => {
    expect(lines.filter((l) => l.includes('key="down"'))).toEqual([]);
    expect(lines).toContain('scheduler_flow_keys_listed{tenant="acme"} 3');
    expect(lines).toContain('scheduler_flow_keys_unreadable{tenant="acme"} 1');
    expect(lines).toContain('scheduler_flow_keys_truncated{tenant="acme"} 1');
  });

  it("keeps the format: every sample line is name{labels} value, and nothing else changes", () => {
    for (const l of lines.filter((x) => x && !x.startsWith("#"))) {
      expect(l).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*\})? -?\d+$/);
    }
    expect(text.startsWith(toPrometheus(summarize(parts, null)))).toBe(true);
    expect(text.endsWith("\n")).toBe(true);
  });

  it("escapes backslash, double quote and newline in label values", () => {
    const odd = toPrometheus(summarize([], null), { tenant: 'a"b\\c\nd', keys: [{ key: "k", view: view({}) }], truncated: false });
    expect(odd.split("\n")).toContain('scheduler_flow_waiting{tenant="a\\"b\\\\c\\nd",key="k"} 0');
  });
});
