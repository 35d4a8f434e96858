// A line chart as inline SVG: a few series over time, a y axis from 0 to a rounded maximum, and a
// table of the same numbers for screen readers (the picture itself is aria-hidden).
import { h, svg } from "./dom.js";

const WIDTH = 640;
const HEIGHT = 180;
const PAD = { left: 44, right: 8, top: 8, bottom: 20 };

/**
 * @typedef {{ name: string, className: string, values: (number | null)[] }} Series
 */

/** A round number at or above `max` (1, 2, 5 × 10^n), so the axis labels read easily. */
function niceCeiling(/** @type {number} */ max) {
  if (max <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

/**
 * @param {{ title: string, unit: string, times: number[], series: Series[], format: (v: number) => string }} chart
 * @returns {HTMLElement}
 */
export function lineChart({ title, unit, times, series, format }) {
  const all = series.flatMap((s) => s.values.filter((v) => v !== null));
  const top = niceCeiling(Math.max(0, ...all.map(Number)));
  const innerWidth = WIDTH - PAD.left - PAD.right;
  const innerHeight = HEIGHT - PAD.top - PAD.bottom;
  const x = (/** @type {number} */ i) => PAD.left + (times.length <= 1 ? innerWidth : (i / (times.length - 1)) * innerWidth);
  const y = (/** @type {number} */ v) => PAD.top + innerHeight - (v / top) * innerHeight;
  const picture = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "chart",
    "aria-hidden": "true",
    "data-points": times.length,
    preserveAspectRatio: "none",
  });
  for (const v of [0, top / 2, top]) {
    picture.append(
      svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(v), y2: y(v), class: "grid" }),
      svg("text", { x: PAD.left - 4, y: y(v) + 4, "text-anchor": "end", class: "axis" }, format(v)),
    );
  }
  for (const s of series) {
    // a null (no attempts in that interval) breaks the line instead of drawing a false zero
    let path = "";
    let pen = "M";
    s.values.forEach((v, i) => {
      if (v === null) pen = "M";
      else {
        path += `${pen}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
        pen = "L";
      }
    });
    picture.append(svg("path", { d: path || "M0,0", class: `line ${s.className}` }));
    s.values.forEach((v, i) => {
      if (v !== null) picture.append(svg("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 3, class: s.className }));
    });
  }
  const legend = h(
    "ul",
    { class: "legend" },
    ...series.map((s) => {
      // the latest interval may have had no attempts: name the latest value there is
      const v = s.values.findLast((x) => x !== null);
      return h(
        "li",
        {},
        h("span", { class: `key ${s.className}`, "aria-hidden": "true" }),
        `${s.name}: ${v === null || v === undefined ? "—" : format(v)}`,
      );
    }),
  );
  // the same numbers as a table, the latest first, for screen readers and for copying
  const rows = times
    .map((at, i) =>
      h(
        "tr",
        {},
        h("th", { scope: "row" }, new Date(at).toLocaleTimeString()),
        ...series.map((s) => {
          const v = s.values[i];
          return h("td", {}, v === null || v === undefined ? "—" : format(v));
        }),
      ),
    )
    .reverse()
    .slice(0, 10);
  // hidden by a wrapper: a table keeps its content's width whatever width it is given, and could
  // widen the page on a narrow screen
  const data = h(
    "div",
    { class: "visually-hidden" },
    h(
      "table",
      {},
      h("caption", {}, `${title} (${unit}), latest first`),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "time"), ...series.map((s) => h("th", { scope: "col" }, s.name)))),
      h("tbody", {}, ...rows),
    ),
  );
  return h("figure", { class: "figure" }, h("figcaption", {}, `${title} (${unit})`), picture, legend, data);
}
