// Small DOM helpers for the console: find the page's elements by
// data-testid, build elements without innerHTML (every value shown comes
// from the network), and spell protocol values for people.
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";

export function byTestId<T extends HTMLElement = HTMLElement>(id: string, type?: new () => T): T {
  const found = document.querySelector(`[data-testid="${id}"]`);
  if (!(found instanceof (type ?? HTMLElement))) throw new Error(`the page has no element ${id}`);
  return found as T;
}

type Child = Node | string;

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Record<string, string> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

export function setText(id: string, text: string): void {
  byTestId(id).textContent = text;
}

/** "completed", "info_needed": the enum name without its prefix, as the CLI prints it. */
export function stateName(state: TaskState): string {
  return (TaskState[state] ?? `state_${state}`).toLowerCase();
}

export function formatBytes(bytes: bigint): string {
  const units = ["bytes", "KiB", "MiB", "GiB"];
  let value = Number(bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1 && value % 1024 === 0) {
    value /= 1024;
    unit++;
  }
  return `${value} ${units[unit]}`;
}
