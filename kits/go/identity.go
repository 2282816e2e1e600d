package synapse

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

var b64url = base64.RawURLEncoding

// Identity is an agent's Ed25519 key pair with the ids derived from it.
type Identity struct {
	// AgentID is the agent's id. NewIdentity and IdentityFromSeed set the
	// self-certifying id of the key (see AgentIDFor); an agent may use another
	// id, but then its peers must be told which key belongs to it.
	AgentID string
	// KeyID is the RFC 7638 thumbprint of the public key (see KeyID).
	KeyID string
	// PublicKey is the raw 32-byte Ed25519 public key.
	PublicKey ed25519.PublicKey

	private ed25519.PrivateKey
}

// NewIdentity makes a fresh key pair whose agent id is derived from the key.
func NewIdentity() (*Identity, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	return IdentityFromSeed(seed)
}

// IdentityFromSeed makes the identity of a 32-byte Ed25519 seed (RFC 8032
// private key); its agent id is derived from the key.
func IdentityFromSeed(seed []byte) (*Identity, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("synapse: an Ed25519 seed is %d bytes, not %d", ed25519.SeedSize, len(seed))
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &Identity{AgentID: AgentIDFor(pub), KeyID: KeyID(pub), PublicKey: pub, private: priv}, nil
}

// IdentityFromPEM reads a PKCS#8 PEM Ed25519 private key, the form of the
// agent.key file that `synapse keygen` and `synapse serve` write.
func IdentityFromPEM(data []byte) (*Identity, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("synapse: no PKCS#8 \"PRIVATE KEY\" PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("synapse: %w", err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("synapse: the key is a %T, not Ed25519", key)
	}
	return IdentityFromSeed(priv.Seed())
}

// MarshalPEM encodes the private key as PKCS#8 PEM (keep it secret: mode 0600).
func (id *Identity) MarshalPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(id.private)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Seed returns a copy of the 32-byte private seed.
func (id *Identity) Seed() []byte { return append([]byte(nil), id.private.Seed()...) }

// Sign signs message with pure Ed25519 (RFC 8032).
func (id *Identity) Sign(message []byte) []byte { return ed25519.Sign(id.private, message) }

// Ref is the identity as a header's sender or receiver.
func (id *Identity) Ref() Peer {
	return Peer{AgentID: id.AgentID, KeyID: id.KeyID, PublicKey: id.PublicKey}
}

// KeyID is the RFC 7638 JWK thumbprint of an Ed25519 public key as an OKP
// JWK: base64url (no padding) of SHA-256 over
// {"crv":"Ed25519","kty":"OKP","x":"<base64url key>"} (PROTOCOL.md §2.3).
func KeyID(pub ed25519.PublicKey) string {
	jwk := `{"crv":"Ed25519","kty":"OKP","x":"` + b64url.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(jwk))
	return b64url.EncodeToString(sum[:])
}

// AgentIDFor is the self-certifying agent id of a public key: "agent_" and
// the first 32 lowercase hex digits of SHA-256 over the raw key (§2.3).
func AgentIDFor(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "agent_" + hex.EncodeToString(sum[:16])
}

// IsSelfCertifying reports whether agentID is the id derived from pub, so
// that a receiver may trust it on first use without anyone vouching for it.
func IsSelfCertifying(agentID string, pub ed25519.PublicKey) bool {
	return len(pub) == ed25519.PublicKeySize && agentID == AgentIDFor(pub)
}
