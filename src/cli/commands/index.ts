// The command table: name, one-line summary, entry point.
import { backup, restore } from "./backup.js";
import { capabilities } from "./capabilities.js";
import { decode } from "./decode.js";
import { keygen } from "./keygen.js";
import { permissions } from "./permissions.js";
import { agents, audit, capability, compliance } from "./registry.js";
import { cancel, decide, provideInfo } from "./respond.js";
import { serve } from "./serve.js";
import { status } from "./status.js";
import { submit } from "./submit.js";
import { tasks } from "./tasks.js";
import { envelope, token } from "./token.js";
import { group } from "./group.js";
import { vote } from "./vote.js";
import { upload } from "./upload.js";
import { watch } from "./watch.js";

export interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

export const commands: Record<string, Command> = {
  serve: { summary: "run the reference agent (all services, one port)", run: serve },
  backup: { summary: "copy a running agent's state and identity into a new directory", run: backup },
  restore: { summary: "bring a backup back into a new data dir", run: restore },
  keygen: { summary: "create or show your agent identity (SYNAPSE_HOME)", run: keygen },
  capabilities: { summary: "show an agent's capabilities and interfaces", run: capabilities },
  decode: { summary: "verify an envelope (JSON on stdin) and print it readably", run: decode },
  submit: { summary: "submit a signed task (--wait for its outcome, --watch its events)", run: submit },
  status: { summary: "show one of your tasks", run: status },
  watch: { summary: "follow a task's signed events (resumes after disconnects)", run: watch },
  tasks: { summary: "list your tasks at an agent", run: tasks },
  cancel: { summary: "cancel one of your tasks", run: cancel },
  "provide-info": { summary: "answer a task's request for information", run: provideInfo },
  decide: { summary: "answer a task's request for a human decision", run: decide },
  upload: { summary: "upload a file (multipart, streamed) for a task to name", run: upload },
  token: { summary: "print a bearer token for curl", run: token },
  envelope: { summary: "print a signed SendRequest (a task_request) for curl", run: envelope },
  agents: { summary: "find agents registered at a registry", run: agents },
  compliance: { summary: "evaluate interfaces against the 18 standard interfaces", run: compliance },
  capability: { summary: "register, list, change and match governed capabilities", run: capability },
  audit: { summary: "show a registry's capability audit trail", run: audit },
  permissions: { summary: "grant, revoke and list the permissions a registry grants keys", run: permissions },
  group: { summary: "create, join and run groups of agents and their group tasks (A2N)", run: group },
  vote: { summary: "start a vote in a group, cast a signed ballot, count it", run: vote },
};
