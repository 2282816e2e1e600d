// Vote deadlines: each open vote is closed and counted when its deadline
// passes, by a timer here; at start every open vote in the store gets one,
// so a deadline that passed while the host was down closes the vote at once.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Vote } from "../../gen/synapse/v1/group_pb.js";
import type { Logger } from "../log.js";
import type { GroupStorage } from "../store/group-storage.js";

const MAX_TIMER_MS = 2 ** 31 - 1;

export class VoteClock {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private stopped = false;
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly storage: GroupStorage,
    /** Closes the vote if it is still open and its deadline has passed. */
    private readonly close: (groupId: string, voteId: string) => Promise<void>,
    private readonly logger: Logger,
    private readonly now: () => number,
  ) {}

  async start(): Promise<void> {
    for (const vote of await this.storage.listOpenVotes(100_000)) this.schedule(vote);
  }

  schedule(vote: Vote): void {
    if (this.stopped || vote.deadline === undefined) return;
    const key = `${vote.groupId}\u0000${vote.voteId}`;
    clearTimeout(this.timers.get(key));
    const deadline = timestampMs(vote.deadline);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      if (deadline > this.now()) return this.schedule(vote); // beyond one timer's reach: wait again
      const work = this.close(vote.groupId, vote.voteId).catch((error: unknown) =>
        this.logger.warn({ err: error, group_id: vote.groupId, vote_id: vote.voteId }, "closing a vote at its deadline failed"),
      );
      this.running.add(work);
      void work.finally(() => this.running.delete(work));
    }, Math.min(MAX_TIMER_MS, Math.max(0, deadline - this.now())));
    timer.unref();
    this.timers.set(key, timer);
  }

  forget(groupId: string, voteId: string): void {
    const key = `${groupId}\u0000${voteId}`;
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.running]);
  }
}
