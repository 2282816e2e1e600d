// Check (a), continued: test/vectors/confidential.json through the kit.
// Every positive vector opens to its plaintext with its inner signature;
// every negative one is refused with its code (the two whose inner
// signature is replaced are sealed again here with the task key, as one
// holding it could); every binding verifies; the 70,000-byte result seals
// to the vectors' records and a cut stream is refused.
package main

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	synapse "github.com/synapse-connect/synapse-go"
	"github.com/synapse-connect/synapse-go/synapsev1"
)

type confidentialFile struct {
	VerifyAt   string `json:"verify_at"`
	TaskID     string `json:"task_id"`
	TaskKeyHex string `json:"task_key_hex"`
	Parties    map[string]struct {
		AgentID       string `json:"agent_id"`
		PublicKey     string `json:"ed25519_public_key"`
		X25519Private string `json:"x25519_private_key"`
		KeyIDEnc      string `json:"encryption_key_id"`
		Binding       string `json:"encryption_key_binding_hex"`
	} `json:"parties"`
	RawPositive []struct {
		Name         string `json:"name"`
		Opener       string `json:"opener"`
		EnvelopeHex  string `json:"envelope_hex"`
		PlaintextHex string `json:"plaintext_payload_hex"`
		InnerSigHex  string `json:"inner_signature_hex"`
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
		SealedSize    int    `json:"sealed_size"`
		SealedSHA256  string `json:"sealed_sha256"`
		LastRecordHex string `json:"last_record_hex"`
	} `json:"result"`
}

func (f *confidentialFile) open(opener string, env *synapsev1.Envelope) (*synapse.Opened, error) {
	var peers []synapse.Peer
	for _, p := range f.Parties {
		peers = append(peers, synapse.Peer{AgentID: p.AgentID, PublicKey: unhex(p.PublicKey)})
	}
	enc, err := synapse.EncryptionKeyFromBytes(unhex(f.Parties[opener].X25519Private))
	if err != nil {
		return nil, err
	}
	at, err := time.Parse(time.RFC3339, f.VerifyAt)
	if err != nil {
		return nil, err
	}
	return synapse.Open(env, synapse.OpenOptions{
		Trust: synapse.NewTrustStore(peers...), Self: f.Parties[opener].AgentID, Now: func() time.Time { return at },
		Confidential: &synapse.ConfidentialKeys{EncryptionKeys: []*synapse.EncryptionKey{enc}, TaskKey: func(h *synapsev1.Header) []byte {
			if h.GetTaskId() == f.TaskID {
				return unhex(f.TaskKeyHex)
			}
			return nil
		}},
	})
}

// pae is PROTOCOL.md §2.1's encoding, for sealing a vector again.
func pae(pieces ...[]byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(pieces)))
	for _, p := range pieces {
		out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

// resealed seals the message again with the task key around another inner signature.
func resealed(env *synapsev1.Envelope, taskKey []byte, sign func(input []byte) []byte) (*synapsev1.Envelope, error) {
	h := &synapsev1.Header{}
	if err := proto.Unmarshal(env.GetHeader(), h); err != nil {
		return nil, err
	}
	_, payload, err := synapse.OpenSealedPayload(env.GetHeader(), h, env.GetPayload(), taskKey)
	if err != nil {
		return nil, err
	}
	key, err := hkdf.Key(sha256.New, taskKey, nil, string(pae([]byte("synapse.v1.MessageKey"), []byte(h.GetMessageId()))), 16)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain := append(sign(synapse.SigningInput(env.GetHeader(), payload)), payload...)
	out := proto.Clone(env).(*synapsev1.Envelope)
	out.Payload = g.Seal(nil, h.GetConfidential().GetNonce(), plain, pae([]byte("synapse.v1.Confidential"), env.GetHeader()))
	return out, nil
}

func envelope(hexed string) (*synapsev1.Envelope, error) {
	env := &synapsev1.Envelope{}
	return env, proto.Unmarshal(unhex(hexed), env)
}

func checkConfidentialVectors(r *report, dir string) {
	var f confidentialFile
	if err := readJSON(filepath.Join(dir, "confidential.json"), &f); err != nil || len(f.RawPositive) == 0 || len(f.Negative) == 0 {
		r.fail("vectors/confidential", "cannot read vectors: %v", err)
		return
	}
	taskKey := unhex(f.TaskKeyHex)
	for _, v := range f.RawPositive {
		r.check("vectors/confidential/"+v.Name, func() error {
			env, err := envelope(v.EnvelopeHex)
			if err != nil {
				return err
			}
			o, err := f.open(v.Opener, env)
			if err != nil {
				return err
			}
			if hex.EncodeToString(o.PlainPayload) != v.PlaintextHex {
				return fmt.Errorf("opened to %x", o.PlainPayload)
			}
			if sig := unhex(v.InnerSigHex); !bytes.Equal(o.InnerSignature, sig) || !ed25519.Verify(o.PublicKey, synapse.SigningInput(env.GetHeader(), o.PlainPayload), sig) {
				return fmt.Errorf("the inner signature is not the vector's, or does not verify")
			}
			return nil
		})
	}
	for _, v := range f.Negative {
		r.check("vectors/confidential/"+v.Name, func() error {
			env, err := envelope(v.EnvelopeHex)
			if err != nil {
				return err
			}
			if v.ZeroSignature {
				if env, err = resealed(env, taskKey, func([]byte) []byte { return make([]byte, 64) }); err != nil {
					return err
				}
			}
			if v.ResignWith != "" {
				other, err := synapse.IdentityFromSeed(unhex(v.ResignWith))
				if err != nil {
					return err
				}
				if env, err = resealed(env, taskKey, other.Sign); err != nil {
					return err
				}
			}
			_, err = f.open(v.Opener, env)
			if got := synapse.ProtocolCode(err); got != v.ExpectedError {
				return fmt.Errorf("refused with %q (%v), want %s", got, err, v.ExpectedError)
			}
			return nil
		})
	}
	r.check("vectors/confidential/bindings", func() error {
		for name, p := range f.Parties {
			signed := &synapsev1.SignedEncryptionKey{}
			if err := proto.Unmarshal(unhex(p.Binding), signed); err != nil {
				return err
			}
			b, err := synapse.VerifyEncryptionKey(signed, p.AgentID, unhex(p.PublicKey))
			if err != nil || b.GetKeyId() != p.KeyIDEnc {
				return fmt.Errorf("%s: %v", name, err)
			}
			if _, err := synapse.VerifyEncryptionKey(signed, "agent_someone_else", unhex(p.PublicKey)); err == nil {
				return fmt.Errorf("%s: a binding moved to another agent verifies", name)
			}
		}
		return nil
	})
	r.check("vectors/confidential/result-records", func() error {
		plain := make([]byte, f.Result.ResultSize)
		for i := range plain {
			plain[i] = byte(i % 251)
		}
		sealed := synapse.SealResult(taskKey, f.Result.TaskID, plain)
		sum := sha256.Sum256(sealed)
		if len(sealed) != f.Result.SealedSize || hex.EncodeToString(sum[:]) != f.Result.SealedSHA256 ||
			hex.EncodeToString(sealed[synapse.ResultRecordSize+16:]) != f.Result.LastRecordHex {
			return fmt.Errorf("sealed %d bytes, SHA-256 %x", len(sealed), sum)
		}
		if back, err := synapse.OpenResult(taskKey, f.Result.TaskID, sealed); err != nil || !bytes.Equal(back, plain) {
			return fmt.Errorf("does not open back: %v", err)
		}
		if _, err := synapse.OpenResult(taskKey, f.Result.TaskID, sealed[:synapse.ResultRecordSize+16]); synapse.ProtocolCode(err) != "decryption_failed" {
			return fmt.Errorf("a cut stream: %v", err)
		}
		return nil
	})
}
