package synapse

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// vectorsDir is test/vectors of the repository, or $SYNAPSE_VECTORS.
func vectorsDir() string {
	if dir := os.Getenv("SYNAPSE_VECTORS"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "test", "vectors")
}

func readVectors(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorsDir(), name))
	if err != nil {
		t.Fatalf("the vectors are not there (set SYNAPSE_VECTORS): %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRFC8032Vectors(t *testing.T) {
	var file struct {
		Vectors []struct {
			Name      string `json:"name"`
			SecretKey string `json:"secret_key"`
			PublicKey string `json:"public_key"`
			Message   string `json:"message"`
			Signature string `json:"signature"`
		} `json:"vectors"`
	}
	readVectors(t, "rfc8032-ed25519.json", &file)
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			id, err := IdentityFromSeed(unhex(t, v.SecretKey))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(id.PublicKey, unhex(t, v.PublicKey)) {
				t.Fatalf("public key %x, want %s", id.PublicKey, v.PublicKey)
			}
			msg := unhex(t, v.Message)
			sig := id.Sign(msg)
			if !bytes.Equal(sig, unhex(t, v.Signature)) {
				t.Fatalf("signature %x, want %s", sig, v.Signature)
			}
			if !ed25519.Verify(id.PublicKey, msg, sig) {
				t.Fatal("does not verify")
			}
			sig[0] ^= 1
			if ed25519.Verify(id.PublicKey, msg, sig) {
				t.Fatal("a flipped signature verifies")
			}
		})
	}
}

type envelopeVectors struct {
	SigningDomain    string `json:"signing_domain"`
	ClockSkewSeconds int    `json:"clock_skew_seconds"`
	Positive         []struct {
		Name            string          `json:"name"`
		Seed            string          `json:"seed"`
		PublicKey       string          `json:"public_key"`
		KeyID           string          `json:"key_id"`
		Header          json.RawMessage `json:"header"`
		HeaderHex       string          `json:"header_hex"`
		PayloadType     string          `json:"payload_type"`
		Payload         json.RawMessage `json:"payload"`
		PayloadHex      string          `json:"payload_hex"`
		SigningInputHex string          `json:"signing_input_hex"`
		SignatureHex    string          `json:"signature_hex"`
		Envelope        json.RawMessage `json:"envelope"`
		Receiver        string          `json:"receiver"`
		VerifyAt        time.Time       `json:"verify_at"`
	} `json:"positive"`
	Negative []struct {
		Name            string    `json:"name"`
		HeaderHex       string    `json:"header_hex"`
		PayloadHex      string    `json:"payload_hex"`
		SignatureHex    string    `json:"signature_hex"`
		VerifyPublicKey string    `json:"verify_public_key"`
		VerifyAt        time.Time `json:"verify_at"`
		ExpectedError   string    `json:"expected_error"`
	} `json:"negative"`
}

func TestEnvelopeVectors(t *testing.T) {
	var file envelopeVectors
	readVectors(t, "envelopes.json", &file)
	if file.SigningDomain != SigningDomain {
		t.Fatalf("signing_domain %q, want %q", file.SigningDomain, SigningDomain)
	}
	if time.Duration(file.ClockSkewSeconds)*time.Second != DefaultClockSkew {
		t.Fatalf("clock_skew_seconds %d, the kit's default is %s", file.ClockSkewSeconds, DefaultClockSkew)
	}
	if len(file.Positive) == 0 || len(file.Negative) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range file.Positive {
		t.Run("positive/"+v.Name, func(t *testing.T) {
			id, err := IdentityFromSeed(unhex(t, v.Seed))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(id.PublicKey, unhex(t, v.PublicKey)) || id.KeyID != v.KeyID {
				t.Fatalf("key %x / %s, want %s / %s", id.PublicKey, id.KeyID, v.PublicKey, v.KeyID)
			}
			header, payload := unhex(t, v.HeaderHex), unhex(t, v.PayloadHex)
			if got := SigningInput(header, payload); !bytes.Equal(got, unhex(t, v.SigningInputHex)) {
				t.Fatalf("signing input %x, want %s", got, v.SigningInputHex)
			}
			signed := SignBytes(id, header, payload)
			if !bytes.Equal(signed.GetSignature().GetValue(), unhex(t, v.SignatureHex)) {
				t.Fatalf("signature %x, want %s", signed.GetSignature().GetValue(), v.SignatureHex)
			}
			// The canonical JSON envelope carries the same bytes and signature.
			var env synapsev1.Envelope
			if err := protojson.Unmarshal(v.Envelope, &env); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(env.GetHeader(), header) || !bytes.Equal(env.GetPayload(), payload) || !bytes.Equal(env.GetSignature().GetValue(), signed.GetSignature().GetValue()) {
				t.Fatal("the envelope JSON differs from the hex fields")
			}
			var want synapsev1.Header
			if err := protojson.Unmarshal(v.Header, &want); err != nil {
				t.Fatal(err)
			}
			sender := Peer{AgentID: want.GetSender().GetAgentId(), PublicKey: id.PublicKey}
			at := v.VerifyAt
			opened, err := Open(&env, OpenOptions{Trust: NewTrustStore(sender), Self: v.Receiver, Now: func() time.Time { return at }})
			if err != nil {
				t.Fatalf("refused at verify_at: %v", err)
			}
			if !proto.Equal(opened.Header, &want) {
				t.Fatalf("header decodes to %v, the JSON says %v", opened.Header, &want)
			}
			if string(opened.Payload.ProtoReflect().Descriptor().FullName()) != v.PayloadType || PayloadType(opened.Type()) != v.PayloadType {
				t.Fatalf("payload is a %s, want %s", opened.Payload.ProtoReflect().Descriptor().FullName(), v.PayloadType)
			}
			mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(v.PayloadType))
			if err != nil {
				t.Fatal(err)
			}
			fromJSON := mt.New().Interface()
			if err := protojson.Unmarshal(v.Payload, fromJSON); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(opened.Payload, fromJSON) {
				t.Fatalf("payload decodes to %v, the JSON says %v", opened.Payload, fromJSON)
			}
			// Sealing the same header and payload again signs the same bytes.
			again, err := SealHeader(id, opened.Header, opened.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Open(again, OpenOptions{Trust: NewTrustStore(sender), Self: v.Receiver, Now: func() time.Time { return at }}); err != nil {
				t.Fatalf("a resealed envelope is refused: %v", err)
			}
			// An hour later it is no longer fresh, but still authentic as a record.
			later := func() time.Time { return at.Add(time.Hour) }
			if _, err := Open(&env, OpenOptions{Trust: NewTrustStore(sender), Self: v.Receiver, Now: later}); ProtocolCode(err) != "message_expired" {
				t.Fatalf("an hour later: %v, want message_expired", err)
			}
			if _, err := Open(&env, OpenOptions{Trust: NewTrustStore(sender), Self: v.Receiver, Now: later, Records: true}); err != nil {
				t.Fatalf("as a record: %v", err)
			}
		})
	}
	for _, v := range file.Negative {
		t.Run("negative/"+v.Name, func(t *testing.T) {
			pub := ed25519.PublicKey(unhex(t, v.VerifyPublicKey))
			env := &synapsev1.Envelope{
				Header:  unhex(t, v.HeaderHex),
				Payload: unhex(t, v.PayloadHex),
				Signature: &synapsev1.Signature{
					Algorithm: synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519,
					KeyId:     KeyID(pub),
					Value:     unhex(t, v.SignatureHex),
				},
			}
			at := v.VerifyAt
			_, err := Open(env, OpenOptions{Trust: anyAgent{pub}, Now: func() time.Time { return at }})
			if err == nil {
				t.Fatalf("accepted, want %s", v.ExpectedError)
			}
			if got := ProtocolCode(err); got != v.ExpectedError {
				t.Fatalf("refused with %v, want %s", err, v.ExpectedError)
			}
		})
	}
}

// anyAgent trusts one key for whatever agent id it signs as: the negative
// vectors test the envelope checks, not the binding of ids to keys.
type anyAgent struct{ pub ed25519.PublicKey }

func (a anyAgent) KeyFor(keyID string) ed25519.PublicKey {
	if keyID == KeyID(a.pub) {
		return a.pub
	}
	return nil
}

func (a anyAgent) Check(_, _ string, pub ed25519.PublicKey) Verdict {
	if a.pub.Equal(pub) {
		return Trusted
	}
	return Conflict
}
