// The 14-state task machine drawn as an SVG graph: every state, the steps the
// machine allows (from src/protocol/state-machine.ts), and over them the path
// this task's verified events took, with the current state highlighted.
// Steps into failed and cancelled (possible from almost every state) are
// drawn only when taken, to keep the graph readable.
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { transitionEdges } from "../protocol/state-machine.js";
import type { PathStep } from "./event-log.js";
import { el, stateName, stateTone, svg } from "./view.js";

const S = TaskState;
/** Column and row of each state: the normal flow along the top, questions below, outcomes on the right. */
const LAYOUT = new Map<TaskState, [number, number]>([
  [S.IDLE, [0, 0]],
  [S.PENDING, [1, 0]],
  [S.CONFIRMED, [2, 0]],
  [S.EXECUTING, [3, 0]],
  [S.COMPLETED, [5, 0]],
  [S.INFO_NEEDED, [1, 1]],
  [S.INFO_PROVIDED, [2, 1]],
  [S.HUMAN_APPROVED, [4, 1]],
  [S.REJECTED, [5, 1]],
  [S.NEED_HUMAN, [3, 2]],
  [S.HUMAN_DECIDING, [4, 2]],
  [S.FAILED, [5, 2]],
  [S.HUMAN_REJECTED, [4, 3]],
  [S.CANCELLED, [5, 3]],
]);

const CELL_W = 150;
const CELL_H = 66;
const NODE_W = 126;
const NODE_H = 34;
const MARGIN = 12;
const WIDTH = 6 * CELL_W + 2 * MARGIN - (CELL_W - NODE_W);
const HEIGHT = 4 * CELL_H + 2 * MARGIN - (CELL_H - NODE_H);
/** Steps drawn only when taken. */
const DRAWN_WHEN_TAKEN = new Set([S.FAILED, S.CANCELLED]);

function centre(state: TaskState): [number, number] {
  const [col, row] = LAYOUT.get(state) ?? [0, 0];
  return [MARGIN + col * CELL_W + NODE_W / 2, MARGIN + row * CELL_H + NODE_H / 2];
}

/** Where the line from a node's centre towards (dx, dy) leaves its box. */
function boxExit(cx: number, cy: number, dx: number, dy: number): [number, number] {
  const scale = Math.min(dx === 0 ? Infinity : NODE_W / 2 / Math.abs(dx), dy === 0 ? Infinity : NODE_H / 2 / Math.abs(dy));
  return [cx + dx * scale, cy + dy * scale];
}

/** A slightly curved path from one node to another (curved so that opposite steps do not overlap). */
function edgePath(from: TaskState, to: TaskState): string {
  const [x1, y1] = centre(from);
  const [x2, y2] = centre(to);
  const dx = x2 - x1;
  const dy = y2 - y1;
  const length = Math.hypot(dx, dy);
  const bend = Math.min(40, length * 0.18);
  const mx = (x1 + x2) / 2 - (dy / length) * bend;
  const my = (y1 + y2) / 2 + (dx / length) * bend;
  const [sx, sy] = boxExit(x1, y1, mx - x1, my - y1);
  const [ex, ey] = boxExit(x2, y2, mx - x2, my - y2);
  return `M ${sx.toFixed(1)} ${sy.toFixed(1)} Q ${mx.toFixed(1)} ${my.toFixed(1)} ${ex.toFixed(1)} ${ey.toFixed(1)}`;
}

let graphs = 0;

/** The graph for a path (first step idle, last the current state). `broken` marks a path cut short by an event that did not verify. */
export function stateGraph(path: readonly PathStep[], options: { broken?: boolean } = {}): SVGSVGElement {
  const id = `graph-${++graphs}`;
  const current = path[path.length - 1]?.state ?? S.IDLE;
  const visited = new Set(path.map((step) => step.state));
  const taken = new Set<string>();
  for (let i = 1; i < path.length; i++) taken.add(`${path[i - 1]!.state}>${path[i]!.state}`);
  const words = path.map((step) => stateName(step.state)).join(" → ");

  const root = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "state-graph",
    role: "img",
    "aria-labelledby": `${id}-title`,
    "data-testid": "state-graph",
    "data-current": stateName(current),
  });
  root.append(svg("title", { id: `${id}-title` }, `Task states: ${words}${options.broken ? " (then an event that did not verify)" : ""}`));
  const arrow = (name: string) =>
    svg("marker", { id: `${id}-${name}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: `arrow-${name}` }));
  root.append(svg("defs", {}, arrow("faint"), arrow("taken")));

  const drawn = new Set<string>();
  const edges = svg("g", { class: "edges" });
  for (const edge of transitionEdges()) {
    const key = `${edge.from}>${edge.to}`;
    if (edge.from === edge.to || drawn.has(key)) continue;
    const isTaken = taken.has(key);
    if (!isTaken && DRAWN_WHEN_TAKEN.has(edge.to)) continue;
    drawn.add(key);
    edges.append(
      svg("path", {
        d: edgePath(edge.from, edge.to),
        class: isTaken ? "edge taken" : "edge",
        "marker-end": `url(#${id}-${isTaken ? "taken" : "faint"})`,
        "data-edge": `${stateName(edge.from)}>${stateName(edge.to)}`,
      }),
    );
  }
  // Taken edges on top of the faint ones.
  for (const path of [...edges.querySelectorAll(".edge.taken")]) edges.append(path);
  root.append(edges);

  const nodes = svg("g", { class: "nodes" });
  for (const [state] of LAYOUT) {
    const [cx, cy] = centre(state);
    const classes = ["node"];
    if (visited.has(state)) classes.push("visited");
    if (state === current) classes.push("current", `tone-${stateTone(state)}`);
    nodes.append(
      svg(
        "g",
        { class: classes.join(" "), "data-state": stateName(state), "data-visited": String(visited.has(state)), "data-current": String(state === current) },
        svg("rect", { x: cx - NODE_W / 2, y: cy - NODE_H / 2, width: NODE_W, height: NODE_H, rx: 8 }),
        svg("text", { x: cx, y: cy + 5, "text-anchor": "middle" }, stateName(state).replace(/_/g, " ")),
      ),
    );
  }
  root.append(nodes);
  return root;
}

/** The path in words, under the graph (and for screen readers and tests). */
export function statePath(path: readonly PathStep[], broken: { sequence: bigint; reason: string } | undefined): HTMLElement {
  const list = el("ol", { class: "state-path", "data-testid": "state-path", "aria-label": "States the task passed" });
  for (const step of path) {
    list.append(el("li", { "data-state": stateName(step.state) }, stateName(step.state), step.sequence > 0n ? el("small", {}, ` #${step.sequence}`) : ""));
  }
  if (broken !== undefined) list.append(el("li", { class: "bad", "data-broken": String(broken.sequence) }, `event ${broken.sequence} not verified ✗`));
  return list;
}
