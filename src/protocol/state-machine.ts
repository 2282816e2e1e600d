// The task state machine (seed 001 §3, §4) as one table: for each state,
// which message types may arrive and where each one leads. Both sides use
// it: the executor to accept or refuse what the requester sends and to
// check its own events, the requester's client to check what it is told.
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { DecisionAction, TaskState } from "../../gen/synapse/v1/payloads_pb.js";

const S = TaskState;
const M = MessageType;

export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set([S.COMPLETED, S.FAILED, S.CANCELLED, S.REJECTED]);

/** Whether a task in this state is over: completed, failed, cancelled or rejected. */
export function isTerminal(state: TaskState): boolean {
  return TERMINAL_STATES.has(state);
}

/** States that wait for the requester (the task holds no execution slot's attention). */
/** The states in which a task waits for a person's decision. */
export const WAITING_FOR_HUMAN: ReadonlySet<TaskState> = new Set([S.NEED_HUMAN, S.HUMAN_DECIDING]);
export const WAITING_STATES: ReadonlySet<TaskState> = new Set([S.INFO_NEEDED, S.NEED_HUMAN, S.HUMAN_DECIDING]);

/** Where a message leads; `same` keeps the state, `decision` depends on the human's action. */
type Target = TaskState | "same" | "decision";

// Every active (non-terminal) state may be cancelled by the requester.
const CANCEL: Array<[MessageType, Target]> = [[M.TASK_CANCEL, S.CANCELLED]];
// Wherever the executor works, it may report, ask, finish or fail.
const WORKING: Array<[MessageType, Target]> = [
  [M.TASK_STATUS_UPDATE, S.EXECUTING],
  [M.TASK_NEED_INFO, S.INFO_NEEDED],
  [M.TASK_NEED_HUMAN, S.NEED_HUMAN],
  [M.TASK_COMPLETE, S.COMPLETED],
  [M.TASK_FAILED, S.FAILED],
  ...CANCEL,
];

const table = new Map<TaskState, Map<MessageType, Target>>([
  // The requester's own view before sending.
  [S.IDLE, new Map([[M.TASK_REQUEST, S.PENDING]])],
  // Validation: accept, refuse, or ask before accepting.
  [
    S.PENDING,
    new Map<MessageType, Target>([
      [M.TASK_CONFIRM, S.CONFIRMED],
      [M.TASK_REJECT, S.REJECTED],
      [M.TASK_NEED_INFO, S.INFO_NEEDED],
      ...CANCEL,
    ]),
  ],
  [S.CONFIRMED, new Map(WORKING)],
  [S.EXECUTING, new Map(WORKING)],
  [S.INFO_NEEDED, new Map<MessageType, Target>([[M.TASK_INFO_PROVIDED, S.INFO_PROVIDED], [M.TASK_FAILED, S.FAILED], ...CANCEL])],
  // Information arrived: validation may now accept or refuse, or the work goes on.
  [S.INFO_PROVIDED, new Map<MessageType, Target>([[M.TASK_CONFIRM, S.CONFIRMED], [M.TASK_REJECT, S.REJECTED], ...WORKING])],
  // The requester acknowledging a need_human means a human has taken it up. A
  // need_human while one is pending is its escalation to the next level.
  [
    S.NEED_HUMAN,
    new Map<MessageType, Target>([
      [M.HUMAN_DECISION, "decision"],
      [M.TASK_ACK, S.HUMAN_DECIDING],
      [M.TASK_NEED_HUMAN, S.NEED_HUMAN],
      [M.TASK_FAILED, S.FAILED],
      ...CANCEL,
    ]),
  ],
  [
    S.HUMAN_DECIDING,
    new Map<MessageType, Target>([[M.HUMAN_DECISION, "decision"], [M.TASK_NEED_HUMAN, S.NEED_HUMAN], [M.TASK_FAILED, S.FAILED], ...CANCEL]),
  ],
  [S.HUMAN_APPROVED, new Map(WORKING)],
  // A rejection ends the task: the executor's next and last event is task_failed.
  [S.HUMAN_REJECTED, new Map<MessageType, Target>([[M.TASK_FAILED, S.FAILED], ...CANCEL])],
  // Terminal: only the requester's acknowledgement of the outcome.
  [S.COMPLETED, new Map<MessageType, Target>([[M.TASK_ACK, "same"]])],
  [S.FAILED, new Map<MessageType, Target>([[M.TASK_ACK, "same"]])],
  [S.CANCELLED, new Map<MessageType, Target>([[M.TASK_ACK, "same"]])],
  [S.REJECTED, new Map<MessageType, Target>([[M.TASK_ACK, "same"]])],
]);

export type Transition =
  | { allowed: true; next: TaskState }
  | { allowed: false; reason: "terminal" | "illegal" };

/**
 * Where `type` leads from `state`. For human_decision pass the decision's
 * action: approve and modify lead to human_approved, reject to human_rejected.
 */
export function transition(state: TaskState, type: MessageType, action?: DecisionAction): Transition {
  const target = table.get(state)?.get(type);
  if (target === undefined) return { allowed: false, reason: isTerminal(state) ? "terminal" : "illegal" };
  if (target === "same") return { allowed: true, next: state };
  if (target === "decision") {
    if (action === DecisionAction.APPROVE || action === DecisionAction.MODIFY) return { allowed: true, next: S.HUMAN_APPROVED };
    if (action === DecisionAction.REJECT) return { allowed: true, next: S.HUMAN_REJECTED };
    return { allowed: false, reason: "illegal" };
  }
  return { allowed: true, next: target };
}

/** One step the table allows: from a state, by a message type, to a state (a state change only). */
export interface TransitionEdge {
  readonly from: TaskState;
  readonly type: MessageType;
  readonly to: TaskState;
}

/** Every state change the table allows (for drawing the machine); a human decision gives two. */
export function transitionEdges(): TransitionEdge[] {
  const edges: TransitionEdge[] = [];
  for (const [from, targets] of table) {
    for (const [type, target] of targets) {
      if (target === "same") continue;
      if (target === "decision") {
        edges.push({ from, type, to: S.HUMAN_APPROVED }, { from, type, to: S.HUMAN_REJECTED });
      } else if (target !== from) {
        edges.push({ from, type, to: target });
      }
    }
  }
  return edges;
}

/** The message types allowed in a state (for error messages and docs). */
export function allowedMessageTypes(state: TaskState): MessageType[] {
  return [...(table.get(state)?.keys() ?? [])];
}

/** A state's name as the protocol spells it: `TaskState.NEED_HUMAN` is `"need_human"`. */
export function stateName(state: TaskState): string {
  return (TaskState[state] as string | undefined)?.toLowerCase() ?? `state_${state}`;
}
