// Every (state, message type) pair of the task state machine against an
// expectation table written out independently of the implementation.
import { describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { DecisionAction, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { isTerminal, transition, transitionEdges } from "../src/protocol/state-machine.js";

const S = TaskState;
const M = MessageType;
const states = Object.values(TaskState).filter((v): v is TaskState => typeof v === "number" && v !== S.UNSPECIFIED);
const types = Object.values(MessageType).filter((v): v is MessageType => typeof v === "number" && v !== M.UNSPECIFIED && v < 100);

// state -> { message type -> next state ("approve/reject" for decisions) }.
const work = {
  [M.TASK_STATUS_UPDATE]: S.EXECUTING,
  [M.TASK_NEED_INFO]: S.INFO_NEEDED,
  [M.TASK_NEED_HUMAN]: S.NEED_HUMAN,
  [M.TASK_COMPLETE]: S.COMPLETED,
  [M.TASK_FAILED]: S.FAILED,
  [M.TASK_CANCEL]: S.CANCELLED,
};
const expected: Record<number, Partial<Record<number, TaskState | "decision">>> = {
  [S.IDLE]: { [M.TASK_REQUEST]: S.PENDING },
  [S.PENDING]: { [M.TASK_CONFIRM]: S.CONFIRMED, [M.TASK_REJECT]: S.REJECTED, [M.TASK_NEED_INFO]: S.INFO_NEEDED, [M.TASK_CANCEL]: S.CANCELLED },
  [S.CONFIRMED]: work,
  [S.EXECUTING]: work,
  [S.INFO_NEEDED]: { [M.TASK_INFO_PROVIDED]: S.INFO_PROVIDED, [M.TASK_FAILED]: S.FAILED, [M.TASK_CANCEL]: S.CANCELLED },
  [S.INFO_PROVIDED]: { ...work, [M.TASK_CONFIRM]: S.CONFIRMED, [M.TASK_REJECT]: S.REJECTED },
  // A need_human while one is pending escalates it (EscalationHandler).
  [S.NEED_HUMAN]: { [M.HUMAN_DECISION]: "decision", [M.TASK_ACK]: S.HUMAN_DECIDING, [M.TASK_NEED_HUMAN]: S.NEED_HUMAN, [M.TASK_FAILED]: S.FAILED, [M.TASK_CANCEL]: S.CANCELLED },
  [S.HUMAN_DECIDING]: { [M.HUMAN_DECISION]: "decision", [M.TASK_NEED_HUMAN]: S.NEED_HUMAN, [M.TASK_FAILED]: S.FAILED, [M.TASK_CANCEL]: S.CANCELLED },
  [S.HUMAN_APPROVED]: work,
  [S.HUMAN_REJECTED]: { [M.TASK_FAILED]: S.FAILED, [M.TASK_CANCEL]: S.CANCELLED },
  [S.COMPLETED]: { [M.TASK_ACK]: S.COMPLETED },
  [S.FAILED]: { [M.TASK_ACK]: S.FAILED },
  [S.CANCELLED]: { [M.TASK_ACK]: S.CANCELLED },
  [S.REJECTED]: { [M.TASK_ACK]: S.REJECTED },
};

describe("task state machine", () => {
  it("has all 14 states and 17 message types", () => {
    expect(states).toHaveLength(14);
    expect(types).toHaveLength(17);
  });

  for (const state of states) {
    for (const type of types) {
      const want = expected[state]?.[type];
      it(`${TaskState[state]} + ${MessageType[type]} -> ${want === undefined ? "refused" : typeof want === "number" ? TaskState[want] : want}`, () => {
        if (want === undefined) {
          const result = transition(state, type, DecisionAction.APPROVE);
          expect(result).toEqual({ allowed: false, reason: isTerminal(state) ? "terminal" : "illegal" });
        } else if (want === "decision") {
          expect(transition(state, type, DecisionAction.APPROVE)).toEqual({ allowed: true, next: S.HUMAN_APPROVED });
          expect(transition(state, type, DecisionAction.MODIFY)).toEqual({ allowed: true, next: S.HUMAN_APPROVED });
          expect(transition(state, type, DecisionAction.REJECT)).toEqual({ allowed: true, next: S.HUMAN_REJECTED });
          expect(transition(state, type, DecisionAction.UNSPECIFIED)).toEqual({ allowed: false, reason: "illegal" });
        } else {
          expect(transition(state, type)).toEqual({ allowed: true, next: want });
        }
      });
    }
  }

  it("never leaves a terminal state", () => {
    for (const state of states.filter(isTerminal)) {
      for (const type of types) {
        const result = transition(state, type, DecisionAction.APPROVE);
        if (result.allowed) expect(result.next).toBe(state);
      }
    }
  });

  it("lists as edges exactly the state changes of the table (what the console draws)", () => {
    const want: string[] = [];
    for (const [from, targets] of Object.entries(expected)) {
      for (const [type, to] of Object.entries(targets)) {
        const tos = to === "decision" ? [S.HUMAN_APPROVED, S.HUMAN_REJECTED] : [to];
        for (const next of tos) if (next !== Number(from)) want.push(`${TaskState[Number(from)]} ${MessageType[Number(type)]} ${TaskState[next!]}`);
      }
    }
    const got = transitionEdges().map((edge) => `${TaskState[edge.from]} ${MessageType[edge.type]} ${TaskState[edge.to]}`);
    expect(got.sort()).toEqual(want.sort());
  });
});
