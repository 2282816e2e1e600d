// The Synapse console at /console: a requester's (or an operator's) view of
// the agent that serves it, over gRPC-web to the same origin. It holds an
// identity (identity.ts), reads the agent's capabilities and key, and then
// shows the tasks that identity may read (live), each task's path and
// signed history, the questions waiting for an answer, the groups it is in
// when the agent hosts groups, and the registry when the server hosts one. Every call is one any client could make, with
// the same tokens and checks.
import { loadOrCreateIdentity } from "./identity.js";
import { agentView } from "./agent-view.js";
import { GroupsView } from "./groups-view.js";
import { Inbox } from "./inbox.js";
import { identityView } from "./identity-view.js";
import { RegistryView } from "./registry-view.js";
import { onRoute, taskHref, type Route } from "./router.js";
import { capabilitiesService, describeError, executorOf, hostsRegistry, Session } from "./rpc.js";
import { submitView } from "./submit-view.js";
import { TaskDetail } from "./task-detail.js";
import { TaskList } from "./task-list.js";
import { TaskModel } from "./task-model.js";
import { byTestId, note, setText, show } from "./view.js";
import { WatchPool } from "./watch-pool.js";

function showError(error: unknown): void {
  const box = byTestId("error");
  box.textContent = describeError(error);
  box.hidden = false;
}

/** Shows one view (and the task open in it); focus moves to the view's heading when the user navigated. */
function routeTo(route: Route, initial: boolean, detail: TaskDetail, list: TaskList, registry: RegistryView | undefined, groups: GroupsView | undefined): void {
  for (const section of document.querySelectorAll<HTMLElement>("main > section[data-view]")) section.hidden = section.dataset.view !== route.view;
  for (const link of document.querySelectorAll<HTMLAnchorElement>("nav a[data-route]")) {
    if (link.dataset.route === route.view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (route.view === "registry" && registry === undefined) {
    show(byTestId("view-registry"), note("This server hosts no registry (start it with --registry)."));
  }
  if (route.view === "groups" && groups === undefined) {
    show(byTestId("view-groups"), note("This agent hosts no groups (synapse serve does; an embedded agent with serveAgent({ groups: true }))."));
  }
  if (route.view === "groups") groups?.open(route.groupId);
  else groups?.close();
  if (route.view === "tasks" && route.taskId !== undefined) {
    detail.open(route.taskId);
    list.select(route.taskId);
  } else {
    // The task page's stream is a connection: give it back when the page is not shown.
    detail.close();
    list.select(undefined);
    if (route.view === "tasks") show(byTestId("task-detail"), note("Choose a task to see its path through the state machine, its signed history and its result."));
  }
  const named = route.taskId ? `Task ${route.taskId.slice(0, 8)}` : route.groupId ? `Group ${route.groupId}` : route.view[0]!.toUpperCase() + route.view.slice(1);
  document.title = `${named} · Synapse console`;
  if (!initial) {
    const heading = route.taskId
      ? document.getElementById("task-title")
      : route.groupId
        ? document.getElementById("group-title")
        : document.querySelector<HTMLElement>(`main > section[data-view="${route.view}"] h2`);
    heading?.setAttribute("tabindex", "-1");
    heading?.focus({ preventScroll: false });
  }
}

async function start(): Promise<void> {
  // WebCrypto (crypto.subtle) and the IndexedDB-kept keys need a secure context.
  if (!isSecureContext) throw new Error("the console needs a secure context: open it over https, or on localhost");
  const held = await loadOrCreateIdentity();
  const { capabilities } = await capabilitiesService.getCapabilities({});
  if (capabilities === undefined) throw new Error("GetCapabilities returned no capabilities");
  const executor = await executorOf(capabilities);
  const session = new Session(held.identity, executor, capabilities, held.encryption);
  const withRegistry = await hostsRegistry();

  setText("agent-title", capabilities.agentName || capabilities.agentId);
  byTestId("agent-title").title = capabilities.agentId;
  setText("whoami", held.identity.agentId);
  byTestId("whoami").title = `key ${held.identity.keyId} (${held.identity.backend})`;

  const model = new TaskModel();
  const pool = new WatchPool(session, model);
  const list = new TaskList(byTestId("task-list"), session, model, pool);
  const detail = new TaskDetail(byTestId("task-detail"), session, model, pool);
  const count = byTestId("inbox-count");
  const inbox = new Inbox(byTestId("view-inbox"), session, model, pool, (n) => {
    count.textContent = String(n);
    count.hidden = n === 0;
    count.setAttribute("aria-label", `${n} waiting for you`);
  });
  submitView(byTestId("view-new"), session, model, (taskId) => {
    location.hash = taskHref(taskId);
    void list.read();
  });
  agentView(byTestId("view-agent"), capabilities, withRegistry);
  identityView(byTestId("view-identity"), held);
  let registry: RegistryView | undefined;
  if (withRegistry) {
    registry = new RegistryView(byTestId("view-registry"));
    byTestId("nav-registry").hidden = false;
    registry.start();
  }
  let groups: GroupsView | undefined;
  if (capabilities.supportGroups) {
    groups = new GroupsView(byTestId("view-groups"), session);
    byTestId("nav-groups").hidden = false;
    groups.start();
  }
  list.start();
  inbox.start();
  onRoute((route, initial) => routeTo(route, initial, detail, list, registry, groups));
  setText("status", "ready");
  byTestId("status").dataset.ready = "true";
}

start().catch((error: unknown) => {
  setText("status", "not ready");
  showError(error);
});
