// Envelope signing and checking for the load generator, after
// interop/go/envelope.go (docs/PROTOCOL.md §2): the PAE signing input, the
// RFC 7638 key id, sealing a message (serialize header and payload once and
// sign exactly those bytes) and opening a reply (verify the received bytes,
// then parse them, then check sender, receiver, version and time).
package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	synapsev1 "synapse-peer-loadgen/gen/synapse/v1"
)

const (
	signingDomain   = "synapse.v1.Envelope"
	protocolVersion = "1.0.0"
	clockSkew       = 300 * time.Second
)

// le64 is PASETO's LE64: little-endian uint64 with the top bit cleared.
func le64(n uint64) []byte {
	return binary.LittleEndian.AppendUint64(nil, n&^(1<<63))
}

// signingInput is PAE(["synapse.v1.Envelope", header, payload]).
func signingInput(header, payload []byte) []byte {
	out := le64(3)
	for _, p := range [][]byte{[]byte(signingDomain), header, payload} {
		out = append(out, le64(uint64(len(p)))...)
		out = append(out, p...)
	}
	return out
}

var b64url = base64.RawURLEncoding

// keyID is the RFC 7638 JWK thumbprint of an Ed25519 public key as an OKP JWK.
func keyID(pub []byte) string {
	jwk := `{"crv":"Ed25519","kty":"OKP","x":"` + b64url.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(jwk))
	return b64url.EncodeToString(sum[:])
}

// identity is the requester: its self-certifying agent id (PROTOCOL.md
// §2.3, so the server trusts it on first use), key pair and key id.
type identity struct {
	agentID string
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
	keyID   string
}

func identityFromSeed(seed []byte) identity {
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(pub)
	return identity{agentID: "agent_" + hex.EncodeToString(sum[:])[:32], priv: priv, pub: pub, keyID: keyID(pub)}
}

// uuidV4 is a random RFC 9562 version 4 UUID.
func uuidV4() string {
	return formatUUID(randomUUIDBytes(), 4)
}

// uuidV7 is an RFC 9562 version 7 UUID: the Unix time in milliseconds, then
// random bits. What Synapse's own clients send: ids made in time order reach
// a receiver's indexes near their last page instead of at random places.
func uuidV7() string {
	b := randomUUIDBytes()
	ms := uint64(time.Now().UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	return formatUUID(b, 7)
}

func randomUUIDBytes() [16]byte {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return b
}

// formatUUID sets the version and the RFC 9562 variant and writes the text form.
func formatUUID(b [16]byte, version byte) string {
	b[6] = b[6]&0x0f | version<<4
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newID makes the task and message ids of Synapse requests (-ids).
var newID = uuidV7

// seal builds a fresh header (new message id, sent now), serializes header
// and payload once and signs exactly those bytes.
func (id identity) seal(messageType synapsev1.MessageType, payload proto.Message, receiver, taskID string) (*synapsev1.Envelope, *synapsev1.Header, error) {
	now := time.Now()
	header := &synapsev1.Header{
		MessageId:       newID(),
		MessageType:     messageType,
		ProtocolVersion: protocolVersion,
		Sender:          &synapsev1.AgentRef{AgentId: id.agentID, KeyId: id.keyID},
		Receiver:        &synapsev1.AgentRef{AgentId: receiver},
		SentAt:          timestamppb.New(now),
		ExpiresAt:       timestamppb.New(now.Add(5 * time.Minute)),
		TaskId:          taskID,
		PayloadType:     string(payload.ProtoReflect().Descriptor().FullName()),
	}
	headerBytes, err := proto.Marshal(header)
	if err != nil {
		return nil, nil, err
	}
	payloadBytes, err := proto.Marshal(payload)
	if err != nil {
		return nil, nil, err
	}
	return &synapsev1.Envelope{
		Header:  headerBytes,
		Payload: payloadBytes,
		Signature: &synapsev1.Signature{
			Algorithm: synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519,
			KeyId:     id.keyID,
			Value:     ed25519.Sign(id.priv, signingInput(headerBytes, payloadBytes)),
			PublicKey: id.pub,
		},
	}, header, nil
}

// peer is the executor as the requester knows it (from GetCapabilities).
type peer struct {
	agentID string
	keyID   string
	pub     ed25519.PublicKey
}

// openReply verifies a reply signed by the executor and addressed to me,
// then parses its header and checks sender, receiver, version and time.
func openReply(env *synapsev1.Envelope, from peer, me string) (*synapsev1.Header, error) {
	sig := env.GetSignature()
	if sig == nil || len(sig.GetValue()) != ed25519.SignatureSize {
		return nil, fmt.Errorf("reply is not signed")
	}
	if sig.GetAlgorithm() != synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519 || sig.GetKeyId() != from.keyID {
		return nil, fmt.Errorf("reply signed with %v key %q, expected Ed25519 key %q", sig.GetAlgorithm(), sig.GetKeyId(), from.keyID)
	}
	if !ed25519.Verify(from.pub, signingInput(env.GetHeader(), env.GetPayload()), sig.GetValue()) {
		return nil, fmt.Errorf("reply signature does not verify")
	}
	header := &synapsev1.Header{}
	if err := proto.Unmarshal(env.GetHeader(), header); err != nil {
		return nil, fmt.Errorf("reply header does not parse: %v", err)
	}
	if header.GetSender().GetAgentId() != from.agentID || header.GetSender().GetKeyId() != sig.GetKeyId() {
		return nil, fmt.Errorf("reply sender %v, expected %s", header.GetSender(), from.agentID)
	}
	if header.GetReceiver().GetAgentId() != me {
		return nil, fmt.Errorf("reply addressed to %q", header.GetReceiver().GetAgentId())
	}
	if m, _, _ := strings.Cut(header.GetProtocolVersion(), "."); m != "1" {
		return nil, fmt.Errorf("reply protocol_version %q", header.GetProtocolVersion())
	}
	now := time.Now()
	if sent := header.GetSentAt().AsTime(); now.Sub(sent) > clockSkew || sent.Sub(now) > clockSkew {
		return nil, fmt.Errorf("reply sent_at %s is outside the clock skew", sent)
	}
	if header.GetExpiresAt() != nil && !now.Before(header.GetExpiresAt().AsTime()) {
		return nil, fmt.Errorf("reply expired")
	}
	return header, nil
}
