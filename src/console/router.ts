// Where the console is: the location's hash, so that every view and every
// task has an address (bookmark it, go back, open it in another tab).
//   #/tasks  #/tasks/<task id>  #/inbox  #/new  #/registry  #/agent  #/identity

export const VIEWS = ["tasks", "inbox", "new", "registry", "agent", "identity"] as const;
export type View = (typeof VIEWS)[number];

export interface Route {
  view: View;
  taskId?: string;
}

export function currentRoute(hash = location.hash): Route {
  const [view, ...rest] = hash.replace(/^#\/?/, "").split("/");
  const known = VIEWS.find((name) => name === view) ?? "tasks";
  const taskId = known === "tasks" && rest.length > 0 ? decodeURIComponent(rest.join("/")) : undefined;
  return taskId ? { view: known, taskId } : { view: known };
}

export function taskHref(taskId: string): string {
  return `#/tasks/${encodeURIComponent(taskId)}`;
}

/** Calls `listener` with the route now and on every change. */
export function onRoute(listener: (route: Route, initial: boolean) => void): void {
  window.addEventListener("hashchange", () => listener(currentRoute(), false));
  listener(currentRoute(), true);
}
