package synapse

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

type confidentialParty struct {
	AgentID          string `json:"agent_id"`
	Seed             string `json:"ed25519_seed"`
	PublicKey        string `json:"ed25519_public_key"`
	KeyID            string `json:"key_id"`
	X25519Private    string `json:"x25519_private_key"`
	X25519Public     string `json:"x25519_public_key"`
	EncryptionKeyID  string `json:"encryption_key_id"`
	EncryptionKeyHex string `json:"encryption_key_binding_hex"`
}

type confidentialVectors struct {
	VerifyAt   string                       `json:"verify_at"`
	TaskID     string                       `json:"task_id"`
	TaskKeyHex string                       `json:"task_key_hex"`
	TaskKeyID  string                       `json:"task_key_id"`
	Parties    map[string]confidentialParty `json:"parties"`
	Positive   []struct {
		Name         string `json:"name"`
		Opener       string `json:"opener"`
		EnvelopeHex  string `json:"envelope_hex"`
		PlaintextHex string `json:"plaintext_payload_hex"`
		InnerSigHex  string `json:"inner_signature_hex"`
		PayloadType  string `json:"payload_type"`
	} `json:"positive"`
	Negative []struct {
		Name          string `json:"name"`
		Opener        string `json:"opener"`
		EnvelopeHex   string `json:"envelope_hex"`
		ExpectedError string `json:"expected_error"`
		ZeroSignature bool   `json:"zero_signature"`
		ResignWith    string `json:"resign_with_seed"`
	} `json:"negative"`
	Result struct {
		TaskID        string `json:"task_id"`
		ResultSize    int    `json:"result_size"`
		ResultSHA256  string `json:"result_sha256"`
		SealedSize    int    `json:"sealed_size"`
		SealedSHA256  string `json:"sealed_sha256"`
		LastRecordHex string `json:"last_record_hex"`
	} `json:"result"`
}

func loadConfidentialVectors(t *testing.T) *confidentialVectors {
	t.Helper()
	var v confidentialVectors
	readVectors(t, "confidential.json", &v)
	if len(v.Positive) == 0 || len(v.Negative) == 0 || len(v.Parties) == 0 {
		t.Fatal("confidential.json holds no vectors")
	}
	return &v
}

// openAs opens an envelope as the vector's opener: trusting exactly the
// three parties, a request's key unwrapped with the opener's X25519 key,
// any other message's with the task key.
func (v *confidentialVectors) openAs(t *testing.T, opener string, env *synapsev1.Envelope) (*Opened, error) {
	t.Helper()
	var peers []Peer
	for _, p := range v.Parties {
		peers = append(peers, Peer{AgentID: p.AgentID, PublicKey: unhex(t, p.PublicKey)})
	}
	party := v.Parties[opener]
	enc, err := EncryptionKeyFromBytes(unhex(t, party.X25519Private))
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339, v.VerifyAt)
	if err != nil {
		t.Fatal(err)
	}
	taskKey := unhex(t, v.TaskKeyHex)
	return Open(env, OpenOptions{
		Trust: NewTrustStore(peers...),
		Self:  party.AgentID,
		Now:   func() time.Time { return at },
		Confidential: &ConfidentialKeys{
			EncryptionKeys: []*EncryptionKey{enc},
			TaskKey: func(h *synapsev1.Header) []byte {
				if h.GetTaskId() == v.TaskID {
					return taskKey
				}
				return nil
			},
		},
	})
}

func envelopeOf(t *testing.T, hexed string) *synapsev1.Envelope {
	t.Helper()
	env := &synapsev1.Envelope{}
	if err := proto.Unmarshal(unhex(t, hexed), env); err != nil {
		t.Fatal(err)
	}
	return env
}

// resealed is the message sealed again with the task key (same header and
// nonce) around another inner signature, as one holding the task key could.
func resealed(t *testing.T, env *synapsev1.Envelope, taskKey []byte, signature func(header, payload []byte) []byte) *synapsev1.Envelope {
	t.Helper()
	header := &synapsev1.Header{}
	if err := proto.Unmarshal(env.GetHeader(), header); err != nil {
		t.Fatal(err)
	}
	_, payload, err := OpenSealedPayload(env.GetHeader(), header, env.GetPayload(), taskKey)
	if err != nil {
		t.Fatal(err)
	}
	plain := append(signature(env.GetHeader(), payload), payload...)
	sealed := gcm(derivedKey(taskKey, messageKeyInfo, header.GetMessageId())).Seal(nil, header.GetConfidential().GetNonce(), plain, pae([]byte(aadDomain), env.GetHeader()))
	out := proto.Clone(env).(*synapsev1.Envelope)
	out.Payload = sealed
	return out
}

func TestConfidentialVectorsOpen(t *testing.T) {
	v := loadConfidentialVectors(t)
	if got := TaskKeyID(unhex(t, v.TaskKeyHex)); got != v.TaskKeyID {
		t.Fatalf("task_key_id %s, want %s", got, v.TaskKeyID)
	}
	for _, vec := range v.Positive {
		t.Run(vec.Name, func(t *testing.T) {
			o, err := v.openAs(t, vec.Opener, envelopeOf(t, vec.EnvelopeHex))
			if err != nil {
				t.Fatal(err)
			}
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(o.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(o.PlainPayload) != vec.PlaintextHex || hex.EncodeToString(got) != vec.PlaintextHex {
				t.Fatalf("opened to %x, want %s", o.PlainPayload, vec.PlaintextHex)
			}
			if string(o.Payload.ProtoReflect().Descriptor().FullName()) != vec.PayloadType {
				t.Fatalf("payload is a %s, want %s", o.Payload.ProtoReflect().Descriptor().FullName(), vec.PayloadType)
			}
			sig := unhex(t, vec.InnerSigHex)
			if !bytes.Equal(o.InnerSignature, sig) || !ed25519.Verify(o.PublicKey, SigningInput(o.Envelope.GetHeader(), unhex(t, vec.PlaintextHex)), sig) {
				t.Fatal("the inner signature is not the vector's, or does not verify")
			}
			if o.Header.GetConfidential().GetTaskKeyId() != v.TaskKeyID || !o.Confidential() {
				t.Fatal("not opened as a confidential message of the vectors' task")
			}
			// The same envelope is refused to one without the keys.
			_, err = Open(o.Envelope, OpenOptions{Trust: TrustOnFirstUse(Peer{AgentID: o.Header.GetSender().GetAgentId(), PublicKey: o.PublicKey}), Records: true})
			if ProtocolCode(err) != "encryption_key_unknown" {
				t.Fatalf("without keys: %v, want encryption_key_unknown", err)
			}
		})
	}
}

func TestConfidentialVectorsRefused(t *testing.T) {
	v := loadConfidentialVectors(t)
	taskKey := unhex(t, v.TaskKeyHex)
	for _, vec := range v.Negative {
		t.Run(vec.Name, func(t *testing.T) {
			env := envelopeOf(t, vec.EnvelopeHex)
			if vec.ZeroSignature {
				env = resealed(t, env, taskKey, func(_, _ []byte) []byte { return make([]byte, 64) })
			}
			if vec.ResignWith != "" {
				other, err := IdentityFromSeed(unhex(t, vec.ResignWith))
				if err != nil {
					t.Fatal(err)
				}
				env = resealed(t, env, taskKey, func(h, p []byte) []byte { return other.Sign(SigningInput(h, p)) })
			}
			_, err := v.openAs(t, vec.Opener, env)
			if got := ProtocolCode(err); got != vec.ExpectedError {
				t.Fatalf("refused with %q (%v), want %s", got, err, vec.ExpectedError)
			}
		})
	}
}

func TestConfidentialVectorsBindings(t *testing.T) {
	v := loadConfidentialVectors(t)
	for name, p := range v.Parties {
		t.Run(name, func(t *testing.T) {
			enc, err := EncryptionKeyFromBytes(unhex(t, p.X25519Private))
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(enc.PublicKey) != p.X25519Public || enc.KeyID != p.EncryptionKeyID {
				t.Fatalf("X25519 key %x id %s, want %s id %s", enc.PublicKey, enc.KeyID, p.X25519Public, p.EncryptionKeyID)
			}
			signed := &synapsev1.SignedEncryptionKey{}
			if err := proto.Unmarshal(unhex(t, p.EncryptionKeyHex), signed); err != nil {
				t.Fatal(err)
			}
			b, err := VerifyEncryptionKey(signed, p.AgentID, unhex(t, p.PublicKey))
			if err != nil {
				t.Fatal(err)
			}
			if b.GetKeyId() != p.EncryptionKeyID || !bytes.Equal(b.GetPublicKey(), enc.PublicKey) {
				t.Fatalf("binding of key %s", b.GetKeyId())
			}
			cur, err := CurrentEncryptionKey([]*synapsev1.SignedEncryptionKey{signed}, p.AgentID, unhex(t, p.PublicKey))
			if err != nil || cur.GetKeyId() != p.EncryptionKeyID {
				t.Fatalf("current key: %v %v", cur, err)
			}
			if _, err := VerifyEncryptionKey(signed, "agent_someone_else", unhex(t, p.PublicKey)); err == nil {
				t.Fatal("a binding moved to another agent id verifies")
			}
			for other, q := range v.Parties {
				if other != name {
					if _, err := VerifyEncryptionKey(signed, p.AgentID, unhex(t, q.PublicKey)); err == nil {
						t.Fatalf("verifies with %s's signing key", other)
					}
				}
			}
			flipped := proto.Clone(signed).(*synapsev1.SignedEncryptionKey)
			flipped.Signature[0] ^= 1
			if _, err := VerifyEncryptionKey(flipped, p.AgentID, unhex(t, p.PublicKey)); err == nil {
				t.Fatal("a binding with a damaged signature verifies")
			}
		})
	}
}

func TestConfidentialVectorsResult(t *testing.T) {
	v := loadConfidentialVectors(t)
	taskKey := unhex(t, v.TaskKeyHex)
	plain := make([]byte, v.Result.ResultSize)
	for i := range plain {
		plain[i] = byte(i % 251)
	}
	if sum := sha256.Sum256(plain); hex.EncodeToString(sum[:]) != v.Result.ResultSHA256 {
		t.Fatal("the result plaintext is not the vectors'")
	}
	sealed := SealResult(taskKey, v.Result.TaskID, plain)
	if len(sealed) != v.Result.SealedSize {
		t.Fatalf("sealed %d bytes, want %d", len(sealed), v.Result.SealedSize)
	}
	if sum := sha256.Sum256(sealed); hex.EncodeToString(sum[:]) != v.Result.SealedSHA256 {
		t.Fatalf("sealed SHA-256 %x, want %s", sum, v.Result.SealedSHA256)
	}
	if got := hex.EncodeToString(sealed[ResultRecordSize+tagSize:]); got != v.Result.LastRecordHex {
		t.Fatalf("last record %s, want %s", got, v.Result.LastRecordHex)
	}
	opened, err := OpenResult(taskKey, v.Result.TaskID, sealed)
	if err != nil || !bytes.Equal(opened, plain) {
		t.Fatalf("does not open back: %v", err)
	}
	if _, err := OpenResult(taskKey, v.Result.TaskID, sealed[:ResultRecordSize+tagSize]); ProtocolCode(err) != "decryption_failed" {
		t.Fatalf("a stream cut after its first record: %v, want decryption_failed", err)
	}
	if _, err := OpenResult(taskKey, "another-task", sealed); ProtocolCode(err) != "decryption_failed" {
		t.Fatalf("another task's id: %v, want decryption_failed", err)
	}
	empty := SealResult(taskKey, v.Result.TaskID, nil)
	if len(empty) != tagSize {
		t.Fatalf("an empty result seals to %d bytes, want one empty record", len(empty))
	}
	if got, err := OpenResult(taskKey, v.Result.TaskID, empty); err != nil || len(got) != 0 {
		t.Fatalf("the empty result: %v", err)
	}
}

func TestConfidentialRoundTrip(t *testing.T) {
	requester, _ := NewIdentity()
	executor, _ := NewIdentity()
	rk, _ := NewEncryptionKey()
	ek, _ := NewEncryptionKey()
	pem, err := ek.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := EncryptionKeyFromPEM(pem); err != nil || back.KeyID != ek.KeyID {
		t.Fatalf("PEM round trip: %v", err)
	}
	eb, _ := SignEncryptionKey(executor, ek)
	rb, _ := SignEncryptionKey(requester, rk)
	toExec, err := VerifyEncryptionKey(eb, executor.AgentID, executor.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	toSelf, _ := VerifyEncryptionKey(rb, requester.AgentID, requester.PublicKey)
	taskKey, taskID := NewTaskKey(), NewUUID()
	sender := &synapsev1.AgentRef{AgentId: requester.AgentID, KeyId: requester.KeyID}
	w1, err := WrapTaskKey(taskKey, taskID, sender, toExec)
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := WrapTaskKey(taskKey, taskID, sender, toSelf)
	if len(w1.GetEnc()) != 32 || len(w1.GetCiphertext()) != 48 {
		t.Fatalf("wrapped key: enc %d, ciphertext %d bytes", len(w1.GetEnc()), len(w1.GetCiphertext()))
	}
	env, _, err := SealConfidential(requester, Message{
		Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST, Receiver: executor.Ref(), TaskID: taskID,
		Payload: &synapsev1.TaskRequestPayload{Task: &synapsev1.TaskSpec{Id: taskID, Type: "echo"}},
	}, Sealing{TaskKey: taskKey, Keys: []*synapsev1.WrappedKey{w1, w2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(env.GetSignature().GetValue()) != 0 || bytes.Contains(env.GetPayload(), []byte("echo")) {
		t.Fatal("the envelope shows its signature or its payload")
	}
	opened, err := Open(env, OpenOptions{Trust: TrustOnFirstUse(), Self: executor.AgentID, Confidential: &ConfidentialKeys{EncryptionKeys: []*EncryptionKey{ek}}})
	if err != nil || !bytes.Equal(opened.TaskKey, taskKey) {
		t.Fatalf("open: %v", err)
	}
	// After a rotation the new key is the one to seal to; the retired one
	// still opens within its overlap, and no longer after it.
	newer, _ := NewEncryptionKey()
	newer.CreatedAt = ek.CreatedAt.Add(time.Second)
	ek.Retire(0)
	if d := time.Until(ek.RetiredUntil); d < DefaultRetiredOverlap-time.Minute || d > DefaultRetiredOverlap {
		t.Fatalf("retired for %v", d)
	}
	retired, _ := SignEncryptionKey(executor, ek)
	fresh, _ := SignEncryptionKey(executor, newer)
	if cur, err := CurrentEncryptionKey([]*synapsev1.SignedEncryptionKey{retired, fresh}, executor.AgentID, executor.PublicKey); err != nil || cur.GetKeyId() != newer.KeyID {
		t.Fatalf("current key after rotation: %v", err)
	}
	if _, err := CurrentEncryptionKey([]*synapsev1.SignedEncryptionKey{retired}, executor.AgentID, executor.PublicKey); ProtocolCode(err) != "encryption_key_unknown" {
		t.Fatalf("only a retired key published: %v", err)
	}
	if _, err := Open(env, OpenOptions{Trust: TrustOnFirstUse(), Self: executor.AgentID, Confidential: &ConfidentialKeys{EncryptionKeys: []*EncryptionKey{newer, ek}}}); err != nil {
		t.Fatalf("within the overlap: %v", err)
	}
	ek.RetiredUntil = time.Now().Add(-time.Second)
	if _, err := Open(env, OpenOptions{Trust: TrustOnFirstUse(), Self: executor.AgentID, Confidential: &ConfidentialKeys{EncryptionKeys: []*EncryptionKey{ek}}}); ProtocolCode(err) != "encryption_key_unknown" {
		t.Fatalf("past the overlap: %v", err)
	}
	// The requester reads its own request back with its own key.
	if _, err := UnwrapTaskKey(opened.Header.GetConfidential(), taskID, sender, requester.AgentID, []*EncryptionKey{rk}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// A wrapped key moved to a request from someone else does not open.
	if _, err := UnwrapTaskKey(opened.Header.GetConfidential(), taskID, &synapsev1.AgentRef{AgentId: executor.AgentID, KeyId: executor.KeyID}, requester.AgentID, []*EncryptionKey{rk}, time.Now()); ProtocolCode(err) != "decryption_failed" {
		t.Fatalf("moved wrapped key: %v", err)
	}
	atRest := SealAtRest(taskKey, taskID, []byte("secret"))
	if got, err := OpenAtRest(taskKey, taskID, atRest); err != nil || string(got) != "secret" {
		t.Fatalf("at rest: %v", err)
	}
	if _, err := OpenAtRest(taskKey, "other", atRest); ProtocolCode(err) != "decryption_failed" {
		t.Fatalf("at rest under another task id: %v", err)
	}
}
