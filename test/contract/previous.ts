/**
 * The previous release's wire, as recorded when it was cut (README.md here): its JSON Schemas and
 * the samples its code produced. The contract test holds the code now to it, both ways.
 */
import type { WireJsonSchema } from "../../src/protocol/wire";
import samples from "./35be0c9/samples.json";
import schema from "./35be0c9/wire.schema.json";

export interface RpcEvent {
  kind: "rpc";
  object: string;
  method: string;
  args: unknown[];
  /** absent: the method answers nothing */
  result?: unknown;
}

export interface MessageEvent {
  kind: "message";
  queue: string;
  body: unknown;
  /** what the consumer did with it */
  outcome: "acked" | "retried" | "neither";
}

export type WireEvent = RpcEvent | MessageEvent;

/** A release's recorded samples (<release>/samples.json): each flow's events, in the order they ended. */
export interface Samples {
  release: string;
  scenarios: Record<string, WireEvent[]>;
}

/**
 * RPCs this release adds and calls at once, each with why its callers do without it: an object still
 * running the previous release throws for it during a deploy. The contract README's rule is two
 * releases (learn to read, then send); an entry here is the reviewed exception. Emptied when the
 * next release's snapshot is recorded (its objects have them).
 */
export const NEW_RPCS_CALLERS_DO_WITHOUT: Record<string, string> = {
  "FlowKey.slowDown":
    "an origin key's part that hears a target's Retry-After tells the other parts (new with parts: the previous release has one object per origin). A part of the previous release that throws is logged and learns the slow-down from its own deliveries' answers, as before parts.",
};

export const PREVIOUS = {
  release: "35be0c9",
  schema: schema as unknown as WireJsonSchema,
  samples: samples as unknown as Samples,
};
