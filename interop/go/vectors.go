// Check (a): the language-neutral vectors under test/vectors, through the
// kit: RFC 8032 Ed25519, and the envelope vectors (signing input, key id,
// signature, a receiver's checks at verify_at; every negative vector refused
// for its expected reason).
package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	synapse "github.com/synapse-connect/synapse-go"
	"github.com/synapse-connect/synapse-go/synapsev1"
)

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(fmt.Sprintf("bad hex in vector: %v", err))
	}
	return b
}

func checkVectors(r *report, dir string) {
	var rfc struct {
		Vectors []struct {
			Name      string `json:"name"`
			SecretKey string `json:"secret_key"`
			PublicKey string `json:"public_key"`
			Message   string `json:"message"`
			Signature string `json:"signature"`
		} `json:"vectors"`
	}
	if err := readJSON(filepath.Join(dir, "rfc8032-ed25519.json"), &rfc); err != nil || len(rfc.Vectors) == 0 {
		r.fail("vectors/rfc8032", "cannot read vectors: %v", err)
	}
	for _, v := range rfc.Vectors {
		r.check("vectors/rfc8032/"+v.Name, func() error {
			id, err := synapse.IdentityFromSeed(unhex(v.SecretKey))
			if err != nil {
				return err
			}
			if !bytes.Equal(id.PublicKey, unhex(v.PublicKey)) {
				return fmt.Errorf("derived public key %x, want %s", id.PublicKey, v.PublicKey)
			}
			msg := unhex(v.Message)
			sig := id.Sign(msg)
			if !bytes.Equal(sig, unhex(v.Signature)) || !ed25519.Verify(id.PublicKey, msg, sig) {
				return fmt.Errorf("signature %x, want %s", sig, v.Signature)
			}
			sig[0] ^= 1
			if ed25519.Verify(id.PublicKey, msg, sig) {
				return fmt.Errorf("a signature with a flipped bit verifies")
			}
			return nil
		})
	}

	var env struct {
		Positive []struct {
			Name            string          `json:"name"`
			Seed            string          `json:"seed"`
			KeyID           string          `json:"key_id"`
			Header          json.RawMessage `json:"header"`
			HeaderHex       string          `json:"header_hex"`
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
	err := readJSON(filepath.Join(dir, "envelopes.json"), &env)
	if err != nil || len(env.Positive) == 0 || len(env.Negative) == 0 {
		r.fail("vectors/envelopes", "cannot read vectors: %v", err)
		return
	}
	for _, v := range env.Positive {
		r.check("vectors/envelope/"+v.Name, func() error {
			id, err := synapse.IdentityFromSeed(unhex(v.Seed))
			if err != nil {
				return err
			}
			if id.KeyID != v.KeyID {
				return fmt.Errorf("key id %s, want %s", id.KeyID, v.KeyID)
			}
			header, payload := unhex(v.HeaderHex), unhex(v.PayloadHex)
			if !bytes.Equal(synapse.SigningInput(header, payload), unhex(v.SigningInputHex)) {
				return fmt.Errorf("signing input differs")
			}
			if sig := synapse.SignBytes(id, header, payload).GetSignature().GetValue(); !bytes.Equal(sig, unhex(v.SignatureHex)) {
				return fmt.Errorf("signature %x, want %s", sig, v.SignatureHex)
			}
			var e synapsev1.Envelope
			var h synapsev1.Header
			if err := protojson.Unmarshal(v.Envelope, &e); err != nil {
				return err
			}
			if err := protojson.Unmarshal(v.Header, &h); err != nil {
				return err
			}
			at := v.VerifyAt
			trust := synapse.NewTrustStore(synapse.Peer{AgentID: h.GetSender().GetAgentId(), PublicKey: id.PublicKey})
			if _, err := synapse.Open(&e, synapse.OpenOptions{Trust: trust, Self: v.Receiver, Now: func() time.Time { return at }}); err != nil {
				return fmt.Errorf("refused at verify_at: %v", err)
			}
			return nil
		})
	}
	for _, v := range env.Negative {
		r.check("vectors/envelope-refused/"+v.Name, func() error {
			pub := ed25519.PublicKey(unhex(v.VerifyPublicKey))
			e := &synapsev1.Envelope{Header: unhex(v.HeaderHex), Payload: unhex(v.PayloadHex), Signature: &synapsev1.Signature{
				Algorithm: synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519, KeyId: synapse.KeyID(pub), Value: unhex(v.SignatureHex),
			}}
			at := v.VerifyAt
			_, err := synapse.Open(e, synapse.OpenOptions{Trust: anyAgent{pub}, Now: func() time.Time { return at }})
			if got := synapse.ProtocolCode(err); got != v.ExpectedError {
				return fmt.Errorf("got %v, want refusal %s", err, v.ExpectedError)
			}
			return nil
		})
	}
}

// anyAgent trusts one key for whatever agent id it signs as: the negative
// vectors test the envelope checks, not the binding of ids to keys.
type anyAgent struct{ pub ed25519.PublicKey }

func (a anyAgent) KeyFor(keyID string) ed25519.PublicKey {
	if keyID == synapse.KeyID(a.pub) {
		return a.pub
	}
	return nil
}

func (a anyAgent) Check(_, _ string, pub ed25519.PublicKey) synapse.Verdict {
	if a.pub.Equal(pub) {
		return synapse.Trusted
	}
	return synapse.Conflict
}
