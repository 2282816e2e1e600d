// Check (a): the language-neutral vectors under test/vectors. RFC 8032
// Ed25519 vectors with crypto/ed25519, and the Synapse envelope vectors:
// PAE signing input, RFC 7638 key id, signature, header and payload parsed
// with the generated Go types, and every negative vector refused for its
// expected reason.
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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	synapsev1 "synapse-interop/gen/synapse/v1"
)

type rfc8032File struct {
	Vectors []struct {
		Name      string `json:"name"`
		SecretKey string `json:"secret_key"`
		PublicKey string `json:"public_key"`
		Message   string `json:"message"`
		Signature string `json:"signature"`
	} `json:"vectors"`
}

type envelopeFile struct {
	SigningDomain    string           `json:"signing_domain"`
	ClockSkewSeconds int              `json:"clock_skew_seconds"`
	Positive         []positiveVector `json:"positive"`
	Negative         []negativeVector `json:"negative"`
}

type positiveVector struct {
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
}

type negativeVector struct {
	Name            string    `json:"name"`
	HeaderHex       string    `json:"header_hex"`
	PayloadHex      string    `json:"payload_hex"`
	SignatureHex    string    `json:"signature_hex"`
	VerifyPublicKey string    `json:"verify_public_key"`
	VerifyAt        time.Time `json:"verify_at"`
	ExpectedError   string    `json:"expected_error"`
}

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
	var rfc rfc8032File
	if err := readJSON(filepath.Join(dir, "rfc8032-ed25519.json"), &rfc); err != nil || len(rfc.Vectors) == 0 {
		r.fail("vectors/rfc8032", "cannot read vectors: %v", err)
	}
	for _, v := range rfc.Vectors {
		r.check("vectors/rfc8032/"+v.Name, func() error {
			priv := ed25519.NewKeyFromSeed(unhex(v.SecretKey))
			pub := priv.Public().(ed25519.PublicKey)
			if !bytes.Equal(pub, unhex(v.PublicKey)) {
				return fmt.Errorf("derived public key %x, want %s", pub, v.PublicKey)
			}
			msg := unhex(v.Message)
			sig := ed25519.Sign(priv, msg)
			if !bytes.Equal(sig, unhex(v.Signature)) {
				return fmt.Errorf("signature %x, want %s", sig, v.Signature)
			}
			if !ed25519.Verify(pub, msg, sig) {
				return fmt.Errorf("signature does not verify")
			}
			flipped := bytes.Clone(sig)
			flipped[0] ^= 1
			if ed25519.Verify(pub, msg, flipped) {
				return fmt.Errorf("a signature with a flipped bit verifies")
			}
			if len(msg) > 0 {
				m := bytes.Clone(msg)
				m[len(m)-1] ^= 1
				if ed25519.Verify(pub, m, sig) {
					return fmt.Errorf("a message with a flipped bit verifies")
				}
			}
			return nil
		})
	}

	var env envelopeFile
	if err := readJSON(filepath.Join(dir, "envelopes.json"), &env); err != nil || len(env.Positive) == 0 || len(env.Negative) == 0 {
		r.fail("vectors/envelopes", "cannot read vectors: %v", err)
		return
	}
	if env.SigningDomain != signingDomain {
		r.fail("vectors/envelopes", "signing_domain %q, want %q", env.SigningDomain, signingDomain)
	}
	skew := time.Duration(env.ClockSkewSeconds) * time.Second
	for _, v := range env.Positive {
		r.check("vectors/envelope/"+v.Name, func() error { return checkPositive(v, skew) })
	}
	for _, v := range env.Negative {
		r.check("vectors/envelope-refused/"+v.Name, func() error { return checkNegative(v, skew) })
	}
}

func checkPositive(v positiveVector, skew time.Duration) error {
	priv := ed25519.NewKeyFromSeed(unhex(v.Seed))
	pub := priv.Public().(ed25519.PublicKey)
	if !bytes.Equal(pub, unhex(v.PublicKey)) {
		return fmt.Errorf("public key from seed %x, want %s", pub, v.PublicKey)
	}
	if id := keyID(pub); id != v.KeyID {
		return fmt.Errorf("key id %s, want %s", id, v.KeyID)
	}
	header, payload := unhex(v.HeaderHex), unhex(v.PayloadHex)
	input := signingInput(header, payload)
	if !bytes.Equal(input, unhex(v.SigningInputHex)) {
		return fmt.Errorf("signing input %x, want %s", input, v.SigningInputHex)
	}
	sig := ed25519.Sign(priv, input)
	if !bytes.Equal(sig, unhex(v.SignatureHex)) {
		return fmt.Errorf("signature %x, want %s", sig, v.SignatureHex)
	}

	// The header bytes parse with the generated types and say what the JSON says.
	var h synapsev1.Header
	if err := proto.Unmarshal(header, &h); err != nil {
		return fmt.Errorf("header does not parse: %v", err)
	}
	var fromJSON synapsev1.Header
	if err := protojson.Unmarshal(v.Header, &fromJSON); err != nil {
		return fmt.Errorf("header JSON does not parse: %v", err)
	}
	if h.GetMessageId() != fromJSON.GetMessageId() || h.GetMessageId() == "" {
		return fmt.Errorf("header message_id %q, want %q", h.GetMessageId(), fromJSON.GetMessageId())
	}
	if !proto.Equal(&h, &fromJSON) {
		return fmt.Errorf("header bytes decode to %v, JSON says %v", &h, &fromJSON)
	}
	if h.GetPayloadType() != v.PayloadType {
		return fmt.Errorf("header payload_type %q, vector says %q", h.GetPayloadType(), v.PayloadType)
	}

	// So does the payload, with the type the header names.
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(v.PayloadType))
	if err != nil {
		return fmt.Errorf("payload type %s: %v", v.PayloadType, err)
	}
	p, pj := mt.New().Interface(), mt.New().Interface()
	if err := proto.Unmarshal(payload, p); err != nil {
		return fmt.Errorf("payload does not parse: %v", err)
	}
	if err := protojson.Unmarshal(v.Payload, pj); err != nil {
		return fmt.Errorf("payload JSON does not parse: %v", err)
	}
	if !proto.Equal(p, pj) {
		return fmt.Errorf("payload bytes decode to %v, JSON says %v", p, pj)
	}

	// The envelope in canonical JSON carries the same bytes and signature.
	var e synapsev1.Envelope
	if err := protojson.Unmarshal(v.Envelope, &e); err != nil {
		return fmt.Errorf("envelope JSON does not parse: %v", err)
	}
	if !bytes.Equal(e.GetHeader(), header) || !bytes.Equal(e.GetPayload(), payload) || !bytes.Equal(e.GetSignature().GetValue(), sig) {
		return fmt.Errorf("envelope JSON bytes differ from header_hex/payload_hex/signature_hex")
	}
	if len(e.GetSignature().GetPublicKey()) > 0 && !bytes.Equal(e.GetSignature().GetPublicKey(), pub) {
		return fmt.Errorf("envelope signature.public_key differs from public_key")
	}

	// And the whole envelope passes a receiver's checks at verify_at.
	from := peer{agentID: h.GetSender().GetAgentId(), keyID: v.KeyID, pub: pub}
	if _, err := open(&e, from, openOptions{self: v.Receiver, now: &v.VerifyAt, skew: skew}); err != nil {
		return fmt.Errorf("refused at verify_at: %v", err)
	}
	return nil
}

func checkNegative(v negativeVector, skew time.Duration) error {
	header, payload, sigValue := unhex(v.HeaderHex), unhex(v.PayloadHex), unhex(v.SignatureHex)
	pub := ed25519.PublicKey(unhex(v.VerifyPublicKey))
	sig := &synapsev1.Signature{
		Algorithm: synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519,
		KeyId:     keyID(pub),
		Value:     sigValue,
	}
	err := verifySignature(header, payload, sig, pub)
	if err == nil {
		// The bytes are authentic: the refusal must come from the time check.
		var h synapsev1.Header
		if perr := proto.Unmarshal(header, &h); perr != nil {
			err = refuse("message_format_invalid", "header does not parse: %v", perr)
		} else {
			err = checkTime(&h, v.VerifyAt, skew)
		}
	}
	if err == nil {
		return fmt.Errorf("accepted, want refusal %s", v.ExpectedError)
	}
	if codeOf(err) != v.ExpectedError {
		return fmt.Errorf("refused with %v, want %s", err, v.ExpectedError)
	}
	return nil
}
