package synapse

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// Confidential messages, result records and records at rest (PROTOCOL.md
// §9.2 to §9.6): AES-128-GCM under keys derived from the task key.

// ── messages ────────────────────────────────────────────────────────────

// derivedKey is HKDF-SHA256 (empty salt) of the task key with info
// PAE([label, piece]): the AES-128 key of one use of it.
func derivedKey(taskKey []byte, label, piece string) []byte {
	k, err := hkdf.Key(sha256.New, taskKey, nil, string(pae([]byte(label), []byte(piece))), aesKeySize)
	if err != nil {
		panic(err) // only for lengths HKDF-SHA256 cannot give
	}
	return k
}

func gcm(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // a 16-byte key always makes a cipher
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return g
}

// Sealing is how SealConfidential seals one message.
type Sealing struct {
	// TaskKey is the task's key.
	TaskKey []byte
	// Keys, on a task_request only: the task key wrapped to each party.
	Keys []*synapsev1.WrappedKey
	// Nonce is the 12-byte AES-GCM nonce; fresh and random when empty.
	Nonce []byte
}

// SealConfidential seals a message confidentially (§9.2): header with
// confidential set, signed over header and plaintext payload, then the
// signature and payload encrypted with the message key, the header as
// associated data. The outer signature has no value.
func SealConfidential(id *Identity, m Message, s Sealing) (*synapsev1.Envelope, *synapsev1.Header, error) {
	if len(s.TaskKey) != TaskKeySize {
		return nil, nil, fmt.Errorf("synapse: a task key is %d bytes, not %d", TaskKeySize, len(s.TaskKey))
	}
	nonce := s.Nonce
	if len(nonce) == 0 {
		nonce = make([]byte, nonceSize)
		if _, err := rand.Read(nonce); err != nil {
			return nil, nil, err
		}
	} else if len(nonce) != nonceSize {
		return nil, nil, fmt.Errorf("synapse: the nonce is %d bytes, not %d", len(nonce), nonceSize)
	}
	header, err := buildHeader(id, m)
	if err != nil {
		return nil, nil, err
	}
	header.Confidential = &synapsev1.Confidentiality{Suite: Suite, TaskKeyId: TaskKeyID(s.TaskKey), Nonce: nonce, Keys: s.Keys}
	headerBytes, err := proto.Marshal(header)
	if err != nil {
		return nil, nil, err
	}
	payload, err := proto.Marshal(m.Payload)
	if err != nil {
		return nil, nil, err
	}
	plaintext := append(id.Sign(SigningInput(headerBytes, payload)), payload...)
	sealed := gcm(derivedKey(s.TaskKey, messageKeyInfo, header.GetMessageId())).Seal(nil, nonce, plaintext, pae([]byte(aadDomain), headerBytes))
	env := &synapsev1.Envelope{
		Header:  headerBytes,
		Payload: sealed,
		Signature: &synapsev1.Signature{
			Algorithm: synapsev1.SignatureAlgorithm_SIGNATURE_ALGORITHM_ED25519,
			KeyId:     id.KeyID,
			PublicKey: id.PublicKey,
		},
	}
	return env, header, nil
}

// OpenSealedPayload decrypts a confidential envelope's payload with the
// task key: the inner signature and the plaintext payload. It checks
// nothing else; Open does.
func OpenSealedPayload(headerBytes []byte, header *synapsev1.Header, sealed, taskKey []byte) (signature, payload []byte, err error) {
	conf := header.GetConfidential()
	if conf.GetSuite() != Suite {
		return nil, nil, decryptionFailed("unknown confidential suite %v", conf.GetSuite())
	}
	if len(conf.GetNonce()) != nonceSize {
		return nil, nil, decryptionFailed("header.confidential.nonce must be %d bytes", nonceSize)
	}
	if len(taskKey) != TaskKeySize || TaskKeyID(taskKey) != conf.GetTaskKeyId() {
		return nil, nil, keyUnknown("sealed with task key %q, not this task's", clip(conf.GetTaskKeyId()))
	}
	plain, err := gcm(derivedKey(taskKey, messageKeyInfo, header.GetMessageId())).Open(nil, conf.GetNonce(), sealed, pae([]byte(aadDomain), headerBytes))
	if err != nil {
		return nil, nil, decryptionFailed("the payload does not open: the header or the ciphertext was changed, or another key sealed it")
	}
	if len(plain) < ed25519.SignatureSize {
		return nil, nil, decryptionFailed("the opened payload is shorter than a signature")
	}
	return plain[:ed25519.SignatureSize], plain[ed25519.SignatureSize:], nil
}

// ConfidentialKeys is how Open finds the task key of a confidential message.
type ConfidentialKeys struct {
	// EncryptionKeys are the receiver's own keys (current and retired): a
	// task_request's task key is unwrapped with them.
	EncryptionKeys []*EncryptionKey
	// TaskKey returns the key of the task header.task_id names, for every
	// other message; nil (or a nil func) when there is no such
	// confidential task.
	TaskKey func(header *synapsev1.Header) []byte
}

// taskKeyFor is step 2 of §9.3.
func (k *ConfidentialKeys) taskKeyFor(header *synapsev1.Header, self string, now time.Time) ([]byte, error) {
	if k == nil {
		return nil, keyUnknown("this receiver holds no key for confidential messages")
	}
	conf := header.GetConfidential()
	if conf.GetSuite() != Suite {
		return nil, decryptionFailed("unknown confidential suite %v", conf.GetSuite())
	}
	if header.GetMessageType() == synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST {
		if self == "" {
			self = header.GetReceiver().GetAgentId()
		}
		return UnwrapTaskKey(conf, header.GetTaskId(), header.GetSender(), self, k.EncryptionKeys, now)
	}
	var key []byte
	if k.TaskKey != nil {
		key = k.TaskKey(header)
	}
	if key == nil {
		return nil, keyUnknown("no confidential task %s is known here", clip(header.GetTaskId()))
	}
	if TaskKeyID(key) != conf.GetTaskKeyId() {
		return nil, keyUnknown("sealed with task key %q, not task %s's", clip(conf.GetTaskKeyId()), clip(header.GetTaskId()))
	}
	return key, nil
}

// ── result records ──────────────────────────────────────────────────────

func recordNonce(i uint64) []byte {
	n := make([]byte, nonceSize)
	binary.BigEndian.PutUint64(n[4:], i)
	return n
}

func recordAAD(taskID string, i uint64, final bool) []byte {
	var idx [8]byte
	binary.LittleEndian.PutUint64(idx[:], i)
	f := []byte{0}
	if final {
		f[0] = 1
	}
	return pae([]byte(resultAAD), []byte(taskID), idx[:], f)
}

// SealResult seals a task's result as records of ResultRecordSize
// plaintext bytes (§9.5): what is stored, served and described by the
// signed result.stream. An empty result is one empty record.
func SealResult(taskKey []byte, taskID string, plaintext []byte) []byte {
	g := gcm(derivedKey(taskKey, resultKeyInfo, taskID))
	count := max(1, (len(plaintext)+ResultRecordSize-1)/ResultRecordSize)
	out := make([]byte, 0, len(plaintext)+count*tagSize)
	for i := 0; i < count; i++ {
		record := plaintext[i*ResultRecordSize : min(len(plaintext), (i+1)*ResultRecordSize)]
		out = g.Seal(out, recordNonce(uint64(i)), record, recordAAD(taskID, uint64(i), i == count-1))
	}
	return out
}

// OpenResult opens a whole sealed result; decryption_failed when a record
// does not open or the stream was cut after a record.
func OpenResult(taskKey []byte, taskID string, sealed []byte) ([]byte, error) {
	g := gcm(derivedKey(taskKey, resultKeyInfo, taskID))
	step := ResultRecordSize + tagSize
	count := max(1, (len(sealed)+step-1)/step)
	out := make([]byte, 0, len(sealed))
	for i := 0; i < count; i++ {
		record := sealed[i*step : min(len(sealed), (i+1)*step)]
		var err error
		if out, err = g.Open(out, recordNonce(uint64(i)), record, recordAAD(taskID, uint64(i), i == count-1)); err != nil {
			return nil, decryptionFailed("result record %d of task %s does not open", i, clip(taskID))
		}
	}
	return out, nil
}

// ── records at rest ─────────────────────────────────────────────────────

// SealAtRest seals a task record's content for a store (§9.6): a fresh
// nonce, then AES-128-GCM under the record key with the task id as
// associated data.
func SealAtRest(taskKey []byte, taskID string, plaintext []byte) []byte {
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return gcm(derivedKey(taskKey, recordKeyInfo, taskID)).Seal(nonce, nonce, plaintext, []byte(taskID))
}

// OpenAtRest opens what SealAtRest sealed.
func OpenAtRest(taskKey []byte, taskID string, sealed []byte) ([]byte, error) {
	if len(sealed) < nonceSize+tagSize {
		return nil, decryptionFailed("the stored record of task %s is too short", clip(taskID))
	}
	out, err := gcm(derivedKey(taskKey, recordKeyInfo, taskID)).Open(nil, sealed[:nonceSize], sealed[nonceSize:], []byte(taskID))
	if err != nil {
		return nil, decryptionFailed("the stored record of task %s does not open", clip(taskID))
	}
	return out, nil
}
