// Where the console is: the location's hash, so that every view, every
// task and every group has an address (bookmark it, go back, open it in
// another tab).
//   #/tasks  #/tasks/<task id>  #/inbox  #/new  #/groups  #/groups/<group id>  #/registry  #/agent  #/identity

export const VIEWS = ["tasks", "inbox", "new", "groups", "registry", "agent", "identity"] as const;
export type View = (typeof VIEWS)[number];

export interface Route {
  view: View;
  taskId?: string;
  groupId?: string;
}

export function currentRoute(hash = location.hash): Route {
  const [view, ...rest] = hash.replace(/^#\/?/, "").split("/");
  const known = VIEWS.find((name) => name === view) ?? "tasks";
  const id = rest.length > 0 ? decodeURIComponent(rest.join("/")) : undefined;
  if (id && known === "tasks") return { view: known, taskId: id };
  if (id && known === "groups") return { view: known, groupId: id };
  return { view: known };
}

export function taskHref(taskId: string): string {
  return `#/tasks/${encodeURIComponent(taskId)}`;
}

export function groupHref(groupId: string): string {
  return `#/groups/${encodeURIComponent(groupId)}`;
}

/** Calls `listener` with the route now and on every change. */
export function onRoute(listener: (route: Route, initial: boolean) => void): void {
  window.addEventListener("hashchange", () => listener(currentRoute(), false));
  listener(currentRoute(), true);
}
