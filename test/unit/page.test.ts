/** Merging bounded scans into one newest-first page (src/core/page.ts): nothing skipped, nothing twice. */
import { describe, expect, it } from "vitest";
import { mergeScans, type Scan } from "../../src/core/page";

const key = (r: { id: string }) => r.id;
const rows = (...ids: string[]) => ids.map((id) => ({ id }));
const scan = (ids: string[], covered: string | null): Scan<{ id: string }> => ({ rows: rows(...ids), covered });

describe("mergeScans", () => {
  it("lists every source's rows newest first when every range is done", () => {
    expect(mergeScans([scan(["e", "b"], null), scan(["d", "a"], null)], key, 10)).toEqual({ page: rows("e", "d", "b", "a"), next: null });
  });

  it("cuts at the limit: the next page starts below the page's last key", () => {
    expect(mergeScans([scan(["e", "b"], null), scan(["d", "a"], null)], key, 3)).toEqual({ page: rows("e", "d", "b"), next: "b" });
  });

  it("keeps only what every source examined: a source that stopped higher holds the others back", () => {
    // the first source examined down to "c" and goes on below it; the second's "a" waits for the next page
    expect(mergeScans([scan(["e"], "c"), scan(["d", "a"], null)], key, 10)).toEqual({ page: rows("e", "d"), next: "c" });
    // a short, even empty, page still carries where the scan stopped
    expect(mergeScans([scan([], "m")], key, 10)).toEqual({ page: [], next: "m" });
  });

  it("takes the highest of the sources' stopping keys", () => {
    expect(mergeScans([scan(["z", "k"], "k"), scan(["y", "p"], "p")], key, 10)).toEqual({ page: rows("z", "y", "p"), next: "p" });
  });

  it("lists a key in two sources once, from the first", () => {
    const live = [{ id: "b", from: "live" }];
    const history = [
      { id: "b", from: "history" },
      { id: "a", from: "history" },
    ];
    expect(
      mergeScans(
        [
          { rows: live, covered: null },
          { rows: history, covered: null },
        ],
        key,
        10,
      ).page,
    ).toEqual([live[0], history[1]]);
  });
});
