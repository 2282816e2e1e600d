package synapse

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// Confidential tasks (PROTOCOL.md §9): a task key wrapped with HPKE to each
// party, every message of the task signed in plaintext and then sealed with
// AES-128-GCM under a key derived from it (the clear header as associated
// data), and the task's result sealed in records.

// Suite is the one confidential suite this kit speaks.
const Suite = synapsev1.ConfidentialSuite_CONFIDENTIAL_SUITE_X25519_HKDF_SHA256_AES128GCM

const (
	// TaskKeySize is the size of a task key.
	TaskKeySize = 32
	// ResultRecordSize is the plaintext size of a sealed result record (the
	// last may be shorter); each sealed record is 16 bytes longer.
	ResultRecordSize = 65536

	nonceSize  = 12
	tagSize    = 16
	aesKeySize = 16
	// DefaultRetiredOverlap is how long a retired encryption key is still
	// opened by default (§9.1).
	DefaultRetiredOverlap = 7 * 24 * time.Hour
)

const (
	taskKeyLabel   = "synapse.v1.TaskKey"
	bindingDomain  = "synapse.v1.EncryptionKeyBinding"
	messageKeyInfo = "synapse.v1.MessageKey"
	aadDomain      = "synapse.v1.Confidential"
	resultKeyInfo  = "synapse.v1.ResultKey"
	resultAAD      = "synapse.v1.ResultRecord"
	recordKeyInfo  = "synapse.v1.RecordKey"
)

// pae is PASETO's pre-authentication encoding of the pieces (§2.1).
func pae(pieces ...[]byte) []byte {
	n := 8
	for _, p := range pieces {
		n += 8 + len(p)
	}
	out := make([]byte, 0, n)
	out = le64(out, uint64(len(pieces)))
	for _, p := range pieces {
		out = le64(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

func decryptionFailed(format string, args ...any) *Refusal {
	return refuse(synapsev1.ErrorCode_ERROR_CODE_DECRYPTION_FAILED, format, args...)
}

func keyUnknown(format string, args ...any) *Refusal {
	return refuse(synapsev1.ErrorCode_ERROR_CODE_ENCRYPTION_KEY_UNKNOWN, format, args...)
}

// ── encryption keys ─────────────────────────────────────────────────────

// EncryptionKey is an agent's X25519 key pair for confidential messages.
type EncryptionKey struct {
	// KeyID is the RFC 7638 thumbprint of the public key (EncryptionKeyID).
	KeyID string
	// PublicKey is the raw 32-byte X25519 public key.
	PublicKey []byte
	// CreatedAt is when the key was made; published in its binding.
	CreatedAt time.Time
	// RetiredUntil is zero on the current key; on a retired key, the time
	// until which messages sealed to it are still opened.
	RetiredUntil time.Time

	private *ecdh.PrivateKey
}

// NewEncryptionKey makes a fresh X25519 key pair.
func NewEncryptionKey() (*EncryptionKey, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return encryptionKeyOf(priv), nil
}

// EncryptionKeyFromBytes is the key pair of a raw 32-byte X25519 private key.
func EncryptionKeyFromBytes(private []byte) (*EncryptionKey, error) {
	priv, err := ecdh.X25519().NewPrivateKey(private)
	if err != nil {
		return nil, fmt.Errorf("synapse: %w", err)
	}
	return encryptionKeyOf(priv), nil
}

func encryptionKeyOf(priv *ecdh.PrivateKey) *EncryptionKey {
	pub := priv.PublicKey().Bytes()
	return &EncryptionKey{KeyID: EncryptionKeyID(pub), PublicKey: pub, CreatedAt: time.Now().Truncate(time.Millisecond), private: priv}
}

// EncryptionKeyFromPEM reads a PKCS#8 PEM X25519 private key, the form of
// the encryption.key file in an agent's data dir.
func EncryptionKeyFromPEM(data []byte) (*EncryptionKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("synapse: no PKCS#8 \"PRIVATE KEY\" PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("synapse: %w", err)
	}
	priv, ok := key.(*ecdh.PrivateKey)
	if !ok || priv.Curve() != ecdh.X25519() {
		return nil, fmt.Errorf("synapse: the key is a %T, not X25519", key)
	}
	return encryptionKeyOf(priv), nil
}

// MarshalPEM encodes the private key as PKCS#8 PEM (keep it secret: mode 0600).
func (k *EncryptionKey) MarshalPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.private)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Retire marks the key retired: published with retired_until and still
// opened for overlap (DefaultRetiredOverlap when not positive), so that a
// new key can take its place (§9.1, rotation).
func (k *EncryptionKey) Retire(overlap time.Duration) {
	if overlap <= 0 {
		overlap = DefaultRetiredOverlap
	}
	k.RetiredUntil = time.Now().Add(overlap)
}

// usable reports whether the key still opens messages at now.
func (k *EncryptionKey) usable(now time.Time) bool {
	return k.RetiredUntil.IsZero() || now.Before(k.RetiredUntil)
}

// EncryptionKeyID is the RFC 7638 thumbprint of an X25519 public key as an
// OKP JWK: base64url (no padding) of SHA-256 over
// {"crv":"X25519","kty":"OKP","x":"<base64url key>"} (§9.1).
func EncryptionKeyID(pub []byte) string {
	jwk := `{"crv":"X25519","kty":"OKP","x":"` + b64url.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(jwk))
	return b64url.EncodeToString(sum[:])
}

// ── bindings ────────────────────────────────────────────────────────────

// SignEncryptionKey binds k to the agent id with its Ed25519 identity key:
// what AgentCapabilities.encryption_keys carries.
func SignEncryptionKey(id *Identity, k *EncryptionKey) (*synapsev1.SignedEncryptionKey, error) {
	b := &synapsev1.EncryptionKeyBinding{
		AgentId: id.AgentID, SigningKeyId: id.KeyID, PublicKey: k.PublicKey, KeyId: k.KeyID,
		Suite: Suite, CreatedAt: timestamppb.New(k.CreatedAt),
	}
	if !k.RetiredUntil.IsZero() {
		b.RetiredUntil = timestamppb.New(k.RetiredUntil)
	}
	binding, err := proto.Marshal(b)
	if err != nil {
		return nil, err
	}
	return &synapsev1.SignedEncryptionKey{Binding: binding, Signature: id.Sign(pae([]byte(bindingDomain), binding))}, nil
}

// VerifyEncryptionKey returns the binding if it is agentID's, signed by
// signingKey (the Ed25519 key the caller's trust binds to that agent), for
// a key whose id is its thumbprint, with this kit's suite.
func VerifyEncryptionKey(signed *synapsev1.SignedEncryptionKey, agentID string, signingKey ed25519.PublicKey) (*synapsev1.EncryptionKeyBinding, error) {
	b := &synapsev1.EncryptionKeyBinding{}
	if err := proto.Unmarshal(signed.GetBinding(), b); err != nil {
		return nil, errors.New("synapse: the binding is not a synapse.v1.EncryptionKeyBinding")
	}
	if b.GetAgentId() != agentID {
		return nil, fmt.Errorf("synapse: the encryption key is bound to %q, not %s", clip(b.GetAgentId()), agentID)
	}
	if len(signingKey) != ed25519.PublicKeySize || b.GetSigningKeyId() != KeyID(signingKey) {
		return nil, errors.New("synapse: the binding names another signing key")
	}
	if len(signed.GetSignature()) != ed25519.SignatureSize || !ed25519.Verify(signingKey, pae([]byte(bindingDomain), signed.GetBinding()), signed.GetSignature()) {
		return nil, errors.New("synapse: the binding's signature does not verify")
	}
	if len(b.GetPublicKey()) != 32 || b.GetKeyId() != EncryptionKeyID(b.GetPublicKey()) {
		return nil, errors.New("synapse: the encryption key id is not the key's thumbprint")
	}
	if b.GetSuite() != Suite {
		return nil, fmt.Errorf("synapse: unknown confidential suite %v", b.GetSuite())
	}
	return b, nil
}

// CurrentEncryptionKey is the key to seal to among an agent's published
// keys: the newest verified binding without retired_until.
func CurrentEncryptionKey(keys []*synapsev1.SignedEncryptionKey, agentID string, signingKey ed25519.PublicKey) (*synapsev1.EncryptionKeyBinding, error) {
	var best *synapsev1.EncryptionKeyBinding
	var last error
	for _, signed := range keys {
		b, err := VerifyEncryptionKey(signed, agentID, signingKey)
		if err != nil {
			last = err
			continue
		}
		if b.GetRetiredUntil() != nil {
			continue
		}
		if best == nil || b.GetCreatedAt().AsTime().After(best.GetCreatedAt().AsTime()) {
			best = b
		}
	}
	if best == nil {
		if last == nil {
			last = errors.New("no current key is published")
		}
		return nil, keyUnknown("agent %s has no usable encryption key: %v", clip(agentID), last)
	}
	return best, nil
}

// ── task keys ───────────────────────────────────────────────────────────

// NewTaskKey is a fresh random task key.
func NewTaskKey() []byte {
	k := make([]byte, TaskKeySize)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return k
}

// TaskKeyID is base64url (no padding) of the first 16 bytes of
// SHA-256("synapse.v1.TaskKey" || key).
func TaskKeyID(taskKey []byte) string {
	h := sha256.New()
	h.Write([]byte(taskKeyLabel))
	h.Write(taskKey)
	return b64url.EncodeToString(h.Sum(nil)[:16])
}

var (
	hpkeKEM  = hpke.DHKEM(ecdh.X25519())
	hpkeKDF  = hpke.HKDFSHA256()
	hpkeAEAD = hpke.AES128GCM()
)

func wrapInfo(taskID string, sender *synapsev1.AgentRef, recipientAgentID, recipientKeyID string) []byte {
	return pae([]byte(taskKeyLabel), []byte(taskID), []byte(sender.GetAgentId()), []byte(sender.GetKeyId()),
		[]byte(recipientAgentID), []byte(recipientKeyID))
}

// WrapTaskKey seals the task key with HPKE to one party's encryption key
// (a binding the caller verified). sender is the request's Header.sender.
func WrapTaskKey(taskKey []byte, taskID string, sender *synapsev1.AgentRef, to *synapsev1.EncryptionKeyBinding) (*synapsev1.WrappedKey, error) {
	pub, err := hpkeKEM.NewPublicKey(to.GetPublicKey())
	if err != nil {
		return nil, fmt.Errorf("synapse: encryption key of %s: %w", clip(to.GetAgentId()), err)
	}
	out, err := hpke.Seal(pub, hpkeKDF, hpkeAEAD, wrapInfo(taskID, sender, to.GetAgentId(), to.GetKeyId()), taskKey)
	if err != nil {
		return nil, err
	}
	return &synapsev1.WrappedKey{AgentId: to.GetAgentId(), KeyId: to.GetKeyId(), Enc: out[:32], Ciphertext: out[32:]}, nil
}

// UnwrapTaskKey opens the task key wrapped to self with one of its keys
// (current, or retired and still within its overlap at now) and checks it
// against conf.task_key_id. taskID and sender are the request's.
func UnwrapTaskKey(conf *synapsev1.Confidentiality, taskID string, sender *synapsev1.AgentRef, self string, keys []*EncryptionKey, now time.Time) ([]byte, error) {
	var mine []*synapsev1.WrappedKey
	for _, w := range conf.GetKeys() {
		if w.GetAgentId() == self {
			mine = append(mine, w)
		}
	}
	if len(mine) == 0 {
		return nil, keyUnknown("the task key is not wrapped to %s", clip(self))
	}
	for _, w := range mine {
		for _, k := range keys {
			if k == nil || k.KeyID != w.GetKeyId() || !k.usable(now) {
				continue
			}
			priv, err := hpke.NewDHKEMPrivateKey(k.private)
			if err != nil {
				return nil, err
			}
			ct := append(append([]byte(nil), w.GetEnc()...), w.GetCiphertext()...)
			taskKey, err := hpke.Open(priv, hpkeKDF, hpkeAEAD, wrapInfo(taskID, sender, self, w.GetKeyId()), ct)
			if err != nil || len(taskKey) != TaskKeySize {
				return nil, decryptionFailed("the wrapped task key does not open")
			}
			if TaskKeyID(taskKey) != conf.GetTaskKeyId() {
				return nil, decryptionFailed("the wrapped task key does not match header.confidential.task_key_id")
			}
			return taskKey, nil
		}
	}
	return nil, keyUnknown("the task key is wrapped to key %s, which this agent does not hold (or holds no longer)", clip(mine[0].GetKeyId()))
}
