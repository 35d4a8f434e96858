/**
 * Until bucket/protocol.ts takes its types from these schemas: each schema is held equal to the
 * interface 35be0c9 declares, so the snapshot recorded from them (test/contract/35be0c9) is that
 * release's wire. Removed when the interfaces are.
 */
import type * as Declared from "../bucket/protocol";
import type * as Bucket from "./bucket";
import type * as Fire from "./fire";
import { type Same, same } from "./same";

same<Same<Fire.FireRef, Declared.FireRef>>(true);
same<Same<Fire.FireGroup, Declared.FireGroup>>(true);
same<Same<Fire.FireMessage, Declared.FireMessage>>(true);
same<Same<Bucket.JobDefinition, Declared.JobDefinition>>(true);
same<Same<Bucket.Applied, Declared.Applied>>(true);
same<Same<Bucket.ArchiveCount, Declared.ArchiveCount>>(true);
same<Same<Bucket.D1Meter, Declared.D1Meter>>(true);
same<Same<Bucket.RedriveOrder, Declared.RedriveOrder>>(true);
same<Same<Bucket.RedriveResult, Declared.RedriveResult>>(true);
same<Same<Bucket.ExecutionRef, Declared.ExecutionRef>>(true);
same<Same<Bucket.ClaimResult, Declared.ClaimResult>>(true);
same<Same<Bucket.PullOffer, Declared.PullOffer>>(true);
same<Same<Bucket.OfferRef, Declared.OfferRef>>(true);
same<Same<Bucket.OfferedRef, Declared.OfferedRef>>(true);
same<Same<Bucket.OfferedLeaseRef, Declared.OfferedLeaseRef>>(true);
same<Same<Bucket.LeaseGrant, Declared.LeaseGrant>>(true);
same<Same<Bucket.LeaseRef, Declared.LeaseRef>>(true);
same<Same<Bucket.FlowWait, Declared.FlowWait>>(true);
same<Same<Bucket.CompletionReport, Declared.CompletionReport>>(true);
same<Same<Bucket.CompletionResult, Declared.CompletionResult>>(true);
same<Same<Bucket.HeartbeatResult, Declared.HeartbeatResult>>(true);
same<Same<Bucket.PoisonResult, Declared.PoisonResult>>(true);
same<Same<Bucket.LiveExecution, Declared.LiveExecution>>(true);
same<Same<Bucket.AttemptRecord, Declared.AttemptRecord>>(true);
same<Same<Bucket.BucketCounts, Declared.BucketCounts>>(true);
