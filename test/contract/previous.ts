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

export const PREVIOUS = {
  release: "35be0c9",
  schema: schema as unknown as WireJsonSchema,
  samples: samples as unknown as Samples,
};
