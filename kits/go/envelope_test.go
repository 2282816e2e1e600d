package synapse

import (
	"regexp"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

func TestIdentityIDs(t *testing.T) {
	id := mustIdentity(t)
	if len(id.AgentID) != 38 || id.AgentID[:6] != "agent_" || !IsSelfCertifying(id.AgentID, id.PublicKey) {
		t.Fatalf("agent id %q", id.AgentID)
	}
	if IsSelfCertifying(mustIdentity(t).AgentID, id.PublicKey) {
		t.Fatal("another key's id certifies this key")
	}
	pemBytes, err := id.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := IdentityFromPEM(pemBytes)
	if err != nil || back.AgentID != id.AgentID || back.KeyID != id.KeyID {
		t.Fatalf("PEM round trip: %v %+v", err, back)
	}
}

func heartbeat(t *testing.T, from *Identity, to Peer, edit func(*synapsev1.Header)) *synapsev1.Envelope {
	t.Helper()
	_, h, err := Seal(from, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_HEARTBEAT, Payload: &synapsev1.HeartbeatPayload{}, Receiver: to})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(h)
	}
	env, err := SealHeader(from, h, &synapsev1.HeartbeatPayload{ActiveTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Open refuses for the first failed check of §2.4, in its order.
func TestOpenRefusals(t *testing.T) {
	alice, bob, mallory := mustIdentity(t), mustIdentity(t), mustIdentity(t)
	open := func(env *synapsev1.Envelope, trust TrustPolicy) error {
		if trust == nil {
			trust = TrustOnFirstUse()
		}
		_, err := Open(env, OpenOptions{Trust: trust, Self: bob.AgentID, SelfKeyID: bob.KeyID})
		return err
	}
	cases := []struct {
		name  string
		env   func() *synapsev1.Envelope
		trust TrustPolicy
		want  string
	}{
		{"accepted", func() *synapsev1.Envelope { return heartbeat(t, alice, bob.Ref(), nil) }, nil, ""},
		{"unsigned", func() *synapsev1.Envelope {
			e := heartbeat(t, alice, bob.Ref(), nil)
			e.Signature = nil
			return e
		}, nil, "signature_invalid"},
		{"not Ed25519", func() *synapsev1.Envelope {
			e := heartbeat(t, alice, bob.Ref(), nil)
			e.Signature.Algorithm = synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_UNSPECIFIED
			return e
		}, nil, "signature_invalid"},
		{"no key at all", func() *synapsev1.Envelope {
			e := heartbeat(t, alice, bob.Ref(), nil)
			e.Signature.PublicKey = nil
			return e
		}, nil, "unknown_sender"},
		{"embedded key of another key id", func() *synapsev1.Envelope {
			e := heartbeat(t, alice, bob.Ref(), nil)
			e.Signature.PublicKey = mallory.PublicKey
			return e
		}, nil, "signature_invalid"},
		{"tampered header", func() *synapsev1.Envelope {
			e := heartbeat(t, alice, bob.Ref(), nil)
			e.Header[3] ^= 1
			return e
		}, nil, "signature_invalid"},
		{"header key id differs from the signature's", func() *synapsev1.Envelope {
			return heartbeat(t, alice, bob.Ref(), func(h *synapsev1.Header) { h.Sender.KeyId = mallory.KeyID })
		}, nil, "signature_invalid"},
		{"an id not derived from the key", func() *synapsev1.Envelope {
			return heartbeat(t, alice, bob.Ref(), func(h *synapsev1.Header) { h.Sender.AgentId = "agent_alice" })
		}, nil, "unknown_sender"},
		{"an id pinned to another key", func() *synapsev1.Envelope { return heartbeat(t, alice, bob.Ref(), nil) },
			NewTrustStore(Peer{AgentID: alice.AgentID, PublicKey: mallory.PublicKey}), "unknown_sender"},
		{"another receiver", func() *synapsev1.Envelope { return heartbeat(t, alice, mallory.Ref(), nil) }, nil, "wrong_receiver"},
		{"another receiver key", func() *synapsev1.Envelope {
			return heartbeat(t, alice, Peer{AgentID: bob.AgentID, KeyID: mallory.KeyID}, nil)
		}, nil, "wrong_receiver"},
		{"protocol 2", func() *synapsev1.Envelope {
			return heartbeat(t, alice, bob.Ref(), func(h *synapsev1.Header) { h.ProtocolVersion = "2.0.0" })
		}, nil, "unsupported_version"},
		{"sent an hour ago", func() *synapsev1.Envelope {
			return heartbeat(t, alice, bob.Ref(), func(h *synapsev1.Header) {
				h.SentAt = timestamppb.New(time.Now().Add(-time.Hour))
				h.ExpiresAt = timestamppb.New(time.Now().Add(time.Hour))
			})
		}, nil, "message_expired"},
		{"expired", func() *synapsev1.Envelope {
			return heartbeat(t, alice, bob.Ref(), func(h *synapsev1.Header) { h.ExpiresAt = timestamppb.New(time.Now().Add(-time.Second)) })
		}, nil, "message_expired"},
		{"sent_at out of range", func() *synapsev1.Envelope {
			return heartbeat(t, alice, bob.Ref(), func(h *synapsev1.Header) { h.SentAt = &timestamppb.Timestamp{Seconds: 1 << 40} })
		}, nil, "message_format_invalid"},
		{"wrong payload type", func() *synapsev1.Envelope {
			return heartbeat(t, alice, bob.Ref(), func(h *synapsev1.Header) { h.PayloadType = "synapse.v1.AckPayload" })
		}, nil, "message_format_invalid"},
		{"task message without task id", func() *synapsev1.Envelope {
			return heartbeat(t, alice, bob.Ref(), func(h *synapsev1.Header) {
				h.MessageType = synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL
				h.PayloadType = "synapse.v1.TaskCancelPayload"
			})
		}, nil, "message_format_invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := open(c.env(), c.trust)
			if got := ProtocolCode(err); got != c.want {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestSealChecksItsInput(t *testing.T) {
	id := mustIdentity(t)
	if _, _, err := Seal(id, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, Payload: &synapsev1.HeartbeatPayload{}, TaskID: "t"}); err == nil {
		t.Fatal("a task_cancel carrying a HeartbeatPayload was sealed")
	}
	if _, _, err := Seal(id, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, Payload: &synapsev1.TaskCancelPayload{}}); err == nil {
		t.Fatal("a task_cancel without a task id was sealed")
	}
	env, h, err := Seal(id, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, Payload: &synapsev1.TaskCancelPayload{TaskId: "t"}, TaskID: "t", Sequence: 7})
	if err != nil {
		t.Fatal(err)
	}
	var parsed synapsev1.Header
	if err := proto.Unmarshal(env.GetHeader(), &parsed); err != nil || !proto.Equal(&parsed, h) {
		t.Fatalf("the header that travels is not the one returned: %v", err)
	}
	if h.GetPayloadType() != "synapse.v1.TaskCancelPayload" || h.GetSequence() != 7 || h.GetSender().GetKeyId() != id.KeyID {
		t.Fatalf("header %v", h)
	}
}

func TestRefusalAsGRPCStatus(t *testing.T) {
	err := refuse(synapsev1.ErrorCode_ERROR_CODE_WRONG_RECEIVER, "not me")
	st := status.Convert(err)
	if st.Code() != codes.PermissionDenied || st.Message() != "not me" {
		t.Fatalf("status %v", st)
	}
	if got := ProtocolCode(st.Err()); got != "wrong_receiver" {
		t.Fatalf("protocol code from the status: %q", got)
	}
}

func TestNewUUIDIsVersion7InTimeOrder(t *testing.T) {
	pattern := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewUUID()
		if !pattern.MatchString(id) || seen[id] {
			t.Fatalf("id %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
	if got := uuidV7(time.UnixMilli(0x0123456789ab)); got[:15] != "01234567-89ab-7" {
		t.Fatalf("the time is not in the first 48 bits: %s", got)
	}
	earlier, later := uuidV7(time.UnixMilli(1_767_225_600_000)), uuidV7(time.UnixMilli(1_767_225_600_001))
	if !(earlier < later) {
		t.Fatalf("%s does not sort before %s", earlier, later)
	}
	_, header, err := Seal(mustIdentity(t), Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, Payload: &synapsev1.TaskCancelPayload{TaskId: "t1"}, TaskID: "t1"})
	if err != nil || !pattern.MatchString(header.GetMessageId()) {
		t.Fatalf("seal's message id %q (%v)", header.GetMessageId(), err)
	}
}
