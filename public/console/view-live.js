// Live: GET /v1/metrics every few seconds; charts of attempts started per second and of the fire
// lag's p50/p95/p99 between reads, and the counters that say something went wrong.
import { api, apiKey } from "./api.js";
import { lineChart } from "./chart.js";
import { duration, errorNotice, fill, h, table } from "./dom.js";
import { sampleBetween } from "./samples.js";

const POLL_MS = 2000;
/** ten minutes of points at POLL_MS */
const KEEP = 300;
const COUNTERS = [
  ["retries_total", "retries"],
  ["duplicates_suppressed_total", "duplicates suppressed"],
  ["stale_lease_rejects_total", "stale-lease rejects"],
  ["lease_expired_total", "leases expired"],
  ["fired_total", "fired"],
  ["succeeded_total", "succeeded"],
  ["failed_attempts_total", "failed attempts"],
  ["redrive_total", "redriven"],
];

/**
 * The points survive leaving the view: coming back shows the last minutes, not an empty chart.
 * They belong to the key that read them (another key may be another tenant).
 * @type {{ key: string | null, last: import("./samples.js").Read | null, samples: import("./samples.js").Sample[] }}
 */
const history = { key: null, last: null, samples: [] };

/**
 * The charts, in order (the lag first), each series a field of a sample (samples.js).
 * @type {{ title: string, unit: string, format: (v: number) => string, series: [string, string][] }[]}
 */
const CHARTS = [
  {
    title: "Fire lag between reads",
    unit: "ms, start − due",
    format: duration,
    series: [
      ["p50", "p50"],
      ["p95", "p95"],
      ["p99", "p99"],
    ],
  },
  {
    title: "Throughput",
    unit: "per second",
    format: (v) => (v >= 10 ? v.toFixed(0) : v.toFixed(1)),
    series: [
      ["attempts started", "startedPerSecond"],
      ["succeeded", "succeededPerSecond"],
    ],
  },
];

/** @type {import("./app.js").View} */
export async function liveView(main) {
  const charts = h("div", { class: "charts" });
  const counters = h("section", { "aria-labelledby": "counters-title" });
  // the point count changes every read: not a live region (a screen reader would announce it every
  // 2 s); a failed read is said in `problems`, once, and cleared by the next good one
  const status = h("p", { class: "note" });
  const problems = h("div", { "aria-live": "polite" });
  fill(
    main,
    h("h1", { tabindex: -1 }, "Live"),
    h("p", {}, `Read every ${POLL_MS / 1000} s; each point covers the attempts started since the read before it.`),
    status,
    problems,
    charts,
    counters,
  );

  async function poll() {
    let metrics;
    try {
      metrics = await api("GET", "/v1/metrics");
    } catch (error) {
      fill(problems, errorNotice(error));
      return;
    }
    if (problems.firstChild) fill(problems);
    const read = { at: Date.now(), metrics };
    const sample = history.last ? sampleBetween(history.last, read) : null;
    history.last = read;
    if (sample) history.samples = [...history.samples, sample].slice(-KEEP);
    draw(metrics);
  }

  /** @param {any} metrics */
  function draw(metrics) {
    const samples = history.samples;
    const times = samples.map((s) => s.at);
    fill(
      status,
      samples.length
        ? `${samples.length} points, the latest at ${new Date(times[times.length - 1] ?? 0).toLocaleTimeString()}.`
        : "Waiting for a second read…",
    );
    fill(
      charts,
      ...CHARTS.map(({ series, ...chart }) =>
        lineChart({
          ...chart,
          times,
          series: series.map(([name, field], i) => ({ name, className: `s${i + 1}`, values: samples.map((s) => s[field]) })),
        }),
      ),
    );
    const dead = Object.entries(metrics.dead_total_by_reason);
    const lag = metrics.fire_lag_ms;
    fill(
      counters,
      h("h2", { id: "counters-title" }, "Totals"),
      table(
        "Counters",
        ["counter", "total"],
        [
          ...COUNTERS.map(([name, label]) =>
            h("tr", { "data-counter": name }, h("th", { scope: "row" }, label), h("td", {}, String(metrics.counters[name] ?? 0))),
          ),
          ...(dead.length ? dead : [["any reason", 0]]).map(([reason, n]) =>
            h("tr", { "data-counter": `dead_total:${reason}` }, h("th", { scope: "row" }, `dead: ${reason}`), h("td", {}, String(n))),
          ),
          h(
            "tr",
            {},
            h("th", { scope: "row" }, "fire lag since start (p50 / p95 / p99)"),
            h("td", {}, `${duration(lag.p50)} / ${duration(lag.p95)} / ${duration(lag.p99)}`),
          ),
        ],
      ),
    );
  }

  if (history.key !== apiKey()) Object.assign(history, { key: apiKey(), last: null, samples: [] });
  if (history.last) draw(history.last.metrics);
  await poll();
  /** a tick while the last read is still out is skipped: reads never overlap or arrive out of order */
  let reading = false;
  const timer = setInterval(() => {
    if (reading) return;
    reading = true;
    void poll().finally(() => {
      reading = false;
    });
  }, POLL_MS);
  return () => clearInterval(timer);
}
