// The webhook target of DELIVER=http, in a process of its own (forked by timed.mjs), so its CPU is
// measured apart and kept out of the peer's, as `npm run bench` keeps its target out of the
// runtime's. It is the project's one loopback receiver (test/support/receiver.mjs: keep-alive on
// 127.0.0.1, 200 once the body is read) and records what the bench's target records: when each
// request's headers arrived, its webhook-id and the job index in its body.
//   IPC: -> {type: "ready", url}; "count" -> {type: "count", requests}; "dump" -> the arrivals, then it exits.
import { OK, startReceiver } from "../../test/support/receiver.mjs";

/** flat records, cheap to keep and to send: index, arrival time, webhook-id */
const indexes = [];
const ats = [];
const ids = [];

const receiver = await startReceiver({
  respond: () => OK,
  onRequest: (request) => {
    let i = -1;
    try {
      i = JSON.parse(request.body).i;
    } catch {
      /* not a bench job: counted as unmatched */
    }
    indexes.push(i);
    ats.push(request.at);
    ids.push(request.webhookId);
  },
});

process.on("message", (message) => {
  if (message.type === "count") process.send?.({ type: "count", requests: ats.length });
  if (message.type === "dump") {
    process.send?.({ type: "dump", indexes, ats, ids }, () => {
      void receiver.stop().then(() => process.exit(0));
    });
  }
});
process.on("SIGTERM", () => {
  void receiver.stop().then(() => process.exit(0));
});
process.send?.({ type: "ready", url: receiver.url });
