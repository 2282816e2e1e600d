package synapse

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

const (
	// SigningDomain is the first piece of every signing input.
	SigningDomain = "synapse.v1.Envelope"
	// ProtocolVersion is the protocol version this kit speaks.
	ProtocolVersion = "1.0.0"
	// DefaultClockSkew is how far a message's sent_at may be from the
	// receiver's clock (PROTOCOL.md §2.4, check 8).
	DefaultClockSkew = 300 * time.Second
	// DefaultTTL is how long a sealed message stays valid by default.
	DefaultTTL = 5 * time.Minute
)

// le64 is PASETO's LE64: little-endian uint64 with the top bit cleared.
func le64(out []byte, n uint64) []byte {
	return binary.LittleEndian.AppendUint64(out, n&^(1<<63))
}

// SigningInput is the exact byte string an envelope's signature covers
// (PROTOCOL.md §2.1): PAE(["synapse.v1.Envelope", header, payload]), where
// PAE(pieces) = LE64(len(pieces)) || for each piece LE64(len(piece)) || piece.
func SigningInput(header, payload []byte) []byte {
	out := make([]byte, 0, 8*4+len(SigningDomain)+len(header)+len(payload))
	out = le64(out, 3)
	for _, piece := range [][]byte{[]byte(SigningDomain), header, payload} {
		out = le64(out, uint64(len(piece)))
		out = append(out, piece...)
	}
	return out
}

// payloadField is the field of the synapse.v1.Payload oneof that carries a
// message type's payload: its number is the enum value (§2.5).
func payloadField(t synapsev1.MessageType) protoreflect.FieldDescriptor {
	if t == synapsev1.MessageType_MESSAGE_TYPE_UNSPECIFIED {
		return nil
	}
	return (&synapsev1.Payload{}).ProtoReflect().Descriptor().Fields().ByNumber(protoreflect.FieldNumber(t))
}

// PayloadType is the full name of the payload message a message type carries
// ("synapse.v1.TaskRequestPayload"), or "" for an unknown type.
func PayloadType(t synapsev1.MessageType) string {
	if f := payloadField(t); f != nil {
		return string(f.Message().FullName())
	}
	return ""
}

// IsTaskScoped reports whether messages of type t must carry a task_id.
func IsTaskScoped(t synapsev1.MessageType) bool {
	switch t {
	case synapsev1.MessageType_MESSAGE_TYPE_ACK, synapsev1.MessageType_MESSAGE_TYPE_NACK,
		synapsev1.MessageType_MESSAGE_TYPE_HEARTBEAT, synapsev1.MessageType_MESSAGE_TYPE_CAPABILITY_QUERY,
		synapsev1.MessageType_MESSAGE_TYPE_CAPABILITY_RESPONSE, synapsev1.MessageType_MESSAGE_TYPE_REGISTRY_REGISTER,
		synapsev1.MessageType_MESSAGE_TYPE_REGISTRY_DEREGISTER:
		return false
	}
	return payloadField(t) != nil
}

// Message is what a sender says; Seal adds the header's ids, times and keys.
type Message struct {
	// Type is the message type; Payload must be its payload message.
	Type    synapsev1.MessageType
	Payload proto.Message
	// Receiver is the agent addressed; a non-empty KeyID pins the key the
	// sender expects it to have.
	Receiver Peer
	// Optional header fields.
	TaskID, ReplyTo, SessionID, CorrelationID, IdempotencyKey string
	Sequence                                                  uint64
	// MessageID defaults to a new time-ordered UUID (NewUUID), SentAt to now, TTL to DefaultTTL.
	MessageID string
	SentAt    time.Time
	TTL       time.Duration
}

// Seal builds the header, serializes header and payload once and signs
// exactly those bytes. It returns the envelope that travels and the header
// it carries.
func Seal(id *Identity, m Message) (*synapsev1.Envelope, *synapsev1.Header, error) {
	header, err := buildHeader(id, m)
	if err != nil {
		return nil, nil, err
	}
	env, err := SealHeader(id, header, m.Payload)
	if err != nil {
		return nil, nil, err
	}
	return env, header, nil
}

// buildHeader checks a message and builds its header.
func buildHeader(id *Identity, m Message) (*synapsev1.Header, error) {
	want := PayloadType(m.Type)
	if want == "" {
		return nil, fmt.Errorf("synapse: unknown message type %v", m.Type)
	}
	if m.Payload == nil || string(m.Payload.ProtoReflect().Descriptor().FullName()) != want {
		return nil, fmt.Errorf("synapse: %v carries %s", m.Type, want)
	}
	if IsTaskScoped(m.Type) && m.TaskID == "" {
		return nil, fmt.Errorf("synapse: %v needs a task id", m.Type)
	}
	sent := m.SentAt
	if sent.IsZero() {
		sent = time.Now()
	}
	ttl := m.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	messageID := m.MessageID
	if messageID == "" {
		messageID = NewUUID()
	}
	return &synapsev1.Header{
		MessageId:       messageID,
		MessageType:     m.Type,
		ProtocolVersion: ProtocolVersion,
		Sender:          &synapsev1.AgentRef{AgentId: id.AgentID, KeyId: id.KeyID},
		Receiver:        m.Receiver.Ref(),
		SentAt:          timestamppb.New(sent),
		ExpiresAt:       timestamppb.New(sent.Add(ttl)),
		ReplyTo:         m.ReplyTo,
		TaskId:          m.TaskID,
		SessionId:       m.SessionID,
		CorrelationId:   m.CorrelationID,
		IdempotencyKey:  m.IdempotencyKey,
		PayloadType:     want,
		Sequence:        m.Sequence,
	}, nil
}

// SealHeader signs a header the caller built in full (for example a
// registry message) with its payload: both are serialized once and the
// signature covers exactly those bytes.
func SealHeader(id *Identity, header *synapsev1.Header, payload proto.Message) (*synapsev1.Envelope, error) {
	headerBytes, err := proto.Marshal(header)
	if err != nil {
		return nil, err
	}
	payloadBytes, err := proto.Marshal(payload)
	if err != nil {
		return nil, err
	}
	return SignBytes(id, headerBytes, payloadBytes), nil
}

// SignBytes makes the envelope of already serialized header and payload
// bytes, signed by id, with the public key embedded (§2.3).
func SignBytes(id *Identity, header, payload []byte) *synapsev1.Envelope {
	return &synapsev1.Envelope{
		Header:  header,
		Payload: payload,
		Signature: &synapsev1.Signature{
			Algorithm: synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519,
			KeyId:     id.KeyID,
			Value:     id.Sign(SigningInput(header, payload)),
			PublicKey: id.PublicKey,
		},
	}
}

// OpenOptions are a receiver's settings for Open.
type OpenOptions struct {
	// Trust decides which keys speak for which agent ids (required).
	Trust TrustPolicy
	// Self is the receiver's agent id: a message addressed to another agent
	// is refused (wrong_receiver). Empty skips the check (reading, not acting).
	Self string
	// SelfKeyID is the receiver's key id: a message whose receiver.key_id
	// names another key is refused. Empty skips the check.
	SelfKeyID string
	// Records skips the freshness check: for events read back from a task's
	// log (Watch, GetTask), which are checked for authenticity only.
	Records bool
	// ClockSkew defaults to DefaultClockSkew.
	ClockSkew time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Confidential finds the task keys of confidential messages (§9.3):
	// without it, a confidential message is refused with
	// encryption_key_unknown.
	Confidential *ConfidentialKeys
}

// Opened is an envelope that passed every check, parsed.
type Opened struct {
	Envelope *synapsev1.Envelope
	Header   *synapsev1.Header
	// Payload is the typed payload (e.g. *synapsev1.TaskCompletePayload).
	Payload proto.Message
	// PublicKey is the sender's verified key.
	PublicKey ed25519.PublicKey
	// Digest is SHA-256 over the signing input and the signature (for a
	// confidential envelope, over PAE of its header and sealed payload as
	// they travelled): two envelopes with equal digests are the same.
	Digest [32]byte
	// TaskKey is the task key a confidential message opened with (nil on a
	// plaintext message); PlainPayload and InnerSignature are what it
	// decrypted to.
	TaskKey, PlainPayload, InnerSignature []byte
}

// Confidential reports whether the message was sealed confidentially.
func (o *Opened) Confidential() bool { return o.TaskKey != nil }

// Type is the message type.
func (o *Opened) Type() synapsev1.MessageType { return o.Header.GetMessageType() }

const (
	maxHeaderString  = 256
	maxTracestate    = 512
	minTimestampSecs = -62135596800
	maxTimestampSecs = 253402300799
)

var semver = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:[-+].*)?$`)

// Open checks an envelope as a receiver must (PROTOCOL.md §2.4), in order:
// the signature over the received bytes first (present, Ed25519, 64 bytes;
// the key from the trust policy or the embedded one; verified), then the
// header is parsed and the sender's key id bound to the signature, the key
// to the sender's agent id, the receiver (and its key id), the protocol
// version, the clock skew and expiry, and the payload type. An envelope
// whose signature has no value and whose header has confidential set is
// opened as §9.3 says (see OpenOptions.Confidential). A refusal is a
// *Refusal with the protocol code of the failed check.
func Open(env *synapsev1.Envelope, opt OpenOptions) (*Opened, error) {
	if opt.Trust == nil {
		return nil, fmt.Errorf("synapse: Open needs a TrustPolicy")
	}
	sig := env.GetSignature()
	// A confidential envelope carries its signature inside the ciphertext.
	if sig != nil && len(sig.GetValue()) == 0 {
		header := &synapsev1.Header{}
		if proto.Unmarshal(env.GetHeader(), header) == nil && header.GetConfidential() != nil {
			return openConfidential(env, header, opt)
		}
	}
	// 1. A signature is present, Ed25519, 64 bytes.
	if len(sig.GetValue()) == 0 {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, "envelope is not signed")
	}
	if len(sig.GetValue()) != ed25519.SignatureSize && sig.GetAlgorithm() == synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519 {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, "signature is %d bytes, not 64", len(sig.GetValue()))
	}
	// 2. The key: the trusted one for key_id, else the embedded one.
	pub, err := signerKey(sig, opt.Trust)
	if err != nil {
		return nil, err
	}
	// 3. The signature verifies over the bytes received.
	input := SigningInput(env.GetHeader(), env.GetPayload())
	if !ed25519.Verify(pub, input, sig.GetValue()) {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, "signature does not verify")
	}
	// 4. Only now parse the header; its sender key id is the signature's.
	header := &synapsev1.Header{}
	if err := proto.Unmarshal(env.GetHeader(), header); err != nil {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "header bytes are not a synapse.v1.Header")
	}
	field, err := checkHeader(header, sig, pub, opt)
	if err != nil {
		return nil, err
	}
	payload, err := parsePayload(field, env.GetPayload())
	if err != nil {
		return nil, err
	}
	sender := header.GetSender().GetAgentId()
	if p, ok := opt.Trust.(Pinner); ok {
		p.Accepted(sender, sig.GetKeyId(), pub)
	}
	h := sha256.New()
	h.Write(input)
	h.Write(sig.GetValue())
	o := &Opened{Envelope: env, Header: header, Payload: payload, PublicKey: pub}
	h.Sum(o.Digest[:0])
	return o, nil
}

// signerKey is the sender's public key: the trusted one for key_id, else
// the embedded one when its thumbprint is key_id.
func signerKey(sig *synapsev1.Signature, trust TrustPolicy) (ed25519.PublicKey, error) {
	if sig.GetAlgorithm() != synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519 {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, "signature algorithm %v is not Ed25519", sig.GetAlgorithm())
	}
	pub := trust.KeyFor(sig.GetKeyId())
	if pub == nil && len(sig.GetPublicKey()) > 0 {
		if len(sig.GetPublicKey()) != ed25519.PublicKeySize || KeyID(sig.GetPublicKey()) != sig.GetKeyId() {
			return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, "embedded public key does not match key_id")
		}
		pub = sig.GetPublicKey()
	}
	if pub == nil {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_UNKNOWN_SENDER, "no public key known for key id %q", clip(sig.GetKeyId()))
	}
	return pub, nil
}

// openConfidential is §9.3: every header check before decryption, then the
// task key, the payload opened, the signature inside verified.
func openConfidential(env *synapsev1.Envelope, header *synapsev1.Header, opt OpenOptions) (*Opened, error) {
	sig := env.GetSignature()
	pub, err := signerKey(sig, opt.Trust)
	if err != nil {
		return nil, err
	}
	field, err := checkHeader(header, sig, pub, opt)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if opt.Now != nil {
		now = opt.Now()
	}
	taskKey, err := opt.Confidential.taskKeyFor(header, opt.Self, now)
	if err != nil {
		return nil, err
	}
	inner, plain, err := OpenSealedPayload(env.GetHeader(), header, env.GetPayload(), taskKey)
	if err != nil {
		return nil, err
	}
	if !ed25519.Verify(pub, SigningInput(env.GetHeader(), plain), inner) {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_INNER_SIGNATURE_INVALID, "the signature inside the confidential payload does not verify")
	}
	payload, err := parsePayload(field, plain)
	if err != nil {
		return nil, err
	}
	if p, ok := opt.Trust.(Pinner); ok {
		p.Accepted(header.GetSender().GetAgentId(), sig.GetKeyId(), pub)
	}
	o := &Opened{Envelope: env, Header: header, Payload: payload, PublicKey: pub, TaskKey: taskKey, PlainPayload: plain, InnerSignature: inner}
	o.Digest = sha256.Sum256(SigningInput(env.GetHeader(), env.GetPayload()))
	return o, nil
}

// checkHeader is checks 4 to 9 of §2.4 on a parsed header; it returns the
// payload's field of synapse.v1.Payload.
func checkHeader(header *synapsev1.Header, sig *synapsev1.Signature, pub ed25519.PublicKey, opt OpenOptions) (protoreflect.FieldDescriptor, error) {
	if err := checkHeaderStrings(header); err != nil {
		return nil, err
	}
	if header.GetSender().GetAgentId() == "" {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "header.sender.agent_id is required")
	}
	if header.GetSender().GetKeyId() != sig.GetKeyId() {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, "header.sender.key_id differs from the signature's key_id")
	}
	// 5. The key belongs to the sender's agent id.
	sender := header.GetSender().GetAgentId()
	switch opt.Trust.Check(sender, sig.GetKeyId(), pub) {
	case Trusted:
	case Conflict:
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_UNKNOWN_SENDER, "agent %s is known with a different key", clip(sender))
	default:
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_UNKNOWN_SENDER, "agent %s with key %s is not trusted", clip(sender), clip(sig.GetKeyId()))
	}
	// 6. Addressed to this receiver (and its key, when the sender pinned one).
	if opt.Self != "" && header.GetReceiver().GetAgentId() != opt.Self {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_WRONG_RECEIVER, "message is addressed to %q, not %s", clip(header.GetReceiver().GetAgentId()), opt.Self)
	}
	if rk := header.GetReceiver().GetKeyId(); opt.SelfKeyID != "" && rk != "" && rk != opt.SelfKeyID {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_WRONG_RECEIVER, "message is addressed to key %q, not %s", clip(rk), opt.SelfKeyID)
	}
	if header.GetMessageId() == "" {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "header.message_id is required")
	}
	// 7. The same major protocol version.
	m := semver.FindStringSubmatch(header.GetProtocolVersion())
	if m == nil {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "protocol_version %q is not semver", clip(header.GetProtocolVersion()))
	}
	if m[1] != "1" {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION, "protocol %s is not compatible with %s", clip(header.GetProtocolVersion()), ProtocolVersion)
	}
	// 8. Fresh: within the clock skew and not expired.
	if err := checkTime(header, opt); err != nil {
		return nil, err
	}
	// 9. The payload is the message type's.
	field := payloadField(header.GetMessageType())
	if field == nil {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "unknown message type %v", header.GetMessageType())
	}
	want := field.Message().FullName()
	if protoreflect.FullName(header.GetPayloadType()) != want {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "%v must carry %s, not %q", header.GetMessageType(), want, clip(header.GetPayloadType()))
	}
	if IsTaskScoped(header.GetMessageType()) && header.GetTaskId() == "" {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "%v requires header.task_id", header.GetMessageType())
	}
	return field, nil
}

// parsePayload parses the payload bytes as the field's message.
func parsePayload(field protoreflect.FieldDescriptor, b []byte) (proto.Message, error) {
	payload := (&synapsev1.Payload{}).ProtoReflect().NewField(field).Message().Interface()
	if err := proto.Unmarshal(b, payload); err != nil {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "payload bytes are not a %s", field.Message().FullName())
	}
	return payload, nil
}

func checkHeaderStrings(h *synapsev1.Header) error {
	fields := []struct {
		name, value string
		max         int
	}{
		{"message_id", h.GetMessageId(), maxHeaderString},
		{"protocol_version", h.GetProtocolVersion(), maxHeaderString},
		{"sender.agent_id", h.GetSender().GetAgentId(), maxHeaderString},
		{"sender.system_id", h.GetSender().GetSystemId(), maxHeaderString},
		{"sender.key_id", h.GetSender().GetKeyId(), maxHeaderString},
		{"receiver.agent_id", h.GetReceiver().GetAgentId(), maxHeaderString},
		{"receiver.system_id", h.GetReceiver().GetSystemId(), maxHeaderString},
		{"receiver.key_id", h.GetReceiver().GetKeyId(), maxHeaderString},
		{"reply_to", h.GetReplyTo(), maxHeaderString},
		{"task_id", h.GetTaskId(), maxHeaderString},
		{"session_id", h.GetSessionId(), maxHeaderString},
		{"correlation_id", h.GetCorrelationId(), maxHeaderString},
		{"trace.traceparent", h.GetTrace().GetTraceparent(), maxHeaderString},
		{"trace.tracestate", h.GetTrace().GetTracestate(), maxTracestate},
		{"idempotency_key", h.GetIdempotencyKey(), maxHeaderString},
		{"payload_type", h.GetPayloadType(), maxHeaderString},
	}
	for _, f := range fields {
		// Characters as JavaScript counts them (UTF-16 code units) would allow
		// a little more for astral characters; runes are close enough here.
		if n := len([]rune(f.value)); n > f.max {
			return refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "header.%s is longer than %d characters", f.name, f.max)
		}
	}
	return nil
}

func timestampOf(field string, ts *timestamppb.Timestamp) (time.Time, error) {
	if ts.GetSeconds() < minTimestampSecs || ts.GetSeconds() > maxTimestampSecs || ts.GetNanos() < 0 || ts.GetNanos() > 999_999_999 {
		return time.Time{}, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID,
			"header.%s is outside the range of google.protobuf.Timestamp (years 1 to 9999, nanos 0 to 999999999)", field)
	}
	return ts.AsTime(), nil
}

// checkTime is check 8 of §2.4: the timestamps are in range, |now - sent_at|
// <= skew and now < expires_at (unset: sent_at + skew).
func checkTime(h *synapsev1.Header, opt OpenOptions) error {
	if h.GetSentAt() == nil {
		return refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "header.sent_at is required")
	}
	sent, err := timestampOf("sent_at", h.GetSentAt())
	if err != nil {
		return err
	}
	skew := opt.ClockSkew
	if skew <= 0 {
		skew = DefaultClockSkew
	}
	expires := sent.Add(skew)
	if h.GetExpiresAt() != nil {
		if expires, err = timestampOf("expires_at", h.GetExpiresAt()); err != nil {
			return err
		}
	}
	if opt.Records {
		return nil
	}
	now := time.Now()
	if opt.Now != nil {
		now = opt.Now()
	}
	if d := now.Sub(sent); d > skew || d < -skew {
		return refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_EXPIRED, "sent_at %s is outside the allowed clock skew of %s", sent.Format(time.RFC3339Nano), skew)
	}
	if !now.Before(expires) {
		return refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_EXPIRED, "message expired at %s", expires.Format(time.RFC3339Nano))
	}
	return nil
}

// clip cuts what a caller sent to 128 characters before it is echoed.
func clip(s string) string {
	r := []rune(s)
	if len(r) <= 128 {
		return s
	}
	return fmt.Sprintf("%s…(%d chars)", string(r[:128]), len(r))
}

// NewUUID is an RFC 9562 version 7 UUID (the Unix time in milliseconds, then
// random bits), for message and task ids. Ids made in time order reach a
// receiver's indexes (seen messages, tasks by id) near their last pages.
func NewUUID() string {
	return uuidV7(time.Now())
}

func uuidV7(now time.Time) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	ms := uint64(now.UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// View is the decoded form of an opened envelope, for SignedMessage.view.
func (o *Opened) View() *synapsev1.EnvelopeView {
	p := &synapsev1.Payload{}
	if f := payloadField(o.Type()); f != nil {
		p.ProtoReflect().Set(f, protoreflect.ValueOfMessage(o.Payload.ProtoReflect()))
	}
	return &synapsev1.EnvelopeView{Header: o.Header, Payload: p}
}
