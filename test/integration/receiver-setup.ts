// A real HTTP target on loopback for the workerd tests (globalSetup, in Node): the shared receiver
// (test/support/receiver.mjs) answering by path, /ok, /fail/<status>[?retryAfter=s], /hang/<ms>,
// /flaky/<n> (fails n times, then 200), and recording: GET /__requests?path=<prefix> returns
// what it received (headers, body and its exact bytes, arrival time), as helpers.ts reads it.
import type { TestProject } from "vitest/node";
import { startReceiver } from "../support/receiver.mjs";

export default async function setup(project: TestProject) {
  const receiver = await startReceiver({ record: true });
  project.provide("receiverUrl", receiver.url);
  return () => receiver.stop();
}
