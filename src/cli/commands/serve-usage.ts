// What `synapse serve --help` prints: every flag and what it does.
export const serveUsage = `usage: synapse serve [--host H] [--port P] [--data-dir DIR] [--tls-cert FILE --tls-key FILE]
                     [--store sqlite|sqlite:PATH|postgres://...|memory] [--store-wait DURATION] [--fsync normal|full]
                     [--retention DURATION] [--run-lease SECONDS]
                     [--trust-store FILE [--tofu]] [--trust-registry URL] [--agent-id ID] [--agent-name NAME] [--system-id ID]
                     [--registry [--lease SECONDS] [--registry-admin KEY_ID]... [--registry-open-names]
                                 [--registry-max-untrusted N] [--registry-rate N]]
                     [--join URL [--advertise-url URL]] [--operator KEY_ID]...
                     [--allow-outbound CIDR|IP|HOST|*.DOMAIN]...
                     [--max-file-size BYTES] [--max-concurrent-tasks N] [--max-task-duration SECONDS]
                     [--max-upload-size BYTES] [--upload-quota BYTES] [--upload-quota-first-use BYTES]
                     [--upload-total BYTES] [--upload-reserve BYTES] [--max-uploads N] [--upload-ttl DURATION]
                     [--escalate-after DURATION [--escalation-contact LEVEL=AGENT_ID]...] [--confidential-only TYPE]...
                     [--task-timeout SECONDS] [--heartbeat-interval SECONDS] [--clock-skew SECONDS]
                     [--max-connections N] [--header-timeout SECONDS] [--body-timeout SECONDS]
                     [--idle-timeout SECONDS] [--write-timeout SECONDS] [--log-level LEVEL]
                     [--no-metrics] [--otlp-endpoint URL] [--heap-growth PERCENT]
                     [--no-a2a] [--a2a-open] [--a2a-skill TASK_TYPE]

Serves the reference agent (CapabilitiesService, P2PService and GroupService) as
gRPC, gRPC-web and Connect on one port. HOST and PORT environment variables are used when the
flags are absent. The agent's identity (agent.key, identity.json) is created in
the data dir on first start and kept.

State (tasks, event logs, seen messages, results, pending callbacks, pinned
keys, the registry) is kept in --store: by default SQLite in <data-dir>/synapse.db
(one process at a time); postgres://user:password@host:port/db (or SYNAPSE_STORE)
for several instances of one agent; memory for tests. --fsync full makes every
SQLite commit survive power loss (normal: a process crash loses nothing
acknowledged). Finished tasks are kept for --retention (default 7d). A task's run
is leased for --run-lease seconds (default 15): another instance takes over a
dead one's tasks after that.

A PostgreSQL store that does not answer at start is waited for (tries with a
growing pause, at most 5 s apart, each logged) for --store-wait (default: as
long as it takes; 0: not at all, exit 1 at once). While the database is
unreachable later, the server stays up: calls that need it fail at once with
UNAVAILABLE (agent_not_ready, retry_after_seconds set), the health status of ""
is NOT_SERVING and synapse_store_up is 0, until it answers again.

--operator KEY_ID (repeatable) names an operator key by its key id (the
43-character thumbprint \`synapse keygen\` prints): a bearer token signed by it
may read every task (GetTask, ListTasks, Watch, ReadResult), as the console
does for an operator. It steers nothing: cancelling, answering and deciding
stay with each task's requester. Everyone else reads only the tasks they
requested, and cannot tell another requester's task exists.

Files larger than --max-file-size travel as uploads: POST /upload
(multipart/form-data, bearer token; \`synapse upload\`) streams one into the
store, at most --max-upload-size bytes (default 1 GiB). One sender's uploads may
hold --upload-quota bytes (default 1 GiB) when --trust-store or --trust-registry
binds its key, and --upload-quota-first-use bytes (default 64 MiB) when it is
known only by first use (its key pinned when it first spoke, or registered at
the registry this server hosts): anyone can be such a sender with a fresh key.
Every sender's uploads together, with those still arriving, hold at most
--upload-total bytes (default 1 GiB), at most --max-uploads of them arrive at
once (default 16; 4 per sender), and no upload takes the data dir's
filesystem below --upload-reserve free bytes (default 512 MiB), which stay for
task writes. Past the total or the reserve an upload is refused with HTTP 507
(resource_exhausted, upload_quota_exceeded, with a retry-after). An upload no
running task uses is dropped --upload-ttl after its last use (default 24h).

A task that asks a human (the reference tasks do with "require_approval": true)
waits for its requester's decision. With --escalate-after each level of the
decision waits DURATION; then it escalates to the contacts named for the next
level (--escalation-contact 2=AGENT_ID, 3=AGENT_ID; repeatable), who alone may
decide there and may read the task from then on; after the last level the task
fails (execution_timeout). Task types declare this policy (GetTaskTypeCapabilities).

Any task may be confidential (synapse submit --confidential): signed, then
encrypted to the agent's X25519 key (encryption.key in the data dir, published
with a signed binding in its capabilities) and kept sealed in the store.
--confidential-only TYPE (repeatable) takes only confidential tasks of TYPE: a
plaintext request is refused (confidentiality_required). synapse keygen
--home DIR --rotate-encryption makes a new key (taken at the next start); the
old one is still opened for --overlap (default 7d).

Senders' keys are pinned on first use (in the store). With
--trust-store only the agents listed there are trusted ({"agents": [{"agent_id",
"public_key" (base64url)}]}); add --tofu to also pin agents it does not list.
--trust-registry URL (implied by --join) also trusts the keys of the agents
registered there.

--registry hosts RegistryService (agent directory and capability catalogue)
beside the agent; agents must heartbeat within --lease (default 30 s).
--registry-admin KEY_ID (repeatable) names an operator key: the key id (the
43-character RFC 7638 thumbprint \`synapse keygen\` prints), never an agent id.
Admins may add static capabilities, change any capability and grant the
permissions matching counts (\`synapse permissions\`); everyone else may change
only the capabilities it registered. An agent id the registry does not hold
yet is registered only with the key it is derived from (agent_ and 32 hex
digits of SHA-256 of the public key, every agent's default id) or with the key
--trust-store binds it to (add --tofu to keep pinning the senders it does not
list); any other name is refused, so nobody claims a name before its owner.
--registry-open-names lets anyone register any name not yet held (and not
bound by --trust-store) with whatever key signs first: for closed or
development networks only. A registration the registry was not told to trust
(any id --trust-store does not bind: self-certifying ids, open names) is
refused (resource_exhausted, with a retry-after) while the directory holds
--registry-max-untrusted agents (default 1000), and beyond --registry-rate new
ones per second from all senders together (default 20); renewing an entry is
never refused. What a registration brought (its directory entry and the
catalogue records of its task types) is removed when it deregisters or is
dropped three leases after its lease ran out; the catalogue's audit events are
kept for --retention. --join URL
registers this agent at that registry on start (reachable at --advertise-url,
default the listening URL), keeps the lease, and deregisters on shutdown.

Callbacks (a task's callback_url) and the registry's confirmation calls go to
public addresses, and to loopback only while the server listens on loopback
only. Private, link-local, multicast and other special-purpose addresses, and
loopback when listening beyond it, are refused unless allowed with
--allow-outbound (repeatable): a CIDR block (10.0.0.0/8), an address, a host
name, or *.domain. Names are checked by every address they resolve to.

Connections are bounded so that slow or stalled clients cannot hold the port:
  --max-connections N       open connections at most (default: 3/4 of the
                            open-file limit, at most 10000; 0: no cap). At the
                            cap the connection waiting longest on its client
                            (still sending headers, then idle, then still
                            sending a body) is closed for the new one; if every
                            connection is being answered, the new one is closed.
  --header-timeout SECONDS  a new connection must send its first request's
                            headers (TLS handshake included) within this, a
                            kept-alive one its next request's (default 20)
  --body-timeout SECONDS    a request body must arrive within this after its
                            headers (default 60)
  --idle-timeout SECONDS    a connection with no call in flight is closed after
                            this (default 60); long streams are not idle
  --write-timeout SECONDS   a response that cannot write anything for this long
                            (its client stopped reading) is cut (default 60)
A timeout of 0 turns it off.

Observability: GET /metrics on the same port answers the server's metrics in
the Prometheus text format (--no-metrics turns it off).

A2A v1.0 (lf.a2a.v1) is served from the same agent and store: gRPC at the
server root and the agent card at /.well-known/agent-card.json (docs/A2A.md);
--no-a2a turns it off. A2A callers authenticate with the same bearer tokens
as GetTask (\`synapse token\`); --a2a-open also admits callers without one, all
as one anonymous requester (for local use; a warning is logged).
--a2a-skill names the task type of A2A messages that name none (default
text_analysis when the agent has it).

--otlp-endpoint URL exports OpenTelemetry traces over OTLP/HTTP to a collector (its base URL,
http://host:4318, or the full .../v1/traces URL); without the flag,
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT do the same,
and with none of them no spans are made. Every log line about a message
carries trace_id, message_id, message_type, task_id, sender, receiver and state.

Memory: --heap-growth PERCENT (default 10) lets the V8 heap grow that far past
what the last full GC kept before the next one; 0 leaves V8's own sizing,
which trades some 60 MB more RSS for fewer full GCs.`;
