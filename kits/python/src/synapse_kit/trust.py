"""Who may speak for which agent id (docs/PROTOCOL.md §5.8)."""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from .keys import PUBLIC_KEY_LENGTH, is_self_certifying, key_id


@dataclass(frozen=True)
class Peer:
    """Another agent as a receiver knows it: its id and the key that speaks for it."""

    agent_id: str
    public_key: bytes
    key_id: str = ""

    def __post_init__(self) -> None:
        if not self.key_id and self.public_key:
            object.__setattr__(self, "key_id", key_id(self.public_key))

    @classmethod
    def from_capabilities(cls, capabilities: Any) -> "Peer":
        """The agent an AgentCapabilities declares, after checking its key id is its key's thumbprint."""
        if not capabilities.agent_id:
            raise ValueError("the capabilities carry no agent_id")
        if len(capabilities.public_key) != PUBLIC_KEY_LENGTH:
            raise ValueError(f"the capabilities carry a {len(capabilities.public_key)}-byte public key, not 32")
        if key_id(capabilities.public_key) != capabilities.key_id:
            raise ValueError(f"key_id {capabilities.key_id!r} is not the thumbprint of the declared public key")
        return cls(capabilities.agent_id, bytes(capabilities.public_key), capabilities.key_id)


class Verdict(enum.Enum):
    """A trust policy's answer about an (agent id, key) pair."""

    UNKNOWN = "unknown"
    TRUSTED = "trusted"
    CONFLICT = "conflict"


class TrustPolicy(Protocol):
    """Decides which keys speak for which agent ids; open_envelope and verify_token consult it."""

    def key_for(self, key_id: str) -> bytes | None:
        """The public key known under key_id, or None."""

    def check(self, agent_id: str, key_id: str, public_key: bytes) -> Verdict:
        """Whether public_key (with key id key_id) speaks for agent_id."""

    def accepted(self, agent_id: str, key_id: str, public_key: bytes) -> None:
        """Called after a message or token passed every check (a chance to pin)."""


class TrustStore:
    """An in-memory trust policy: known peers and, with ``first_use``, keys pinned
    on first use. Only self-certifying agent ids are pinned on first use, so no
    stranger can claim an id before its owner does. Thread-safe."""

    def __init__(self, *peers: Peer, first_use: bool = False) -> None:
        self.first_use = first_use
        self._lock = threading.Lock()
        self._by_agent: dict[str, Peer] = {}
        self._by_key: dict[str, Peer] = {}
        for peer in peers:
            self.add(peer)

    def add(self, peer: Peer) -> None:
        """Trusts peer.public_key for peer.agent_id, replacing any key known for that id."""
        with self._lock:
            old = self._by_agent.get(peer.agent_id)
            if old is not None:
                self._by_key.pop(old.key_id, None)
            self._by_agent[peer.agent_id] = peer
            self._by_key[peer.key_id] = peer

    def key_for(self, key_id: str) -> bytes | None:
        with self._lock:
            peer = self._by_key.get(key_id)
        return peer.public_key if peer else None

    def check(self, agent_id: str, key_id: str, public_key: bytes) -> Verdict:
        with self._lock:
            known = self._by_agent.get(agent_id)
        if known is not None:
            same = known.key_id == key_id and known.public_key == bytes(public_key)
            return Verdict.TRUSTED if same else Verdict.CONFLICT
        if self.first_use and is_self_certifying(agent_id, public_key):
            return Verdict.TRUSTED
        return Verdict.UNKNOWN

    def accepted(self, agent_id: str, key_id: str, public_key: bytes) -> None:
        if not self.first_use or not is_self_certifying(agent_id, public_key):
            return
        with self._lock:
            if agent_id not in self._by_agent:
                peer = Peer(agent_id, bytes(public_key), key_id)
                self._by_agent[agent_id] = peer
                self._by_key[key_id] = peer


def trust_on_first_use(*peers: Peer) -> TrustStore:
    """Trusts the given peers and any self-certifying id with the key it is derived from."""
    return TrustStore(*peers, first_use=True)


class TrustChain:
    """Asks each policy in turn: the first that knows a key, or has a verdict other than UNKNOWN, decides."""

    def __init__(self, *policies: TrustPolicy) -> None:
        self.policies = policies

    def key_for(self, key_id: str) -> bytes | None:
        for policy in self.policies:
            key = policy.key_for(key_id)
            if key is not None:
                return key
        return None

    def check(self, agent_id: str, key_id: str, public_key: bytes) -> Verdict:
        for policy in self.policies:
            verdict = policy.check(agent_id, key_id, public_key)
            if verdict is not Verdict.UNKNOWN:
                return verdict
        return Verdict.UNKNOWN

    def accepted(self, agent_id: str, key_id: str, public_key: bytes) -> None:
        if self.policies:
            self.policies[0].accepted(agent_id, key_id, public_key)
