// A group host, assembled on an agent: GroupManager (membership), the
// GroupTaskHandler (group tasks run at the members), the VotingHandler
// (votes and their deadlines), the reader behind GroupService's reads, and
// retention of dissolved groups. The agent must have been created with
// `groups: true`, so that what it declares (GetSupportedInterfaces,
// support_groups) is what it serves.
import { GroupTaskState } from "../../gen/synapse/v1/a2n_pb.js";
import type { GroupTask } from "../../gen/synapse/v1/group_pb.js";
import type { Agent } from "../agent/agent.js";
import { DEFAULT_RETENTION_MS } from "../agent/retention.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import { silentLogger, type Logger } from "../log.js";
import type { GroupStorage } from "../store/group-storage.js";
import { GroupTaskRunner } from "./fanout.js";
import { GroupHandler, type GroupOutcome } from "./host.js";
import { GroupLog } from "./log.js";
import { MemberConnector } from "./members.js";
import { GroupReader } from "./reader.js";
import { isOver } from "./tasks.js";
import { VoteClock } from "./vote-clock.js";

export interface GroupHostOptions {
  agent: Agent;
  /** Where the groups live (Storage.groups, beside the agent's tasks: the replay memory is shared). */
  storage: GroupStorage;
  logger?: Logger;
  /** How long dissolved groups are kept (default 7 days, as finished tasks). */
  retentionMs?: number;
  pruneIntervalMs?: number;
  /** How often watchers of a shared store look for other instances' commits (default 1 s). */
  pollIntervalMs?: number;
  now?: () => number;
}

/** A sub-task just answered, and the sequence of the member's event that asked. */
export interface AnsweredSubtask {
  subtaskId: string;
  memberSequence: bigint;
}

export interface GroupHost {
  readonly reader: GroupReader;
  /** Takes one verified a2n:* message. */
  receive(opened: OpenedEnvelope): Promise<GroupOutcome>;
  /**
   * The group task once it is over or waits for an answer, or after `waitMs`.
   * With `answered`, that sub-task's question (answered just now) does not
   * count as waiting until the member has moved on from it.
   */
  waitForTask(groupId: string, groupTaskId: string, waitMs: number, signal?: AbortSignal, answered?: AnsweredSubtask): Promise<GroupTask | undefined>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createGroupHost(options: GroupHostOptions): GroupHost {
  const { agent, storage } = options;
  if (!agent.provider.getCapabilities().supportGroups) {
    throw new TypeError("the agent does not declare groups: create it with `groups: true` to serve GroupService");
  }
  const logger = options.logger ?? silentLogger;
  const now = options.now ?? Date.now;
  const log = new GroupLog(storage, agent.identity, now, agent.observers);
  const members = new MemberConnector(agent.identity, agent.outbound, logger);
  const runner = new GroupTaskRunner({ log, storage, members, logger, now });
  let handler: GroupHandler | undefined;
  const clock = new VoteClock(storage, (groupId, voteId) => handler!.closeAtDeadline(groupId, voteId), logger, now);
  handler = new GroupHandler({ storage, messages: agent.store, log, members, runner, clock, clockSkewMs: agent.clockSkewMs, now });
  const reader = new GroupReader({
    storage,
    heartbeatIntervalMs: agent.config.heartbeatIntervalMs,
    heartbeat: (agentId) => agent.engine.sealHeartbeat({ agentId, systemId: "", keyId: "" }),
    pollIntervalMs: options.pollIntervalMs,
  });
  const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
  let pruner: NodeJS.Timeout | undefined;

  const stillAsking = (task: GroupTask, answered: AnsweredSubtask | undefined) =>
    answered !== undefined && task.subtasks.some((subtask) => subtask.ref?.subtaskId === answered.subtaskId && subtask.memberSequence === answered.memberSequence);

  return {
    reader,
    receive: (opened) => handler.receive(opened),
    async waitForTask(groupId, groupTaskId, waitMs, signal, answered) {
      const settled = (task: GroupTask | undefined) => task === undefined || isOver(task) || (task.state === GroupTaskState.WAITING && !stillAsking(task, answered));
      const first = await storage.getGroupTask(groupId, groupTaskId);
      if (settled(first) || waitMs <= 0) return first;
      return new Promise((resolve) => {
        let latest = first;
        let done = false;
        const finish = () => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          if (poller !== undefined) clearInterval(poller);
          unsubscribe();
          signal?.removeEventListener("abort", finish);
          resolve(latest);
        };
        const look = () =>
          void storage.getGroupTask(groupId, groupTaskId).then((task) => {
            latest = task ?? latest;
            if (settled(task)) finish();
          }, finish);
        const unsubscribe = storage.onGroupChange((notice) => {
          const task = notice.groupTasks?.find((entry) => entry.groupTaskId === groupTaskId);
          if (notice.groupId !== groupId || task === undefined) return;
          latest = task;
          if (settled(task)) finish();
        });
        const poller = storage.exclusive ? undefined : setInterval(look, options.pollIntervalMs ?? 1000);
        const timer = setTimeout(finish, waitMs);
        signal?.addEventListener("abort", finish, { once: true });
        look();
      });
    },
    async start() {
      await runner.start();
      await clock.start();
      pruner = setInterval(() => {
        storage.pruneGroups(now() - retentionMs, 1000).catch((error: unknown) => logger.warn({ err: error }, "pruning dissolved groups failed"));
      }, options.pruneIntervalMs ?? 60_000);
      pruner.unref();
    },
    async stop() {
      clearInterval(pruner);
      await clock.stop();
      await runner.stop();
      members.close();
    },
  };
}
