// The envelope rules of docs/PROTOCOL.md §2 in Go: the PAE signing input,
// the RFC 7638 key id, sealing a message (serialize header and payload once,
// sign those exact bytes) and opening one (verify the received bytes first,
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
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	synapsev1 "synapse-interop/gen/synapse/v1"
)

const (
	signingDomain   = "synapse.v1.Envelope"
	protocolVersion = "1.0.0"
	defaultSkew     = 300 * time.Second
)

// le64 is PASETO's LE64: little-endian uint64 with the top bit cleared.
func le64(n uint64) []byte {
	return binary.LittleEndian.AppendUint64(nil, n&^(1<<63))
}

// pae is PASETO's pre-authentication encoding of pieces.
func pae(pieces ...[]byte) []byte {
	out := le64(uint64(len(pieces)))
	for _, p := range pieces {
		out = append(out, le64(uint64(len(p)))...)
		out = append(out, p...)
	}
	return out
}

// signingInput is PAE(["synapse.v1.Envelope", header, payload]).
func signingInput(header, payload []byte) []byte {
	return pae([]byte(signingDomain), header, payload)
}

var b64url = base64.RawURLEncoding

// keyID is the RFC 7638 JWK thumbprint of an Ed25519 public key as an OKP JWK.
func keyID(pub []byte) string {
	jwk := `{"crv":"Ed25519","kty":"OKP","x":"` + b64url.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(jwk))
	return b64url.EncodeToString(sum[:])
}

// identity is an agent: its id, key pair and key id.
type identity struct {
	agentID string
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
	keyID   string
}

// newIdentity makes a key pair; its agent id is derived from the public key
// ("agent_" and 32 hex digits of SHA-256, PROTOCOL.md §2.3), so a server
// trusts it on first use.
func newIdentity() identity {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return identity{agentID: selfCertifyingAgentID(pub), priv: priv, pub: pub, keyID: keyID(pub)}
}

// selfCertifyingAgentID is the agent id derived from a public key.
func selfCertifyingAgentID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "agent_" + hex.EncodeToString(sum[:])[:32]
}

// uuidV4 is a random RFC 9562 version 4 UUID.
func uuidV4() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// payloadTypes maps each message type to its payload message (PROTOCOL.md §2.5).
var payloadTypes = map[synapsev1.MessageType]proto.Message{
	synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST:        &synapsev1.TaskRequestPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM:        &synapsev1.TaskConfirmPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_REJECT:         &synapsev1.TaskRejectPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_NEED_INFO:      &synapsev1.TaskNeedInfoPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_INFO_PROVIDED:  &synapsev1.TaskInfoProvidedPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_STATUS_UPDATE:  &synapsev1.TaskStatusUpdatePayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE:       &synapsev1.TaskCompletePayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_FAILED:         &synapsev1.TaskFailedPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL:         &synapsev1.TaskCancelPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_ACK:            &synapsev1.TaskAckPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_ACK:                 &synapsev1.AckPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_NACK:                &synapsev1.NackPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_HEARTBEAT:           &synapsev1.HeartbeatPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_CAPABILITY_QUERY:    &synapsev1.CapabilityQueryPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_CAPABILITY_RESPONSE: &synapsev1.CapabilityResponsePayload{},
	synapsev1.MessageType_MESSAGE_TYPE_TASK_NEED_HUMAN:     &synapsev1.TaskNeedHumanPayload{},
	synapsev1.MessageType_MESSAGE_TYPE_HUMAN_DECISION:      &synapsev1.HumanDecisionPayload{},
}

// sealInput is what a sender fills in; seal adds ids, times and the key id.
type sealInput struct {
	messageType synapsev1.MessageType
	payload     proto.Message
	receiver    string
	taskID      string
}

// seal serializes the header and payload once and signs exactly those bytes.
func (id identity) seal(in sealInput) (*synapsev1.Envelope, *synapsev1.Header, error) {
	now := time.Now()
	header := &synapsev1.Header{
		MessageId:       uuidV4(),
		MessageType:     in.messageType,
		ProtocolVersion: protocolVersion,
		Sender:          &synapsev1.AgentRef{AgentId: id.agentID, KeyId: id.keyID},
		Receiver:        &synapsev1.AgentRef{AgentId: in.receiver},
		SentAt:          timestamppb.New(now),
		ExpiresAt:       timestamppb.New(now.Add(5 * time.Minute)),
		TaskId:          in.taskID,
		PayloadType:     string(in.payload.ProtoReflect().Descriptor().FullName()),
	}
	headerBytes, err := proto.Marshal(header)
	if err != nil {
		return nil, nil, err
	}
	payloadBytes, err := proto.Marshal(in.payload)
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

// protocolError is a refusal with its protocol_code spelling
// ("signature_invalid", "message_expired", ...).
type protocolError struct{ code, message string }

func (e *protocolError) Error() string { return e.code + ": " + e.message }

func refuse(code, format string, args ...any) error {
	return &protocolError{code: code, message: fmt.Sprintf(format, args...)}
}

// codeOf is the protocol_code of a refusal made by open, or "".
func codeOf(err error) string {
	if pe, ok := err.(*protocolError); ok {
		return pe.code
	}
	return ""
}

// verifySignature is checks 1 and 3 of PROTOCOL.md §2.4 against a known key.
func verifySignature(header, payload []byte, sig *synapsev1.Signature, pub ed25519.PublicKey) error {
	if sig == nil || len(sig.GetValue()) == 0 {
		return refuse("signature_invalid", "envelope is not signed")
	}
	if sig.GetAlgorithm() != synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519 {
		return refuse("signature_invalid", "algorithm %v is not Ed25519", sig.GetAlgorithm())
	}
	if len(sig.GetValue()) != ed25519.SignatureSize {
		return refuse("signature_invalid", "signature is %d bytes, not 64", len(sig.GetValue()))
	}
	if len(pub) != ed25519.PublicKeySize {
		return refuse("unknown_sender", "no 32-byte public key for key id %q", sig.GetKeyId())
	}
	if !ed25519.Verify(pub, signingInput(header, payload), sig.GetValue()) {
		return refuse("signature_invalid", "signature does not verify")
	}
	return nil
}

// checkTime is check 8 of PROTOCOL.md §2.4: |now - sent_at| <= skew and
// now < expires_at (unset expires_at means sent_at + skew).
func checkTime(h *synapsev1.Header, now time.Time, skew time.Duration) error {
	if h.GetSentAt() == nil {
		return refuse("message_format_invalid", "header.sent_at is missing")
	}
	sent := h.GetSentAt().AsTime()
	if d := now.Sub(sent); d > skew || d < -skew {
		return refuse("message_expired", "sent_at %s is %s from now (%s), beyond the %s skew", sent.Format(time.RFC3339), d, now.Format(time.RFC3339), skew)
	}
	expires := sent.Add(skew)
	if h.GetExpiresAt() != nil {
		expires = h.GetExpiresAt().AsTime()
	}
	if !now.Before(expires) {
		return refuse("message_expired", "expired at %s (now %s)", expires.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	return nil
}

// peer is the key a receiver trusts for one agent.
type peer struct {
	agentID string
	keyID   string
	pub     ed25519.PublicKey
}

// opened is an envelope whose signature verified, parsed.
type opened struct {
	header  *synapsev1.Header
	payload proto.Message
}

// openOptions: self is the receiver's agent id; now is nil to skip the
// freshness check (records read back later, like a task's event log).
type openOptions struct {
	self string
	now  *time.Time
	skew time.Duration
}

// open verifies env as signed by from, then parses and checks it
// (PROTOCOL.md §2.4, in that order).
func open(env *synapsev1.Envelope, from peer, opt openOptions) (*opened, error) {
	sig := env.GetSignature()
	if sig != nil && sig.GetKeyId() != from.keyID {
		return nil, refuse("unknown_sender", "signed with key %q, expected %q", sig.GetKeyId(), from.keyID)
	}
	if len(sig.GetPublicKey()) > 0 && keyID(sig.GetPublicKey()) != sig.GetKeyId() {
		return nil, refuse("signature_invalid", "embedded public key does not match key_id")
	}
	if err := verifySignature(env.GetHeader(), env.GetPayload(), sig, from.pub); err != nil {
		return nil, err
	}
	header := &synapsev1.Header{}
	if err := proto.Unmarshal(env.GetHeader(), header); err != nil {
		return nil, refuse("message_format_invalid", "header does not parse: %v", err)
	}
	if header.GetSender().GetKeyId() != sig.GetKeyId() {
		return nil, refuse("signature_invalid", "header.sender.key_id %q differs from signature key_id %q", header.GetSender().GetKeyId(), sig.GetKeyId())
	}
	if header.GetSender().GetAgentId() != from.agentID {
		return nil, refuse("unknown_sender", "sender is %q, expected %q", header.GetSender().GetAgentId(), from.agentID)
	}
	if opt.self != "" && header.GetReceiver().GetAgentId() != opt.self {
		return nil, refuse("wrong_receiver", "addressed to %q, not %q", header.GetReceiver().GetAgentId(), opt.self)
	}
	if major(header.GetProtocolVersion()) != major(protocolVersion) {
		return nil, refuse("unsupported_version", "protocol_version %q", header.GetProtocolVersion())
	}
	if opt.now != nil {
		skew := opt.skew
		if skew == 0 {
			skew = defaultSkew
		}
		if err := checkTime(header, *opt.now, skew); err != nil {
			return nil, err
		}
	}
	payload, err := parsePayload(header, env.GetPayload())
	if err != nil {
		return nil, err
	}
	return &opened{header: header, payload: payload}, nil
}

// parsePayload is check 9 of PROTOCOL.md §2.4.
func parsePayload(h *synapsev1.Header, b []byte) (proto.Message, error) {
	want, ok := payloadTypes[h.GetMessageType()]
	if !ok {
		return nil, refuse("message_format_invalid", "unknown message type %v", h.GetMessageType())
	}
	name := want.ProtoReflect().Descriptor().FullName()
	if protoreflect.FullName(h.GetPayloadType()) != name {
		return nil, refuse("message_format_invalid", "%v must carry %s, not %q", h.GetMessageType(), name, h.GetPayloadType())
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		return nil, err
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(b, msg); err != nil {
		return nil, refuse("message_format_invalid", "payload is not a %s: %v", name, err)
	}
	return msg, nil
}

func major(version string) string {
	m, _, _ := strings.Cut(version, ".")
	return m
}
