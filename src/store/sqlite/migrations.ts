// The SQLite schema, as numbered migrations applied in order at start. A
// released migration is never edited: a change is a new migration.
export interface Migration {
  version: number;
  description: string;
  sql: string;
}

export const SQLITE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "tasks, event logs, seen messages, results, outbound tasks, callback outbox, pinned keys, registry",
    sql: `
CREATE TABLE tasks (
  task_id TEXT PRIMARY KEY,
  task_type TEXT NOT NULL,
  requester_agent_id TEXT NOT NULL,
  requester_system_id TEXT NOT NULL,
  requester_key_id TEXT NOT NULL,
  executor_agent_id TEXT NOT NULL,
  executor_system_id TEXT NOT NULL,
  executor_key_id TEXT NOT NULL,
  state INTEGER NOT NULL,
  active INTEGER NOT NULL,
  progress INTEGER NOT NULL,
  status_message TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  version INTEGER NOT NULL,
  last_sequence INTEGER NOT NULL,
  request BLOB NOT NULL,
  payload TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  request_message_id TEXT NOT NULL,
  pending_info BLOB,
  pending_decision BLOB,
  decision_deadline_ms INTEGER,
  result BLOB,
  error BLOB,
  rejection BLOB,
  result_stream TEXT,
  execution_attempts INTEGER NOT NULL,
  started_at_ms INTEGER NOT NULL,
  lease_owner TEXT NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  answers TEXT NOT NULL
);
CREATE INDEX tasks_by_requester ON tasks (requester_agent_id, created_at_ms DESC, task_id DESC);
CREATE UNIQUE INDEX tasks_idempotency ON tasks (requester_agent_id, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX tasks_active ON tasks (state, updated_at_ms) WHERE active = 1;
CREATE INDEX tasks_finished ON tasks (updated_at_ms) WHERE active = 0;
CREATE INDEX tasks_decision_deadlines ON tasks (decision_deadline_ms) WHERE decision_deadline_ms IS NOT NULL;

CREATE TABLE task_events (
  task_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  envelope BLOB NOT NULL,
  PRIMARY KEY (task_id, sequence)
) WITHOUT ROWID;

CREATE TABLE seen_messages (
  scope TEXT NOT NULL,
  message_id TEXT NOT NULL,
  sender_agent_id TEXT NOT NULL,
  digest TEXT NOT NULL,
  keep_until_ms INTEGER NOT NULL,
  task_id TEXT,
  reply BLOB,
  PRIMARY KEY (scope, message_id)
) WITHOUT ROWID;
CREATE INDEX seen_messages_expiry ON seen_messages (keep_until_ms);

CREATE TABLE results (
  task_id TEXT PRIMARY KEY,
  total_size INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE result_chunks (
  task_id TEXT NOT NULL,
  chunk INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (task_id, chunk)
);

CREATE TABLE outbound_tasks (
  executor_agent_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  state INTEGER NOT NULL,
  last_sequence INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY (executor_agent_id, task_id)
) WITHOUT ROWID;
CREATE TABLE outbound_events (
  executor_agent_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  envelope BLOB NOT NULL,
  PRIMARY KEY (executor_agent_id, task_id, sequence)
) WITHOUT ROWID;

CREATE TABLE callback_outbox (
  task_id TEXT PRIMARY KEY,
  url TEXT NOT NULL,
  next_sequence INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  next_attempt_at_ms INTEGER NOT NULL,
  status INTEGER NOT NULL,
  last_error TEXT NOT NULL,
  owner TEXT NOT NULL,
  owner_until_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX callback_outbox_due ON callback_outbox (next_attempt_at_ms) WHERE status = 0;

CREATE TABLE pinned_keys (
  agent_id TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  public_key BLOB NOT NULL,
  pinned_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX pinned_keys_by_key ON pinned_keys (key_id);

CREATE TABLE registry_agents (
  agent_id TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  public_key BLOB NOT NULL,
  agent BLOB NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  version INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX registry_agents_by_key ON registry_agents (key_id);

CREATE TABLE catalogue_capabilities (
  id TEXT PRIMARY KEY,
  record BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE catalogue_audit (
  sequence INTEGER PRIMARY KEY,
  capability_id TEXT NOT NULL,
  event BLOB NOT NULL
);
CREATE INDEX catalogue_audit_by_capability ON catalogue_audit (capability_id, sequence);
CREATE TABLE catalogue_meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL
);
INSERT INTO catalogue_meta (id, version) VALUES (1, 0);
`,
  },
  {
    version: 2,
    description: "permission grants of the capability catalogue",
    sql: `
CREATE TABLE catalogue_grants (
  key_id TEXT PRIMARY KEY,
  record BLOB NOT NULL
) WITHOUT ROWID;
`,
  },
  {
    version: 3,
    description: "groups (A2N): groups, their event logs, parties, group tasks and votes",
    sql: `
CREATE TABLE groups (
  group_id TEXT PRIMARY KEY,
  record BLOB NOT NULL,
  version INTEGER NOT NULL,
  last_sequence INTEGER NOT NULL,
  status INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX groups_dissolved ON groups (updated_at_ms) WHERE status = 2;

CREATE TABLE group_events (
  group_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  envelope BLOB NOT NULL,
  PRIMARY KEY (group_id, sequence)
) WITHOUT ROWID;

CREATE TABLE group_parties (
  agent_id TEXT NOT NULL,
  group_id TEXT NOT NULL,
  PRIMARY KEY (agent_id, group_id)
) WITHOUT ROWID;
CREATE INDEX group_parties_by_group ON group_parties (group_id);

CREATE TABLE group_tasks (
  group_id TEXT NOT NULL,
  group_task_id TEXT NOT NULL,
  record BLOB NOT NULL,
  active INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  PRIMARY KEY (group_id, group_task_id)
) WITHOUT ROWID;
CREATE INDEX group_tasks_active ON group_tasks (created_at_ms) WHERE active = 1;

CREATE TABLE group_votes (
  group_id TEXT NOT NULL,
  vote_id TEXT NOT NULL,
  record BLOB NOT NULL,
  open INTEGER NOT NULL,
  deadline_ms INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  PRIMARY KEY (group_id, vote_id)
) WITHOUT ROWID;
CREATE INDEX group_votes_open ON group_votes (deadline_ms) WHERE open = 1;
`,
  },
  {
    version: 4,
    description: "uploads: files sent with POST /upload, in chunks, and the tasks that use them",
    sql: `
CREATE TABLE uploads (
  upload_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  sha256 TEXT,
  size INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  file_name TEXT NOT NULL,
  complete INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  last_used_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX uploads_by_hash ON uploads (owner, sha256) WHERE complete = 1;
CREATE INDEX uploads_unused ON uploads (last_used_at_ms);
CREATE TABLE upload_chunks (
  upload_id TEXT NOT NULL,
  chunk INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (upload_id, chunk)
);
CREATE TABLE upload_users (
  upload_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  PRIMARY KEY (upload_id, task_id)
) WITHOUT ROWID;
`,
  },
  {
    version: 5,
    description: "the trace context, session and correlation ids a task's request carried, for its events and replies",
    sql: `
ALTER TABLE tasks ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN tracestate TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN session_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN correlation_id TEXT NOT NULL DEFAULT '';
`,
  },
  {
    version: 6,
    description: "event logs and seen messages laid out in arrival order, so a commit rewrites a few pages at the end of each table",
    // A task's events were keyed by its random id, and seen messages (with their
    // stored replies) by a random message id: every write landed on a different
    // page of a table of large rows, and each commit wrote all those pages to the
    // WAL. Tasks now carry an arrival number (a stable INTEGER PRIMARY KEY) that
    // keys their events, and seen messages are a rowid table with a small unique
    // index, so new rows fill the last pages and only the indexes on random ids
    // are touched at random.
    sql: `
CREATE TABLE tasks_numbered (
  task_no INTEGER PRIMARY KEY,
  task_id TEXT NOT NULL UNIQUE,
  task_type TEXT NOT NULL,
  requester_agent_id TEXT NOT NULL,
  requester_system_id TEXT NOT NULL,
  requester_key_id TEXT NOT NULL,
  executor_agent_id TEXT NOT NULL,
  executor_system_id TEXT NOT NULL,
  executor_key_id TEXT NOT NULL,
  state INTEGER NOT NULL,
  active INTEGER NOT NULL,
  progress INTEGER NOT NULL,
  status_message TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  version INTEGER NOT NULL,
  last_sequence INTEGER NOT NULL,
  request BLOB NOT NULL,
  payload TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  request_message_id TEXT NOT NULL,
  pending_info BLOB,
  pending_decision BLOB,
  decision_deadline_ms INTEGER,
  result BLOB,
  error BLOB,
  rejection BLOB,
  result_stream TEXT,
  execution_attempts INTEGER NOT NULL,
  started_at_ms INTEGER NOT NULL,
  lease_owner TEXT NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  answers TEXT NOT NULL,
  traceparent TEXT NOT NULL DEFAULT '',
  tracestate TEXT NOT NULL DEFAULT '',
  session_id TEXT NOT NULL DEFAULT '',
  correlation_id TEXT NOT NULL DEFAULT ''
);
INSERT INTO tasks_numbered (
  task_id, task_type, requester_agent_id, requester_system_id, requester_key_id, executor_agent_id,
  executor_system_id, executor_key_id, state, active, progress, status_message, created_at_ms,
  updated_at_ms, version, last_sequence, request, payload, idempotency_key, request_message_id,
  pending_info, pending_decision, decision_deadline_ms, result, error, rejection, result_stream,
  execution_attempts, started_at_ms, lease_owner, lease_until_ms, answers, traceparent, tracestate,
  session_id, correlation_id
)
SELECT
  task_id, task_type, requester_agent_id, requester_system_id, requester_key_id, executor_agent_id,
  executor_system_id, executor_key_id, state, active, progress, status_message, created_at_ms,
  updated_at_ms, version, last_sequence, request, payload, idempotency_key, request_message_id,
  pending_info, pending_decision, decision_deadline_ms, result, error, rejection, result_stream,
  execution_attempts, started_at_ms, lease_owner, lease_until_ms, answers, traceparent, tracestate,
  session_id, correlation_id
FROM tasks ORDER BY created_at_ms, rowid;
DROP TABLE tasks;
ALTER TABLE tasks_numbered RENAME TO tasks;
CREATE INDEX tasks_by_requester ON tasks (requester_agent_id, created_at_ms DESC, task_id DESC);
CREATE UNIQUE INDEX tasks_idempotency ON tasks (requester_agent_id, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX tasks_active ON tasks (state, updated_at_ms) WHERE active = 1;
CREATE INDEX tasks_finished ON tasks (updated_at_ms) WHERE active = 0;
CREATE INDEX tasks_decision_deadlines ON tasks (decision_deadline_ms) WHERE decision_deadline_ms IS NOT NULL;

CREATE TABLE task_events_numbered (
  task_no INTEGER NOT NULL,
  sequence INTEGER NOT NULL,
  envelope BLOB NOT NULL,
  PRIMARY KEY (task_no, sequence)
);
INSERT INTO task_events_numbered (task_no, sequence, envelope)
SELECT tasks.task_no, task_events.sequence, task_events.envelope
FROM task_events JOIN tasks ON tasks.task_id = task_events.task_id ORDER BY tasks.task_no, task_events.sequence;
DROP TABLE task_events;
ALTER TABLE task_events_numbered RENAME TO task_events;

CREATE TABLE seen_messages_in_order (
  scope TEXT NOT NULL,
  message_id TEXT NOT NULL,
  sender_agent_id TEXT NOT NULL,
  digest TEXT NOT NULL,
  keep_until_ms INTEGER NOT NULL,
  task_id TEXT,
  reply BLOB
);
INSERT INTO seen_messages_in_order (scope, message_id, sender_agent_id, digest, keep_until_ms, task_id, reply)
SELECT scope, message_id, sender_agent_id, digest, keep_until_ms, task_id, reply FROM seen_messages ORDER BY keep_until_ms;
DROP TABLE seen_messages;
ALTER TABLE seen_messages_in_order RENAME TO seen_messages;
CREATE UNIQUE INDEX seen_messages_key ON seen_messages (scope, message_id);
CREATE INDEX seen_messages_expiry ON seen_messages (keep_until_ms);
`,
  },
  {
    version: 7,
    description: "a task's payload column is empty when its input is its request's payload (read from the request column)",
    // No table changes: the rows change. A build before this one reads the
    // payload column as JSON and would fail on such a row; the version makes
    // it refuse the database at open, as for any newer schema.
    sql: "SELECT 1",
  },
  {
    version: 8,
    description: "when each catalogue audit event was recorded, so the trail is kept for the retention period",
    // Events recorded before this version count from the upgrade: they are kept one full period.
    sql: `
ALTER TABLE catalogue_audit ADD COLUMN recorded_at_ms INTEGER NOT NULL DEFAULT 0;
UPDATE catalogue_audit SET recorded_at_ms = CAST(strftime('%s', 'now') AS INTEGER) * 1000;
CREATE INDEX catalogue_audit_by_time ON catalogue_audit (recorded_at_ms);
`,
  },
  {
    version: 9,
    description: "A2A push-notification configs, each with its delivery position",
    sql: `
CREATE TABLE a2a_push_configs (
  task_id TEXT NOT NULL,
  config_id TEXT NOT NULL,
  url TEXT NOT NULL,
  token TEXT NOT NULL,
  auth_scheme TEXT NOT NULL,
  auth_credentials TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  delivered_sequence INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  next_attempt_at_ms INTEGER NOT NULL,
  status TEXT NOT NULL,
  last_error TEXT NOT NULL,
  lease_owner TEXT NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  PRIMARY KEY (task_id, config_id)
);
CREATE INDEX a2a_push_configs_active ON a2a_push_configs (created_at_ms) WHERE status = 'active';
`,
  },
  {
    version: 10,
    description: "confidential tasks: the request's wrapped keys, and the task's content sealed; an outbound task's wrapped keys",
    sql: `
ALTER TABLE tasks ADD COLUMN confidential BLOB;
ALTER TABLE tasks ADD COLUMN sealed BLOB;
ALTER TABLE tasks ADD COLUMN sealed_request BLOB;
ALTER TABLE outbound_tasks ADD COLUMN confidential BLOB;
`,
  },
];
