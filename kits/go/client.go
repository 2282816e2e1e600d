package synapse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// Dial opens a gRPC connection to an agent's base URL: http://host:port
// (HTTP/2 cleartext with prior knowledge, as Synapse servers accept) or
// https://host:port (TLS with the system roots). Extra dial options are
// appended.
func Dial(rawURL string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("synapse: %q is not a base URL like http://host:port", rawURL)
	}
	var creds credentials.TransportCredentials
	switch u.Scheme {
	case "http":
		creds = insecure.NewCredentials()
	case "https":
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	default:
		return nil, fmt.Errorf("synapse: URL scheme %q: want http or https", u.Scheme)
	}
	return grpc.NewClient(u.Host, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts...)...)
}

// ClientOptions tune a Client; the zero value is usable.
type ClientOptions struct {
	// Executor, when set, is the agent the caller expects (pinned earlier):
	// NewClient refuses an agent that declares another id or key.
	Executor *Peer
	// MaxRetries bounds the resumptions of Watch and ReadResult after a
	// dropped connection (default 5); RetryBaseDelay doubles each time
	// (default 500 ms).
	MaxRetries     int
	RetryBaseDelay time.Duration
	// SendRetries bounds how often Send sends the same envelope again after
	// UNAVAILABLE (a server shutting down, a stream it refused, or one that
	// cannot be reached), with the RetryBaseDelay backoff (default 3; -1:
	// never). Send is idempotent by message id: a message the executor
	// already processed gets its stored reply and has no second effect.
	SendRetries int
	// EncryptionKey is the requester's X25519 key for confidential tasks:
	// each task key is wrapped to it too, so that a process holding it can
	// read the task later (GetTask). Default: a fresh key.
	EncryptionKey *EncryptionKey
}

// Client is a requester talking to one executor over gRPC: it seals every
// message with its identity, verifies every reply and event against the
// executor's key, and makes the bearer tokens of its reads.
type Client struct {
	// Executor is the agent called, as its GetCapabilities declared it.
	Executor Peer
	// Capabilities is what the executor declared.
	Capabilities *synapsev1.AgentCapabilities

	id      *Identity
	p2p     synapsev1.P2PServiceClient
	trust   *TrustStore
	retries int
	delay   time.Duration
	resends int

	enc *EncryptionKey

	mu       sync.Mutex
	token    string
	renewAt  time.Time
	taskKeys map[string][]byte
}

// NewClient learns the executor's identity with GetCapabilities (checking
// that its key id is its key's thumbprint) and returns a client that signs
// as id.
func NewClient(ctx context.Context, conn grpc.ClientConnInterface, id *Identity, opts ClientOptions) (*Client, error) {
	resp, err := synapsev1.NewCapabilitiesServiceClient(conn).GetCapabilities(ctx, &synapsev1.GetCapabilitiesRequest{})
	if err != nil {
		return nil, fmt.Errorf("synapse: GetCapabilities: %w", err)
	}
	executor, err := PeerFromCapabilities(resp.GetCapabilities())
	if err != nil {
		return nil, err
	}
	if e := opts.Executor; e != nil && (e.AgentID != executor.AgentID || !e.PublicKey.Equal(executor.PublicKey)) {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_UNKNOWN_SENDER, "the agent declares %s with key %s, but %s with key %s is expected",
			executor.AgentID, executor.KeyID, e.AgentID, KeyID(e.PublicKey))
	}
	c := &Client{
		Executor:     executor,
		Capabilities: resp.GetCapabilities(),
		id:           id,
		p2p:          synapsev1.NewP2PServiceClient(conn),
		// The agent at the URL the caller chose is trusted, whatever its id's form.
		trust:    NewTrustStore(executor),
		retries:  opts.MaxRetries,
		delay:    opts.RetryBaseDelay,
		resends:  opts.SendRetries,
		enc:      opts.EncryptionKey,
		taskKeys: map[string][]byte{},
	}
	if c.enc == nil {
		if c.enc, err = NewEncryptionKey(); err != nil {
			return nil, err
		}
	}
	if c.retries <= 0 {
		c.retries = 5
	}
	if c.delay <= 0 {
		c.delay = 500 * time.Millisecond
	}
	switch {
	case c.resends == 0:
		c.resends = 3
	case c.resends < 0:
		c.resends = 0
	}
	return c, nil
}

// Identity is the requester's identity.
func (c *Client) Identity() *Identity { return c.id }

// Seal seals a message of type t about taskID to the executor: with the
// task's key when the task is confidential and the client holds its key.
func (c *Client) Seal(t synapsev1.MessageType, payload proto.Message, taskID string) (*synapsev1.Envelope, *synapsev1.Header, error) {
	m := Message{Type: t, Payload: payload, Receiver: c.Executor, TaskID: taskID}
	if key := c.TaskKey(taskID); key != nil {
		return SealConfidential(c.id, m, Sealing{TaskKey: key})
	}
	return Seal(c.id, m)
}

// EncryptionKey is the requester's own X25519 key.
func (c *Client) EncryptionKey() *EncryptionKey { return c.enc }

// TaskKey is the key of a confidential task this client submitted or
// learned with GetTask, or nil.
func (c *Client) TaskKey(taskID string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.taskKeys[taskID]
}

func (c *Client) setTaskKey(taskID string, key []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.taskKeys[taskID] = key
}

// learnTaskKey unwraps a confidential task's key from Task.confidential
// with the requester's own encryption key, when it is not in memory.
func (c *Client) learnTaskKey(task *synapsev1.Task) error {
	conf := task.GetConfidential()
	if conf == nil || c.TaskKey(task.GetTaskId()) != nil {
		return nil
	}
	sender := task.GetRequester()
	if sender.GetKeyId() == "" {
		sender = &synapsev1.AgentRef{AgentId: c.id.AgentID, KeyId: c.id.KeyID}
	}
	key, err := UnwrapTaskKey(conf, task.GetTaskId(), sender, c.id.AgentID, []*EncryptionKey{c.enc}, time.Now())
	if err != nil {
		return err
	}
	c.setTaskKey(task.GetTaskId(), key)
	return nil
}

// Verify opens a message the executor signed and addressed to this
// requester. records skips the freshness check, for events read back.
func (c *Client) Verify(env *synapsev1.Envelope, records bool) (*Opened, error) {
	o, err := Open(env, OpenOptions{Trust: c.trust, Self: c.id.AgentID, Records: records, Confidential: &ConfidentialKeys{
		EncryptionKeys: []*EncryptionKey{c.enc},
		TaskKey:        func(h *synapsev1.Header) []byte { return c.TaskKey(h.GetTaskId()) },
	}})
	if err != nil {
		return nil, err
	}
	if o.Header.GetSender().GetAgentId() != c.Executor.AgentID {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_UNKNOWN_SENDER, "signed by %s, not the executor %s", o.Header.GetSender().GetAgentId(), c.Executor.AgentID)
	}
	return o, nil
}

// SendResult is the executor's answer to Send.
type SendResult struct {
	// TaskID is the task the message was about.
	TaskID string
	// Reply is the signed reply, verified (nil when the type has none).
	Reply *Opened
	// Task is the task after the message was applied (and after waiting).
	Task *synapsev1.Task
}

// Send delivers one sealed envelope; a positive wait holds the answer until
// the task is terminal or waits for input, or wait has passed. The reply is
// verified before it is returned. After UNAVAILABLE it sends the same
// envelope again, at most SendRetries times.
func (c *Client) Send(ctx context.Context, env *synapsev1.Envelope, wait time.Duration) (*SendResult, error) {
	req := &synapsev1.SendRequest{Envelope: env}
	if wait > 0 {
		req.Wait = durationpb.New(wait)
	}
	resp, err := c.sendAgain(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &SendResult{Task: resp.GetTask(), TaskID: resp.GetTask().GetTaskId()}
	if e := resp.GetReply().GetEnvelope(); e != nil {
		if out.Reply, err = c.Verify(e, false); err != nil {
			return nil, fmt.Errorf("synapse: the reply does not verify: %w", err)
		}
		if out.TaskID == "" {
			out.TaskID = out.Reply.Header.GetTaskId()
		}
	}
	return out, nil
}

// sendAgain makes the Send call, again after UNAVAILABLE (with backoff), at
// most c.resends more times.
func (c *Client) sendAgain(ctx context.Context, req *synapsev1.SendRequest) (*synapsev1.SendResponse, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.p2p.Send(ctx, req)
		if err == nil || status.Code(err) != codes.Unavailable || attempt > c.resends {
			return resp, err
		}
		if err := c.backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// SubmitOptions tune Submit; the zero value submits and answers at once.
type SubmitOptions struct {
	// TaskID defaults to a random UUID.
	TaskID string
	// Wait holds the answer until the task is terminal or waits for input.
	Wait time.Duration
	// IdempotencyKey makes a resubmission answer with the original task.
	IdempotencyKey string
	// CallbackURL asks the executor to push every event to this requester's
	// own agent (see Agent.ExpectCallbacks).
	CallbackURL string
	Priority    synapsev1.TaskPriority
	SessionID   string
	// Confidential seals the task (§9): the executor's current encryption
	// key is taken from its capabilities and its binding verified against
	// its identity key; the task key is wrapped to it and to this
	// requester, and every message and event of the task is sealed.
	Confidential bool
}

// Submit sends a signed task_request for taskType with the JSON-like input
// (a map[string]any, converted with structpb.NewStruct, or a *structpb.Struct).
func (c *Client) Submit(ctx context.Context, taskType string, input any, opts SubmitOptions) (*SendResult, error) {
	payload, ok := input.(*structpb.Struct)
	if !ok {
		m, isMap := input.(map[string]any)
		if input != nil && !isMap {
			return nil, fmt.Errorf("synapse: task input must be a map[string]any or *structpb.Struct, not %T", input)
		}
		var err error
		if payload, err = structpb.NewStruct(m); err != nil {
			return nil, fmt.Errorf("synapse: task input: %w", err)
		}
	}
	taskID := opts.TaskID
	if taskID == "" {
		taskID = NewUUID()
	}
	priority := opts.Priority
	if priority == synapsev1.TaskPriority_TASK_PRIORITY_UNSPECIFIED {
		priority = synapsev1.TaskPriority_TASK_PRIORITY_NORMAL
	}
	request := &synapsev1.TaskRequestPayload{
		Task:        &synapsev1.TaskSpec{Id: taskID, Type: taskType, Priority: priority, Payload: payload},
		CallbackUrl: opts.CallbackURL,
	}
	if opts.SessionID != "" {
		request.Context = &synapsev1.TaskContext{SessionId: opts.SessionID}
	}
	m := Message{
		Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST, Payload: request, Receiver: c.Executor,
		TaskID: taskID, IdempotencyKey: opts.IdempotencyKey, SessionID: opts.SessionID,
	}
	var env *synapsev1.Envelope
	var err error
	if opts.Confidential {
		env, err = c.sealRequest(m)
	} else {
		env, _, err = Seal(c.id, m)
	}
	if err != nil {
		return nil, err
	}
	res, err := c.Send(ctx, env, opts.Wait)
	if err != nil {
		return nil, err
	}
	res.TaskID = taskID
	return res, nil
}

// sealRequest seals a confidential task_request: a fresh task key wrapped
// to the executor's current encryption key (its binding verified against
// the executor's identity key) and to the requester's own.
func (c *Client) sealRequest(m Message) (*synapsev1.Envelope, error) {
	to, err := CurrentEncryptionKey(c.Capabilities.GetEncryptionKeys(), c.Executor.AgentID, c.Executor.PublicKey)
	if err != nil {
		return nil, err
	}
	self, err := SignEncryptionKey(c.id, c.enc)
	if err != nil {
		return nil, err
	}
	own, err := VerifyEncryptionKey(self, c.id.AgentID, c.id.PublicKey)
	if err != nil {
		return nil, err
	}
	key := NewTaskKey()
	sender := &synapsev1.AgentRef{AgentId: c.id.AgentID, KeyId: c.id.KeyID}
	var wrapped []*synapsev1.WrappedKey
	for _, b := range []*synapsev1.EncryptionKeyBinding{to, own} {
		w, err := WrapTaskKey(key, m.TaskID, sender, b)
		if err != nil {
			return nil, err
		}
		wrapped = append(wrapped, w)
	}
	env, _, err := SealConfidential(c.id, m, Sealing{TaskKey: key, Keys: wrapped})
	if err != nil {
		return nil, err
	}
	c.setTaskKey(m.TaskID, key)
	return env, nil
}

// Cancel sends a signed task_cancel (sealed on a confidential task); the
// reply is the executor's task_ack.
func (c *Client) Cancel(ctx context.Context, taskID, reason string) (*SendResult, error) {
	env, _, err := c.Seal(synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, &synapsev1.TaskCancelPayload{TaskId: taskID, Reason: reason}, taskID)
	if err != nil {
		return nil, err
	}
	return c.Send(ctx, env, 0)
}

// ProvideInfo answers a task_need_info with the missing fields (a
// map[string]any or a *structpb.Struct), sealed on a confidential task;
// a positive wait holds the answer as Submit's does.
func (c *Client) ProvideInfo(ctx context.Context, taskID string, fields any, wait time.Duration) (*SendResult, error) {
	s, ok := fields.(*structpb.Struct)
	if !ok {
		m, isMap := fields.(map[string]any)
		if fields != nil && !isMap {
			return nil, fmt.Errorf("synapse: fields must be a map[string]any or *structpb.Struct, not %T", fields)
		}
		var err error
		if s, err = structpb.NewStruct(m); err != nil {
			return nil, fmt.Errorf("synapse: fields: %w", err)
		}
	}
	env, _, err := c.Seal(synapsev1.MessageType_MESSAGE_TYPE_TASK_INFO_PROVIDED, &synapsev1.TaskInfoProvidedPayload{TaskId: taskID, Fields: s}, taskID)
	if err != nil {
		return nil, err
	}
	return c.Send(ctx, env, wait)
}

// Token is a bearer token for the executor, made afresh.
func (c *Client) Token(lifetime time.Duration) (string, error) {
	return c.id.Token(c.Executor.AgentID, lifetime)
}

// authorized attaches a bearer token, reusing one until a minute before it expires.
func (c *Client) authorized(ctx context.Context) (context.Context, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == "" || time.Now().After(c.renewAt) {
		const lifetime = 180 * time.Second
		token, err := c.Token(lifetime)
		if err != nil {
			return nil, err
		}
		c.token, c.renewAt = token, time.Now().Add(lifetime-60*time.Second)
	}
	return WithBearer(ctx, c.token), nil
}

// GetTask returns a task's current state (bearer-token authenticated). Of
// a confidential task it learns the task key from Task.confidential (the
// key wrapped to this requester) when it is not in memory, so that its
// events and result open afterwards.
func (c *Client) GetTask(ctx context.Context, taskID string) (*synapsev1.Task, error) {
	ctx, err := c.authorized(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.p2p.GetTask(ctx, &synapsev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		return nil, err
	}
	if resp.GetTask().GetTaskId() != taskID {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "asked for task %s, got %q", clip(taskID), clip(resp.GetTask().GetTaskId()))
	}
	if err := c.learnTaskKey(resp.GetTask()); err != nil {
		return nil, err
	}
	return resp.GetTask(), nil
}

// WatchItem is one verified item of a Watch: exactly one field is set.
type WatchItem struct {
	// Snapshot is the task when the stream first opened.
	Snapshot *synapsev1.Task
	// Event is a task event, its signature, receiver and sequence verified.
	Event *Opened
	// Heartbeat is a signed, fresh p2p:heartbeat of an idle stream.
	Heartbeat *Opened
	// Reconnecting reports a dropped stream about to be resumed from
	// FromSequence (the error says why).
	Reconnecting error
	// FromSequence is where a reconnection resumes.
	FromSequence uint64
}

// IsTerminalEvent reports whether an event ends its task (task_complete,
// task_failed, task_reject, or a task_ack that leads to a terminal state).
func IsTerminalEvent(o *Opened) bool {
	switch o.Type() {
	case synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE, synapsev1.MessageType_MESSAGE_TYPE_TASK_FAILED,
		synapsev1.MessageType_MESSAGE_TYPE_TASK_REJECT:
		return true
	case synapsev1.MessageType_MESSAGE_TYPE_TASK_ACK:
		return IsTerminalState(o.Payload.(*synapsev1.TaskAckPayload).GetState())
	}
	return false
}

// IsTerminalState reports whether a task state never changes again.
func IsTerminalState(s synapsev1.TaskState) bool {
	switch s {
	case synapsev1.TaskState_TASK_STATE_COMPLETED, synapsev1.TaskState_TASK_STATE_FAILED,
		synapsev1.TaskState_TASK_STATE_CANCELLED, synapsev1.TaskState_TASK_STATE_REJECTED:
		return true
	}
	return false
}

// resumable reports whether a failed stream may be opened again.
func resumable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.Aborted, codes.DeadlineExceeded:
		return true
	}
	return false
}

func (c *Client) backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(c.delay << (attempt - 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Watch streams a task's events from sequence from (0 or 1: from the
// beginning). Every event is verified against the executor's key and
// addressed to this requester, and must carry the next sequence number, in
// the stream and in its signed header; heartbeats are verified as live
// messages. After a dropped connection it resumes from the next sequence
// (yielding a Reconnecting item), so nothing is lost or repeated. The
// iteration ends after the terminal event, or with a final error.
func (c *Client) Watch(ctx context.Context, taskID string, from uint64) iter.Seq2[*WatchItem, error] {
	return func(yield func(*WatchItem, error) bool) {
		next := max(from, 1)
		sawSnapshot := false
		for attempt := 0; ; {
			err := c.watchOnce(ctx, taskID, &next, &sawSnapshot, &attempt, yield)
			if err == nil || errors.Is(err, errStop) {
				return
			}
			if !resumable(err) || attempt >= c.retries || ctx.Err() != nil {
				yield(nil, err)
				return
			}
			attempt++
			if !yield(&WatchItem{Reconnecting: err, FromSequence: next}, nil) {
				return
			}
			if err := c.backoff(ctx, attempt); err != nil {
				yield(nil, err)
				return
			}
		}
	}
}

var errStop = errors.New("stop")

// watchOnce reads one Watch stream; nil means the task's stream is over.
func (c *Client) watchOnce(ctx context.Context, taskID string, next *uint64, sawSnapshot *bool, attempt *int, yield func(*WatchItem, error) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx, err := c.authorized(ctx)
	if err != nil {
		return err
	}
	stream, err := c.p2p.Watch(ctx, &synapsev1.WatchRequest{TaskId: taskID, FromSequence: *next})
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		*attempt = 0
		var item *WatchItem
		switch kind := msg.GetKind().(type) {
		case *synapsev1.WatchResponse_Snapshot:
			if *sawSnapshot {
				continue
			}
			*sawSnapshot = true
			if kind.Snapshot.GetTaskId() == taskID {
				if err := c.learnTaskKey(kind.Snapshot); err != nil {
					yield(nil, err)
					return errStop
				}
			}
			item = &WatchItem{Snapshot: kind.Snapshot}
		case *synapsev1.WatchResponse_Heartbeat:
			o, err := c.Verify(kind.Heartbeat.GetEnvelope(), false)
			if err != nil {
				yield(nil, fmt.Errorf("synapse: heartbeat: %w", err))
				return errStop
			}
			item = &WatchItem{Heartbeat: o}
		case *synapsev1.WatchResponse_Event:
			o, err := c.checkEvent(kind.Event, *next, taskID)
			if err != nil {
				yield(nil, err)
				return errStop
			}
			*next++
			if !yield(&WatchItem{Event: o}, nil) {
				return errStop
			}
			if IsTerminalEvent(o) {
				return errStop
			}
			continue
		default:
			continue
		}
		if !yield(item, nil) {
			return errStop
		}
	}
}

func (c *Client) checkEvent(ev *synapsev1.TaskEvent, want uint64, taskID string) (*Opened, error) {
	if ev.GetSequence() != want {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "event %d arrived where %d was due", ev.GetSequence(), want)
	}
	o, err := c.Verify(ev.GetMessage().GetEnvelope(), true)
	if err != nil {
		return nil, fmt.Errorf("synapse: event %d: %w", want, err)
	}
	if o.Header.GetSequence() != want {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, "event %d is signed as sequence %d", want, o.Header.GetSequence())
	}
	if o.Header.GetTaskId() != taskID {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "event %d is about task %q, not %q", want, o.Header.GetTaskId(), taskID)
	}
	// Every event of a confidential task is sealed (§9.4).
	if !o.Confidential() && c.TaskKey(taskID) != nil {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_CONFIDENTIALITY_REQUIRED, "event %d of confidential task %s is in the clear", want, clip(taskID))
	}
	return o, nil
}

// ReadResultOptions tune ReadResult.
type ReadResultOptions struct {
	// Received are the bytes already read; reading resumes after them and
	// the SHA-256 is checked over all of them.
	Received []byte
	// Expected is result.stream of the verified task_complete: the total
	// size and SHA-256 are checked against it (else against the last chunk,
	// which the server did not sign).
	Expected *synapsev1.ResultStream
}

// ReadResult reads a task's result stream (TaskResult.stream), resuming
// after a dropped connection from the bytes it has, and returns the whole
// stream once its size and SHA-256 match what the executor signed. The
// stream of a confidential task is sealed records: when the client holds
// the task's key (it submitted the task, or learned the key with GetTask
// or Watch) it returns them opened, the plaintext.
func (c *Client) ReadResult(ctx context.Context, taskID string, opts ReadResultOptions) ([]byte, error) {
	sealed, err := c.readResult(ctx, taskID, opts)
	if err != nil {
		return nil, err
	}
	if key := c.TaskKey(taskID); key != nil {
		return OpenResult(key, taskID, sealed)
	}
	return sealed, nil
}

func (c *Client) readResult(ctx context.Context, taskID string, opts ReadResultOptions) ([]byte, error) {
	buf := bytes.NewBuffer(append([]byte(nil), opts.Received...))
	for attempt := 0; ; {
		last, err := c.readOnce(ctx, taskID, buf, &attempt)
		if err == nil {
			size, digest := last.GetTotalSize(), last.GetSha256()
			if opts.Expected != nil {
				size, digest = opts.Expected.GetTotalSize(), opts.Expected.GetSha256()
			}
			if uint64(buf.Len()) != size {
				return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "result is %d bytes, %d were promised", buf.Len(), size)
			}
			if sum := sha256.Sum256(buf.Bytes()); !bytes.Equal(sum[:], digest) {
				return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, "result SHA-256 does not match what the executor signed")
			}
			return buf.Bytes(), nil
		}
		if !resumable(err) || attempt >= c.retries || ctx.Err() != nil {
			return nil, err
		}
		attempt++
		if err := c.backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// readOnce reads one ReadResult stream into buf and returns its last chunk.
func (c *Client) readOnce(ctx context.Context, taskID string, buf *bytes.Buffer, attempt *int) (*synapsev1.StreamChunk, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx, err := c.authorized(ctx)
	if err != nil {
		return nil, err
	}
	stream, err := c.p2p.ReadResult(ctx, &synapsev1.ReadResultRequest{TaskId: taskID, Offset: uint64(buf.Len())})
	if err != nil {
		return nil, err
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "the result stream ended without its last chunk")
		}
		if err != nil {
			return nil, err
		}
		chunk := msg.GetChunk()
		if chunk.GetOffset() != uint64(buf.Len()) {
			return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "chunk at %d where %d was due", chunk.GetOffset(), buf.Len())
		}
		buf.Write(chunk.GetData())
		*attempt = 0
		if chunk.GetLast() {
			return chunk, nil
		}
	}
}
