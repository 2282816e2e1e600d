package synapse

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// Peer is another agent as a receiver knows it: its id and the key that
// speaks for it.
type Peer struct {
	AgentID   string
	KeyID     string
	PublicKey ed25519.PublicKey
}

// Ref is the peer as a header's receiver (agent id and the key id it expects).
func (p Peer) Ref() *synapsev1.AgentRef {
	return &synapsev1.AgentRef{AgentId: p.AgentID, KeyId: p.KeyID}
}

// PeerFromCapabilities is the agent that GetCapabilities declared, after
// checking that its key id is the thumbprint of its 32-byte public key.
func PeerFromCapabilities(c *synapsev1.AgentCapabilities) (Peer, error) {
	if c.GetAgentId() == "" {
		return Peer{}, errors.New("synapse: the capabilities carry no agent_id")
	}
	if len(c.GetPublicKey()) != ed25519.PublicKeySize {
		return Peer{}, fmt.Errorf("synapse: the capabilities carry a %d-byte public key, not 32", len(c.GetPublicKey()))
	}
	if KeyID(c.GetPublicKey()) != c.GetKeyId() {
		return Peer{}, fmt.Errorf("synapse: key_id %q is not the thumbprint of the declared public key", c.GetKeyId())
	}
	return Peer{AgentID: c.GetAgentId(), KeyID: c.GetKeyId(), PublicKey: c.GetPublicKey()}, nil
}

// Verdict is a trust policy's answer about an (agent id, key) pair.
type Verdict int

const (
	// Unknown: nothing vouches for the key speaking for the agent id.
	Unknown Verdict = iota
	// Trusted: the key speaks for the agent id.
	Trusted
	// Conflict: another key is known for the agent id.
	Conflict
)

// TrustPolicy decides which key may speak for which agent id (PROTOCOL.md
// §5.8). Open and VerifyToken consult it.
type TrustPolicy interface {
	// KeyFor returns the public key the policy knows under keyID, or nil.
	KeyFor(keyID string) ed25519.PublicKey
	// Check tells whether pub (with key id keyID) speaks for agentID.
	Check(agentID, keyID string, pub ed25519.PublicKey) Verdict
}

// Pinner is implemented by policies that learn: Open and VerifyToken call
// Accepted after a message or token passed every check.
type Pinner interface {
	Accepted(agentID, keyID string, pub ed25519.PublicKey)
}

// TrustStore is an in-memory TrustPolicy: a set of known peers and,
// optionally, keys pinned on first use. Only self-certifying agent ids
// (AgentIDFor) are ever pinned on first use, so no stranger can claim an id
// before its owner does. It is safe for concurrent use.
type TrustStore struct {
	firstUse bool
	mu       sync.RWMutex
	byAgent  map[string]Peer
	byKey    map[string]Peer
}

// NewTrustStore trusts exactly the given peers.
func NewTrustStore(peers ...Peer) *TrustStore {
	t := &TrustStore{byAgent: map[string]Peer{}, byKey: map[string]Peer{}}
	for _, p := range peers {
		t.Add(p)
	}
	return t
}

// TrustOnFirstUse trusts the given peers and, besides, any self-certifying
// agent id with the key it is derived from, pinning it on first use.
func TrustOnFirstUse(peers ...Peer) *TrustStore {
	t := NewTrustStore(peers...)
	t.firstUse = true
	return t
}

// Add trusts p.PublicKey for p.AgentID (KeyID is computed when empty),
// replacing any key known for that id.
func (t *TrustStore) Add(p Peer) {
	if p.KeyID == "" {
		p.KeyID = KeyID(p.PublicKey)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byAgent[p.AgentID]; ok {
		delete(t.byKey, old.KeyID)
	}
	t.byAgent[p.AgentID] = p
	t.byKey[p.KeyID] = p
}

// KeyFor implements TrustPolicy.
func (t *TrustStore) KeyFor(keyID string) ed25519.PublicKey {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byKey[keyID].PublicKey
}

// Check implements TrustPolicy.
func (t *TrustStore) Check(agentID, keyID string, pub ed25519.PublicKey) Verdict {
	t.mu.RLock()
	known, ok := t.byAgent[agentID]
	t.mu.RUnlock()
	switch {
	case ok && known.KeyID == keyID && known.PublicKey.Equal(pub):
		return Trusted
	case ok:
		return Conflict
	case t.firstUse && IsSelfCertifying(agentID, pub) && KeyID(pub) == keyID:
		return Trusted
	default:
		return Unknown
	}
}

// Accepted implements Pinner: a self-certifying id is pinned to its key.
func (t *TrustStore) Accepted(agentID, keyID string, pub ed25519.PublicKey) {
	if !t.firstUse || !IsSelfCertifying(agentID, pub) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byAgent[agentID]; !ok {
		p := Peer{AgentID: agentID, KeyID: keyID, PublicKey: append(ed25519.PublicKey(nil), pub...)}
		t.byAgent[agentID] = p
		t.byKey[keyID] = p
	}
}

// chain asks each policy in turn: the first that knows a key, or has a
// verdict other than Unknown, decides.
type chain []TrustPolicy

func (c chain) KeyFor(keyID string) ed25519.PublicKey {
	for _, p := range c {
		if k := p.KeyFor(keyID); k != nil {
			return k
		}
	}
	return nil
}

func (c chain) Check(agentID, keyID string, pub ed25519.PublicKey) Verdict {
	for _, p := range c {
		if v := p.Check(agentID, keyID, pub); v != Unknown {
			return v
		}
	}
	return Unknown
}

func (c chain) Accepted(agentID, keyID string, pub ed25519.PublicKey) {
	for _, p := range c {
		if pinner, ok := p.(Pinner); ok {
			pinner.Accepted(agentID, keyID, pub)
			return
		}
	}
}
