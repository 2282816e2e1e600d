"""synapse_kit: a small kit for the Synapse agent-to-agent task protocol over gRPC.

It covers what generated stubs cannot: the Ed25519 envelope rules (signing
input, key ids, the receiver's checks in the order of PROTOCOL.md §2.4),
self-certifying agent ids, EdDSA bearer tokens (§5.4), a requester ``Client``
(send with wait, watch with resume and verified events, get_task, read_result
with resume and the signed SHA-256), confidential tasks (§9: sign, then seal
with a task key wrapped with HPKE to each party's X25519 key) and a minimal
executor, ``Agent``, for a grpcio server.

The messages are the user's: generate proto/synapse/v1 into a directory on
``sys.path`` (the modules are ``synapse.v1.*_pb2``) before using the kit::

    python -m grpc_tools.protoc -I proto --python_out=gen --pyi_out=gen proto/synapse/v1/*.proto

Quick start::

    from synapse_kit import Client, Identity
    with Client.connect("http://127.0.0.1:8080", Identity.generate()) as client:
        sent = client.submit("text_analysis", {"text": "Hello. Agents talk."})
        for item in client.watch(sent.task_id):
            print(item.kind, item.sequence)
"""

from .agent import BASIC_INTERFACES, Agent, Callbacks, Handler, Task, TaskFailure, TaskType
from .client import Client, SendResult, WatchItem, channel_for, is_terminal_event, is_terminal_state, to_dict
from .confidential import (
    ConfidentialKeys,
    EncryptionKey,
    EncryptionKeyRing,
    current_encryption_key,
    encryption_key_id,
    load_encryption_key,
    load_or_create_encryption_key,
    new_task_key,
    open_at_rest,
    open_result,
    save_encryption_key,
    seal_at_rest,
    seal_confidential,
    seal_result,
    sign_encryption_key,
    task_key_id,
    unwrap_task_key,
    verify_encryption_key,
    wrap_task_key,
    wrap_to_binding,
)
from .envelope import (
    DEFAULT_CLOCK_SKEW_SECONDS,
    PROTOCOL_VERSION,
    Opened,
    new_uuid,
    open_envelope,
    payload_class,
    payload_type,
    seal,
    seal_header,
    sign_bytes,
)
from .errors import Refused, error_detail_of, protocol_code, status_code_for
from .keys import Identity, agent_id_for, is_self_certifying, key_id, signing_input, verify
from .tokens import MAX_TOKEN_LIFETIME_SECONDS, TOKEN_CLOCK_TOLERANCE_SECONDS, Caller, bearer_metadata, make_token, verify_token
from .trust import Peer, TrustChain, TrustPolicy, TrustStore, Verdict, trust_on_first_use

__all__ = [
    "BASIC_INTERFACES", "Agent", "Callbacks", "Handler", "Task", "TaskFailure", "TaskType",
    "Client", "SendResult", "WatchItem", "channel_for", "is_terminal_event", "is_terminal_state", "to_dict",
    "ConfidentialKeys", "EncryptionKey", "EncryptionKeyRing", "current_encryption_key", "encryption_key_id", "load_encryption_key",
    "load_or_create_encryption_key", "new_task_key", "open_at_rest", "open_result", "save_encryption_key", "seal_at_rest",
    "seal_confidential", "seal_result", "sign_encryption_key", "task_key_id", "unwrap_task_key", "verify_encryption_key",
    "wrap_task_key", "wrap_to_binding",
    "DEFAULT_CLOCK_SKEW_SECONDS", "PROTOCOL_VERSION", "Opened", "new_uuid", "open_envelope", "payload_class", "payload_type",
    "seal", "seal_header", "sign_bytes",
    "Refused", "error_detail_of", "protocol_code", "status_code_for",
    "Identity", "agent_id_for", "is_self_certifying", "key_id", "signing_input", "verify",
    "MAX_TOKEN_LIFETIME_SECONDS", "TOKEN_CLOCK_TOLERANCE_SECONDS", "Caller", "bearer_metadata", "make_token", "verify_token",
    "Peer", "TrustChain", "TrustPolicy", "TrustStore", "Verdict", "trust_on_first_use",
]
