// Small DOM helpers for the console: find the page's elements by
// data-testid, build elements without innerHTML (every value shown comes
// from the network), and spell protocol values for people.
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { isTerminal, WAITING_STATES } from "../protocol/state-machine.js";

export function byTestId<T extends HTMLElement = HTMLElement>(id: string, type?: new () => T): T {
  const found = document.querySelector(`[data-testid="${id}"]`);
  if (!(found instanceof (type ?? HTMLElement))) throw new Error(`the page has no element ${id}`);
  return found as T;
}

export type Child = Node | string;

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Record<string, string | undefined> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) if (value !== undefined) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number> = {}, ...children: Child[]): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  element.append(...children);
  return element;
}

export function setText(id: string, text: string): void {
  byTestId(id).textContent = text;
}

/** A button that is a button: keyboard focus, Enter and Space for free. */
export function button(label: string, onClick: (event: MouseEvent) => void, attributes: Record<string, string | undefined> = {}): HTMLButtonElement {
  const element = el("button", { type: "button", ...attributes }, label);
  element.addEventListener("click", onClick);
  return element;
}

/** "completed", "info_needed": the enum name without its prefix, as the CLI prints it. */
export function stateName(state: TaskState): string {
  return (TaskState[state] ?? `state_${state}`).toLowerCase();
}

/** How a state reads at a glance: working, waiting (for the requester), done, failed. */
export function stateTone(state: TaskState): "working" | "waiting" | "done" | "failed" | "stopped" {
  if (state === TaskState.COMPLETED) return "done";
  if (state === TaskState.FAILED || state === TaskState.REJECTED || state === TaskState.HUMAN_REJECTED) return "failed";
  if (state === TaskState.CANCELLED) return "stopped";
  if (WAITING_STATES.has(state)) return "waiting";
  return isTerminal(state) ? "stopped" : "working";
}

/**
 * An id as tables show it: its head and tail with "…" between (a UUIDv7's
 * head is its time, so tasks of one second share it; its tail is random).
 * The text is the whole id, the middle only hidden by CSS, so selecting and
 * copying it copies the whole id; the title shows it on hover.
 */
export function idCode(id: string, attributes: Record<string, string> = {}): HTMLElement {
  const code = el("code", { class: "id", title: id, ...attributes });
  if (id.length <= 16) code.append(id);
  else code.append(id.slice(0, 8), el("span", { class: "id-middle" }, id.slice(8, -6)), el("span", { class: "id-tail" }, id.slice(-6)));
  return code;
}

/** A state as a badge. */
export function stateBadge(state: TaskState): HTMLElement {
  const name = stateName(state);
  return el("span", { class: `badge tone-${stateTone(state)}`, "data-state": name }, name.replace(/_/g, " "));
}

export function formatBytes(bytes: bigint | number): string {
  if (Number(bytes) === 1) return "1 byte";
  const units = ["bytes", "KiB", "MiB", "GiB"];
  let value = Number(bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1 && value % 1024 === 0) {
    value /= 1024;
    unit++;
  }
  return `${value} ${units[unit]}`;
}

/** Replaces a container's content. */
export function show(container: Element, ...children: Child[]): void {
  container.replaceChildren(...children);
}

/** A message that an area is empty or loading, styled as such. */
export function note(text: string, attributes: Record<string, string> = {}): HTMLElement {
  return el("p", { class: "note", ...attributes }, text);
}
