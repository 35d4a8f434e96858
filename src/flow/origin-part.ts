/**
 * One part of an origin's implicit key (core/origin-key.ts: ORIGIN_KEY_PARTS objects, each its
 * share of the parallelism): what a part does that a job's own key does not. It tells its sibling
 * parts of a target's slow-down, takes over once what the origin's one object held before keys had
 * parts, and, for the API, the parts' views read as one key's.
 */
import type { FlowKeyView, FlowLimits } from "../core/flow";
import type { FlowGate } from "../core/flow-gate";
import { originKeyPart, originPartParallelism } from "../core/origin-key";

/** Another FlowKey object of the same tenant, by key name (a sibling part, or the origin's one object of before parts). */
export interface KeyObject {
  view(): Promise<FlowKeyView>;
  slowDown(until: number): Promise<void>;
}

/** What a part needs of its FlowKey object. */
export interface OriginPartHost {
  readonly gate: FlowGate;
  keyObject(key: string): KeyObject;
  /** how many parts the origin key has now (config ORIGIN_PARALLELISM) */
  partCount(): number;
  /** limits set with PATCH, as the object keeps them (flow_settings "limits") */
  setApiLimits(limits: FlowLimits): void;
  /** keeps a setting in the object's flow_settings */
  put(name: string, value: unknown): void;
}

export class OriginPart {
  constructor(
    private readonly host: OriginPartHost,
    /** which part of which origin key this is */
    readonly of: { originKey: string; part: number },
    /** whether it took over what the origin's one object held before parts (adoptUnsplit) */
    private adopted: boolean,
  ) {}

  /** A target's answer slowed this part down until `until`: the other parts are told (once an episode). */
  async slowOthers(until: number): Promise<void> {
    const { originKey, part: self } = this.of;
    await Promise.all(
      Array.from({ length: this.host.partCount() }, (_, part) =>
        part === self
          ? undefined
          : this.host
              .keyObject(originKeyPart(originKey, part))
              .slowDown(until)
              .catch((error: unknown) => console.error(`slowing part ${part} of ${originKey} down failed`, error)),
      ),
    );
  }

  /**
   * The first time the part is called it takes over what the origin's one object held before keys
   * had parts (a release before ORIGIN_KEY_PARTS): a pause, limits set with PATCH (its share of the
   * parallelism), a slow-down. Once per part (one request); an object that does not answer is asked
   * again on the next call.
   */
  async adoptUnsplit(): Promise<void> {
    if (this.adopted) return;
    const { gate } = this.host;
    const before = await this.host
      .keyObject(this.of.originKey)
      .view()
      .catch((error: unknown) => {
        console.error(`reading origin key ${this.of.originKey} as it was before its parts failed; asked again on the next call`, error);
        return null;
      });
    if (before === null || this.adopted) return;
    if (before.paused) {
      gate.paused = true;
      this.host.put("paused", true);
    }
    if (before.limitsFrom === "api") {
      const { parallelism } = before.limits;
      this.host.setApiLimits({
        ...before.limits,
        parallelism: parallelism === null ? null : originPartParallelism(parallelism, this.of.part, this.host.partCount()),
      });
    }
    if (before.throttledUntil !== null && before.throttledUntil > Date.now()) {
      gate.throttledUntil = before.throttledUntil;
      this.host.put("throttledUntil", before.throttledUntil);
    }
    this.adopted = true;
    this.host.put("adopted", true);
  }
}

/** An origin key's parts' views as one: counts and parallelism added up, paused while any part is, the latest slow-down. */
export function mergedView(views: FlowKeyView[]): FlowKeyView {
  const first = views[0]!;
  const sum = (of: (v: FlowKeyView) => number) => views.reduce((n, v) => n + of(v), 0);
  const until = views.map((v) => v.throttledUntil).filter((t): t is number => t !== null);
  return {
    limits: { ...first.limits, parallelism: first.limits.parallelism === null ? null : sum((v) => v.limits.parallelism ?? 0) },
    limitsFrom: views.some((v) => v.limitsFrom === "api") ? "api" : first.limitsFrom,
    paused: views.some((v) => v.paused),
    throttledUntil: until.length === 0 ? null : Math.max(...until),
    inFlight: sum((v) => v.inFlight),
    waiting: sum((v) => v.waiting),
    currentRate: sum((v) => v.currentRate),
    grantedTotal: sum((v) => v.grantedTotal),
    throttledTotal: sum((v) => v.throttledTotal),
  };
}
