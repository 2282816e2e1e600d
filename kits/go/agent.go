package synapse

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// Handler runs one task. It returns the task's output: a *structpb.Value,
// or any JSON-like Go value (converted with structpb.NewValue). An error
// fails the task: a *TaskError keeps its code, any other error is
// execution_failed. ctx is cancelled when the requester cancels the task or
// the agent's TaskTimeout passes.
type Handler func(ctx context.Context, task *Task) (any, error)

// TaskType is a task type an Agent runs.
type TaskType struct {
	// Type is the task type's name, e.g. "text_analysis".
	Type string
	// Name and Description are for humans.
	Name, Description string
	// InputSchema and OutputSchema are optional JSON Schema documents
	// (declared only; this agent does not validate against them).
	InputSchema, OutputSchema string
	// Handler runs each task of this type.
	Handler Handler
	// RequiresConfidentiality refuses a plaintext task_request of this
	// type with confidentiality_required (§9).
	RequiresConfidentiality bool
}

// Task is a running task as its handler sees it.
type Task struct {
	// ID and Type of the task.
	ID, Type string
	// Input is TaskSpec.payload.
	Input *structpb.Struct
	// Requester is the agent that asked.
	Requester Peer
	// Confidential is set when the request was confidential: every event
	// of the task is then sealed with its task key.
	Confidential bool

	agent *Agent
	rec   *taskRecord
}

// Progress records a signed task_status_update event (percent 0-100).
func (t *Task) Progress(percent uint32, message string) error {
	return t.agent.progress(t.rec, min(percent, 100), message)
}

// TaskError fails a task with a protocol error code.
type TaskError struct {
	Code        synapsev1.ErrorCode
	Message     string
	Recoverable bool
}

func (e *TaskError) Error() string { return ProtocolCodeOf(e.Code) + ": " + e.Message }

// AgentOptions configure an Agent.
type AgentOptions struct {
	// Name is the agent's human-readable name.
	Name string
	// TaskTypes are the task types it runs.
	TaskTypes []TaskType
	// Trust decides which requesters' keys are trusted; default
	// TrustOnFirstUse() (self-certifying ids pinned in memory).
	Trust TrustPolicy
	// MaxConcurrentTasks bounds the tasks not yet terminal (default 10).
	MaxConcurrentTasks int
	// TaskTimeout cancels a handler's context after this long (default 5 min).
	TaskTimeout time.Duration
	// ClockSkew for incoming messages (default DefaultClockSkew).
	ClockSkew time.Duration
	// HeartbeatInterval: an idle Watch stream gets a signed heartbeat this
	// often (default 30 s).
	HeartbeatInterval time.Duration
	// EncryptionKeys are the agent's X25519 keys for confidential tasks
	// (§9.1), published in its capabilities with signed bindings: the
	// newest without RetiredUntil is the one requesters seal to; retired
	// ones open requests until their RetiredUntil. Default: one fresh key.
	EncryptionKeys []*EncryptionKey
}

// Agent is a minimal Synapse executor for a grpc-go server. It serves
// CapabilitiesService (GetCapabilities, GetSupportedInterfaces,
// GetTaskTypeCapabilities) and P2PService: Send (task_request: verify,
// confirm as event 1, run the handler, record task_status_update from
// Task.Progress, then task_complete or task_failed; task_cancel; task_ack;
// heartbeat; capability_query; executor events pushed for tasks it
// requested, see ExpectCallbacks), and, with bearer tokens, GetTask,
// ListTasks and Watch. Every event is sealed once and the same bytes go to
// every reader. It takes confidential tasks (PROTOCOL.md §9): it publishes
// its encryption keys in its capabilities, opens confidential requests and
// follow-ups, seals every event of such a task with its task key, answers
// GetTask without the task's content, and refuses a plaintext request for a
// type that requires confidentiality, or a plaintext follow-up on a
// confidential task, with confidentiality_required.
//
// What it does not do: it keeps everything in memory (no durable store: a
// restart forgets tasks, pins and the replay memory), pushes no callbacks
// (a task_request with callback_url is refused with invalid_params: the
// requester watches or polls), never asks for information or a human
// decision, does not validate inputs against the declared schemas, produces
// no result streams (ReadResult answers FAILED_PRECONDITION), does not
// serve Handshake, and takes no confidential callbacks for tasks it
// requested (encryption_key_unknown). Task keys live in memory only.
type Agent struct {
	id      *Identity
	opts    AgentOptions
	types   map[string]TaskType
	trust   TrustPolicy
	vouched *TrustStore

	mu          sync.Mutex
	tasks       map[string]*taskRecord
	seen        map[string]seenMessage
	idempotency map[string]string // requester + "\x00" + key -> task id
	expected    map[string]*callbackBox
}

type seenMessage struct {
	digest  [32]byte
	reply   *synapsev1.SignedMessage
	taskID  string
	expires time.Time
}

type taskRecord struct {
	id, typ   string
	requester Peer
	request   *synapsev1.TaskRequestPayload
	state     synapsev1.TaskState
	progress  uint32
	status    string
	events    []*synapsev1.TaskEvent
	result    *synapsev1.TaskResult
	failure   *synapsev1.TaskError
	rejection *synapsev1.TaskRejectPayload
	// taskKey and conf are set on a confidential task: the key its events
	// are sealed with, and the request's Confidentiality (wrapped keys).
	taskKey    []byte
	conf       *synapsev1.Confidentiality
	created    time.Time
	updated    time.Time
	changed    chan struct{}
	cancel     context.CancelFunc
	requestID  string
	firstReply *synapsev1.SignedMessage
}

// NewAgent makes an agent that signs as id.
func NewAgent(id *Identity, opts AgentOptions) *Agent {
	if opts.MaxConcurrentTasks <= 0 {
		opts.MaxConcurrentTasks = 10
	}
	if opts.TaskTimeout <= 0 {
		opts.TaskTimeout = 5 * time.Minute
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 30 * time.Second
	}
	if opts.Name == "" {
		opts.Name = "Synapse Go agent"
	}
	trust := opts.Trust
	if trust == nil {
		trust = TrustOnFirstUse()
	}
	a := &Agent{
		id: id, opts: opts, types: map[string]TaskType{},
		vouched: NewTrustStore(),
		tasks:   map[string]*taskRecord{}, seen: map[string]seenMessage{},
		idempotency: map[string]string{}, expected: map[string]*callbackBox{},
	}
	a.trust = chain{trust, a.vouched}
	if len(a.opts.EncryptionKeys) == 0 {
		k, err := NewEncryptionKey()
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		a.opts.EncryptionKeys = []*EncryptionKey{k}
	}
	for _, t := range opts.TaskTypes {
		a.types[t.Type] = t
	}
	return a
}

// Identity is the agent's identity.
func (a *Agent) Identity() *Identity { return a.id }

// Register registers the agent's CapabilitiesService and P2PService on a
// gRPC server (grpc.NewServer()).
func (a *Agent) Register(s grpc.ServiceRegistrar) {
	synapsev1.RegisterCapabilitiesServiceServer(s, &capabilitiesServer{a: a})
	synapsev1.RegisterP2PServiceServer(s, &p2pServer{a: a})
}

// Capabilities is what GetCapabilities declares.
func (a *Agent) Capabilities() *synapsev1.AgentCapabilities {
	c := &synapsev1.AgentCapabilities{
		AgentId: a.id.AgentID, AgentName: a.opts.Name, ProtocolVersion: ProtocolVersion,
		SupportedContentTypes:   []string{"application/json"},
		SupportedTransportModes: []synapsev1.TransportMode{synapsev1.TransportMode_TRANSPORT_MODE_SYNC, synapsev1.TransportMode_TRANSPORT_MODE_POLLING},
		MaxFileSize:             10 << 20,
		MaxConcurrentTasks:      int32(a.opts.MaxConcurrentTasks),
		MaxTaskDurationSeconds:  int32(a.opts.TaskTimeout / time.Second),
		SupportProgressUpdates:  true,
		PublicKey:               a.id.PublicKey,
		KeyId:                   a.id.KeyID,
	}
	for _, t := range a.sortedTypes() {
		c.SupportedTaskTypes = append(c.SupportedTaskTypes, supportedType(t))
	}
	now := time.Now()
	for _, k := range a.opts.EncryptionKeys {
		if !k.usable(now) {
			continue
		}
		if signed, err := SignEncryptionKey(a.id, k); err == nil {
			c.EncryptionKeys = append(c.EncryptionKeys, signed)
		}
	}
	return c
}

// EncryptionKeys are the agent's X25519 keys (current and retired).
func (a *Agent) EncryptionKeys() []*EncryptionKey { return a.opts.EncryptionKeys }

// confidentialKeys is how Send opens a confidential message: a request
// with the agent's own keys, anything else with its task's key.
func (a *Agent) confidentialKeys() *ConfidentialKeys {
	return &ConfidentialKeys{
		EncryptionKeys: a.opts.EncryptionKeys,
		TaskKey: func(h *synapsev1.Header) []byte {
			a.mu.Lock()
			defer a.mu.Unlock()
			if t := a.tasks[h.GetTaskId()]; t != nil && t.requester.AgentID == h.GetSender().GetAgentId() {
				return t.taskKey
			}
			return nil
		},
	}
}

func (a *Agent) sortedTypes() []TaskType {
	out := make([]TaskType, 0, len(a.types))
	for _, t := range a.types {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

func supportedType(t TaskType) *synapsev1.SupportedTaskType {
	return &synapsev1.SupportedTaskType{Type: t.Type, Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, RequiresConfidentiality: t.RequiresConfidentiality}
}

// BasicInterfaces are the 8 basic standard interfaces (PROTOCOL.md §4) a
// registry requires; the Agent implements them.
var BasicInterfaces = []struct {
	Name     string
	Category synapsev1.InterfaceCategory
}{
	{"AgentIdentity", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_CORE},
	{"MessageHandler", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_CORE},
	{"CapabilitiesProvider", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_CORE},
	{"P2PTaskHandler", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_P2P},
	{"CallbackReceiver", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_P2P},
	{"HTTPTransport", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_TRANSPORT},
	{"Authenticator", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_SECURITY},
	{"IdempotencyHandler", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_SECURITY},
}

// Interfaces is what GetSupportedInterfaces declares.
func (a *Agent) Interfaces() []*synapsev1.ImplementedInterface {
	out := make([]*synapsev1.ImplementedInterface, 0, len(BasicInterfaces))
	for _, i := range BasicInterfaces {
		out = append(out, &synapsev1.ImplementedInterface{Name: i.Name, Category: i.Category, ComplianceLevel: synapsev1.Compliance_COMPLIANCE_BASIC, Version: ProtocolVersion})
	}
	return out
}

// ── callbacks: events pushed for tasks this agent requested ──────────────

type callbackBox struct {
	executor Peer
	last     uint64
	ch       chan *Opened
}

// ExpectCallbacks prepares the agent to receive the events an executor
// pushes for a task this agent requests with callback_url set to its own
// endpoint (call it before submitting). The executor's key is trusted for
// its id from then on. Each pushed event must be signed by that executor,
// addressed to this agent and be the next in sequence: it is delivered on
// the returned channel (closed after the terminal event) and answered with a
// signed p2p:ack; one already received is acknowledged again without
// effect; a gap is refused with illegal_transition. The channel holds 64
// events; a receiver that falls further behind makes the pushes wait.
func (a *Agent) ExpectCallbacks(executor Peer, taskID string) <-chan *Opened {
	a.vouched.Add(executor)
	box := &callbackBox{executor: executor, ch: make(chan *Opened, 64)}
	a.mu.Lock()
	a.expected[taskID] = box
	a.mu.Unlock()
	return box.ch
}

// ── the tasks this agent executes ───────────────────────────────────────

func (a *Agent) view(t *taskRecord) *synapsev1.Task {
	v := &synapsev1.Task{
		TaskId: t.id, TaskType: t.typ, State: t.state, Progress: t.progress, StatusMessage: t.status,
		Requester: t.requester.Ref(), Executor: a.id.Ref().Ref(),
		CreatedAt: timestamppb.New(t.created), UpdatedAt: timestamppb.New(t.updated),
		LastSequence: uint64(len(t.events)),
		Result:       t.result, Error: t.failure, Rejection: t.rejection, Request: t.request,
	}
	if t.conf != nil {
		// A confidential task shows its state, never its content (§9.4).
		v.Confidential = t.conf
		v.StatusMessage, v.Result, v.Error, v.Rejection, v.Request = "", nil, nil, nil, nil
	}
	return v
}

// record seals the next event of t (the lock is held) and wakes its readers.
func (a *Agent) record(t *taskRecord, typ synapsev1.MessageType, payload proto.Message, replyTo string, next synapsev1.TaskState) (*synapsev1.SignedMessage, error) {
	m := Message{
		Type: typ, Payload: payload, Receiver: t.requester, TaskID: t.id, ReplyTo: replyTo,
		Sequence: uint64(len(t.events) + 1), SessionID: t.request.GetContext().GetSessionId(),
	}
	var env *synapsev1.Envelope
	var header *synapsev1.Header
	var err error
	if t.taskKey != nil {
		env, header, err = SealConfidential(a.id, m, Sealing{TaskKey: t.taskKey})
	} else {
		env, header, err = Seal(a.id, m)
	}
	if err != nil {
		return nil, err
	}
	view := (&Opened{Header: header, Payload: payload}).View()
	if t.taskKey != nil {
		view = &synapsev1.EnvelopeView{Header: header}
	}
	msg := &synapsev1.SignedMessage{Envelope: env, View: view}
	t.events = append(t.events, &synapsev1.TaskEvent{Sequence: header.GetSequence(), Message: msg})
	t.state = next
	t.updated = time.Now()
	close(t.changed)
	t.changed = make(chan struct{})
	return msg, nil
}

func (a *Agent) progress(t *taskRecord, percent uint32, message string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if IsTerminalState(t.state) {
		return fmt.Errorf("synapse: task %s is over", t.id)
	}
	t.progress, t.status = percent, message
	_, err := a.record(t, synapsev1.MessageType_MESSAGE_TYPE_TASK_STATUS_UPDATE,
		&synapsev1.TaskStatusUpdatePayload{TaskId: t.id, Status: synapsev1.TaskState_TASK_STATE_EXECUTING, Progress: percent, Message: message},
		"", synapsev1.TaskState_TASK_STATE_EXECUTING)
	return err
}

// run runs a confirmed task's handler and records its outcome.
func (a *Agent) run(t *taskRecord, tt TaskType, ctx context.Context) {
	defer t.cancel()
	task := &Task{ID: t.id, Type: t.typ, Input: t.request.GetTask().GetPayload(), Requester: t.requester, Confidential: t.taskKey != nil, agent: a, rec: t}
	out, err := func() (out any, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the handler panicked: %v", p)
			}
		}()
		return tt.Handler(ctx, task)
	}()
	a.mu.Lock()
	defer a.mu.Unlock()
	if IsTerminalState(t.state) {
		return // cancelled meanwhile
	}
	var value *structpb.Value
	if err == nil {
		if value, err = toValue(out); err != nil {
			err = &TaskError{Code: synapsev1.ErrorCode_ERROR_CODE_OUTPUT_INVALID, Message: err.Error()}
		}
	}
	if err != nil {
		te := &TaskError{Code: synapsev1.ErrorCode_ERROR_CODE_EXECUTION_FAILED, Message: err.Error()}
		if errors.As(err, &te) {
			// keep the handler's code
		} else if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			te = &TaskError{Code: synapsev1.ErrorCode_ERROR_CODE_EXECUTION_TIMEOUT, Message: "the task ran past " + a.opts.TaskTimeout.String(), Recoverable: true}
		}
		t.failure = &synapsev1.TaskError{Code: te.Code, Message: te.Message, Recoverable: te.Recoverable}
		_, _ = a.record(t, synapsev1.MessageType_MESSAGE_TYPE_TASK_FAILED, &synapsev1.TaskFailedPayload{TaskId: t.id, Error: t.failure}, "", synapsev1.TaskState_TASK_STATE_FAILED)
		return
	}
	t.result = &synapsev1.TaskResult{OutputType: "json", Output: value}
	t.progress = 100
	_, _ = a.record(t, synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE, &synapsev1.TaskCompletePayload{TaskId: t.id, Result: t.result}, "", synapsev1.TaskState_TASK_STATE_COMPLETED)
}

func toValue(out any) (*structpb.Value, error) {
	switch v := out.(type) {
	case *structpb.Value:
		return v, nil
	case *structpb.Struct:
		return structpb.NewStructValue(v), nil
	case map[string]any:
		s, err := structpb.NewStruct(v)
		if err != nil {
			return nil, err
		}
		return structpb.NewStructValue(s), nil
	}
	return structpb.NewValue(out)
}

// ── P2PService ──────────────────────────────────────────────────────────

type p2pServer struct {
	synapsev1.UnimplementedP2PServiceServer
	a *Agent
}

func (s *p2pServer) Send(ctx context.Context, req *synapsev1.SendRequest) (*synapsev1.SendResponse, error) {
	a := s.a
	o, err := Open(req.GetEnvelope(), OpenOptions{Trust: a.trust, Self: a.id.AgentID, SelfKeyID: a.id.KeyID, ClockSkew: a.opts.ClockSkew, Confidential: a.confidentialKeys()})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if prior, ok := a.seen[o.Header.GetMessageId()]; ok {
		var resp *synapsev1.SendResponse
		if prior.digest == o.Digest {
			resp = &synapsev1.SendResponse{Reply: prior.reply}
			if t := a.tasks[prior.taskID]; t != nil {
				resp.Task = a.view(t)
			}
		}
		a.mu.Unlock()
		if resp == nil {
			return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_REPLAY_DETECTED, "message id %s was used for another message", clip(o.Header.GetMessageId()))
		}
		return resp, nil
	}
	reply, t, err := a.dispatch(o)
	if err == nil {
		a.remember(o, reply, t)
	}
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	resp := &synapsev1.SendResponse{Reply: reply}
	if t != nil {
		if w := req.GetWait().AsDuration(); w > 0 {
			a.wait(ctx, t, w)
		}
		a.mu.Lock()
		resp.Task = a.view(t)
		a.mu.Unlock()
	}
	return resp, nil
}

// remember keeps an accepted message's id until it would expire anyway.
func (a *Agent) remember(o *Opened, reply *synapsev1.SignedMessage, t *taskRecord) {
	now := time.Now()
	for id, m := range a.seen {
		if now.After(m.expires) {
			delete(a.seen, id)
		}
	}
	skew := a.opts.ClockSkew
	if skew <= 0 {
		skew = DefaultClockSkew
	}
	expires := o.Header.GetSentAt().AsTime().Add(skew)
	if e := o.Header.GetExpiresAt(); e != nil && e.AsTime().After(expires) {
		expires = e.AsTime()
	}
	m := seenMessage{digest: o.Digest, reply: reply, expires: expires.Add(skew)}
	if t != nil {
		m.taskID = t.id
	}
	a.seen[o.Header.GetMessageId()] = m
}

// wait holds until t is terminal or d has passed.
func (a *Agent) wait(ctx context.Context, t *taskRecord, d time.Duration) {
	// A task ends by its timeout; a little more lets its end be seen.
	timer := time.NewTimer(min(d, a.opts.TaskTimeout+time.Second))
	defer timer.Stop()
	for {
		a.mu.Lock()
		done, changed := IsTerminalState(t.state), t.changed
		a.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func taskNotFound(id string) error {
	return refuse(synapsev1.ErrorCode_ERROR_CODE_TASK_NOT_FOUND, "no task %s", clip(id))
}

// ownTask is the task of a requester's message; to anyone else it does not exist.
func (a *Agent) ownTask(o *Opened) (*taskRecord, error) {
	t := a.tasks[o.Header.GetTaskId()]
	if t == nil || t.requester.AgentID != o.Header.GetSender().GetAgentId() {
		return nil, taskNotFound(o.Header.GetTaskId())
	}
	// On a confidential task the requester's messages that carry content
	// are confidential too (§9.4).
	if t.taskKey != nil && !o.Confidential() {
		switch o.Type() {
		case synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, synapsev1.MessageType_MESSAGE_TYPE_TASK_INFO_PROVIDED,
			synapsev1.MessageType_MESSAGE_TYPE_HUMAN_DECISION:
			return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_CONFIDENTIALITY_REQUIRED, "task %s is confidential: a plaintext %v is refused", clip(t.id), o.Type())
		}
	}
	return t, nil
}

// reply seals a reply that is not a task event.
func (a *Agent) reply(o *Opened, typ synapsev1.MessageType, payload proto.Message) (*synapsev1.SignedMessage, error) {
	sender := Peer{AgentID: o.Header.GetSender().GetAgentId(), KeyID: o.Header.GetSender().GetKeyId()}
	env, header, err := Seal(a.id, Message{Type: typ, Payload: payload, Receiver: sender, TaskID: o.Header.GetTaskId(), ReplyTo: o.Header.GetMessageId()})
	if err != nil {
		return nil, err
	}
	return &synapsev1.SignedMessage{Envelope: env, View: (&Opened{Header: header, Payload: payload}).View()}, nil
}

// dispatch acts on an opened message (the lock is held).
func (a *Agent) dispatch(o *Opened) (*synapsev1.SignedMessage, *taskRecord, error) {
	switch o.Type() {
	case synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST:
		return a.accept(o)
	case synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL:
		t, err := a.ownTask(o)
		if err != nil {
			return nil, nil, err
		}
		if IsTerminalState(t.state) {
			return nil, nil, refuse(synapsev1.ErrorCode_ERROR_CODE_TASK_ALREADY_COMPLETED, "task %s is already %v", t.id, t.state)
		}
		t.cancel()
		reason := o.Payload.(*synapsev1.TaskCancelPayload).GetReason()
		t.failure = &synapsev1.TaskError{Code: synapsev1.ErrorCode_ERROR_CODE_TASK_CANCELLED, Message: "cancelled by the requester: " + reason}
		msg, err := a.record(t, synapsev1.MessageType_MESSAGE_TYPE_TASK_ACK, &synapsev1.TaskAckPayload{
			TaskId: t.id, AcknowledgedMessageId: o.Header.GetMessageId(), AcknowledgedType: o.Type(),
			State: synapsev1.TaskState_TASK_STATE_CANCELLED, Message: "task cancelled",
		}, o.Header.GetMessageId(), synapsev1.TaskState_TASK_STATE_CANCELLED)
		return msg, t, err
	case synapsev1.MessageType_MESSAGE_TYPE_TASK_ACK:
		t, err := a.ownTask(o)
		if err != nil {
			return nil, nil, err
		}
		if !IsTerminalState(t.state) {
			return nil, nil, a.illegal(t, o)
		}
		msg, err := a.reply(o, synapsev1.MessageType_MESSAGE_TYPE_ACK, &synapsev1.AckPayload{AcknowledgedMessageId: o.Header.GetMessageId(), Message: "task is " + t.state.String()})
		return msg, t, err
	case synapsev1.MessageType_MESSAGE_TYPE_TASK_INFO_PROVIDED, synapsev1.MessageType_MESSAGE_TYPE_HUMAN_DECISION:
		t, err := a.ownTask(o)
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, a.illegal(t, o)
	case synapsev1.MessageType_MESSAGE_TYPE_HEARTBEAT:
		msg, err := a.reply(o, synapsev1.MessageType_MESSAGE_TYPE_HEARTBEAT, a.heartbeat())
		return msg, nil, err
	case synapsev1.MessageType_MESSAGE_TYPE_CAPABILITY_QUERY:
		q := o.Payload.(*synapsev1.CapabilityQueryPayload)
		caps := a.Capabilities()
		if len(q.GetTaskTypes()) > 0 {
			wanted := map[string]bool{}
			for _, w := range q.GetTaskTypes() {
				wanted[w] = true
			}
			var kept []*synapsev1.SupportedTaskType
			for _, t := range caps.GetSupportedTaskTypes() {
				if wanted[t.GetType()] {
					kept = append(kept, t)
				}
			}
			caps.SupportedTaskTypes = kept
		}
		resp := &synapsev1.CapabilityResponsePayload{Capabilities: caps}
		if q.GetIncludeInterfaces() {
			resp.Interfaces = a.Interfaces()
		}
		msg, err := a.reply(o, synapsev1.MessageType_MESSAGE_TYPE_CAPABILITY_RESPONSE, resp)
		return msg, nil, err
	case synapsev1.MessageType_MESSAGE_TYPE_ACK, synapsev1.MessageType_MESSAGE_TYPE_NACK, synapsev1.MessageType_MESSAGE_TYPE_CAPABILITY_RESPONSE:
		return nil, nil, nil
	case synapsev1.MessageType_MESSAGE_TYPE_REGISTRY_REGISTER, synapsev1.MessageType_MESSAGE_TYPE_REGISTRY_DEREGISTER:
		return nil, nil, refuse(synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, "%v is sent to RegistryService, not to P2PService.Send", o.Type())
	default:
		return a.callback(o)
	}
}

func (a *Agent) illegal(t *taskRecord, o *Opened) error {
	r := refuse(synapsev1.ErrorCode_ERROR_CODE_ILLEGAL_TRANSITION, "%v is not allowed in %v", o.Type(), t.state)
	if IsTerminalState(t.state) {
		r.Code = synapsev1.ErrorCode_ERROR_CODE_TASK_ALREADY_COMPLETED
	}
	r.Details = map[string]any{"state": t.state.String(), "message_type": o.Type().String()}
	return r
}

func (a *Agent) heartbeat() *synapsev1.HeartbeatPayload {
	active := 0
	for _, t := range a.tasks {
		if !IsTerminalState(t.state) {
			active++
		}
	}
	return &synapsev1.HeartbeatPayload{Status: synapsev1.AgentStatus_AGENT_STATUS_READY, ActiveTasks: uint32(active), MaxConcurrentTasks: uint32(a.opts.MaxConcurrentTasks)}
}

// accept admits a task_request: task_confirm (event 1) and the handler
// starts, or task_reject (event 1) for a task type it does not run.
func (a *Agent) accept(o *Opened) (*synapsev1.SignedMessage, *taskRecord, error) {
	req := o.Payload.(*synapsev1.TaskRequestPayload)
	id := o.Header.GetTaskId()
	requester := Peer{AgentID: o.Header.GetSender().GetAgentId(), KeyID: o.Header.GetSender().GetKeyId(), PublicKey: o.PublicKey}
	if key := o.Header.GetIdempotencyKey(); key != "" {
		if prior := a.tasks[a.idempotency[requester.AgentID+"\x00"+key]]; prior != nil {
			return prior.firstReply, prior, nil
		}
	}
	if got := req.GetTask().GetId(); got != "" && got != id {
		return nil, nil, refuse(synapsev1.ErrorCode_ERROR_CODE_INVALID_PARAMS, "task.id %q differs from header.task_id %q", clip(got), clip(id))
	}
	if req.GetCallbackUrl() != "" {
		return nil, nil, refuse(synapsev1.ErrorCode_ERROR_CODE_INVALID_PARAMS, "callback_url is not supported by this agent: watch or poll the task instead")
	}
	if a.tasks[id] != nil {
		r := refuse(synapsev1.ErrorCode_ERROR_CODE_INVALID_PARAMS, "task id %s is already in use", clip(id))
		r.Status = codes.AlreadyExists
		return nil, nil, r
	}
	if tt, ok := a.types[req.GetTask().GetType()]; ok && tt.RequiresConfidentiality && !o.Confidential() {
		return nil, nil, refuse(synapsev1.ErrorCode_ERROR_CODE_CONFIDENTIALITY_REQUIRED, "task type %q takes only confidential requests", clip(tt.Type))
	}
	if a.heartbeat().GetActiveTasks() >= uint32(a.opts.MaxConcurrentTasks) {
		return nil, nil, &Refusal{Code: synapsev1.ErrorCode_ERROR_CODE_CONCURRENCY_LIMIT, Message: fmt.Sprintf("this agent runs at most %d tasks at once", a.opts.MaxConcurrentTasks)}
	}
	now := time.Now()
	if req.GetTask() == nil {
		req.Task = &synapsev1.TaskSpec{}
	}
	req.Task.Id = id
	t := &taskRecord{
		id: id, typ: req.GetTask().GetType(), requester: requester, request: req,
		state: synapsev1.TaskState_TASK_STATE_PENDING, created: now, updated: now,
		changed: make(chan struct{}), requestID: o.Header.GetMessageId(), cancel: func() {},
	}
	if o.Confidential() {
		t.taskKey, t.conf = o.TaskKey, o.Header.GetConfidential()
	}
	tt, ok := a.types[t.typ]
	var reason *synapsev1.Reason
	switch {
	case !ok:
		reason = &synapsev1.Reason{Code: synapsev1.ErrorCode_ERROR_CODE_CAPABILITY_LACKING, Message: fmt.Sprintf("task type %q is not supported", clip(t.typ))}
	case req.GetTask().GetDeadline() != nil && !req.GetTask().GetDeadline().AsTime().After(now):
		reason = &synapsev1.Reason{Code: synapsev1.ErrorCode_ERROR_CODE_INVALID_PARAMS, Message: "the task's deadline has passed"}
	}
	a.tasks[id] = t
	if key := o.Header.GetIdempotencyKey(); key != "" {
		a.idempotency[requester.AgentID+"\x00"+key] = id
	}
	if reason != nil {
		t.rejection = &synapsev1.TaskRejectPayload{TaskId: id, Reason: reason}
		msg, err := a.record(t, synapsev1.MessageType_MESSAGE_TYPE_TASK_REJECT, t.rejection, o.Header.GetMessageId(), synapsev1.TaskState_TASK_STATE_REJECTED)
		t.firstReply = msg
		return msg, t, err
	}
	msg, err := a.record(t, synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM, &synapsev1.TaskConfirmPayload{TaskId: id, Confirmed: true}, o.Header.GetMessageId(), synapsev1.TaskState_TASK_STATE_CONFIRMED)
	if err != nil {
		delete(a.tasks, id)
		return nil, nil, err
	}
	t.firstReply = msg
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.TaskTimeout)
	t.cancel = cancel
	go a.run(t, tt, ctx)
	// A handler that ignores its context still ends its task on time.
	time.AfterFunc(a.opts.TaskTimeout, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !IsTerminalState(t.state) {
			t.failure = &synapsev1.TaskError{Code: synapsev1.ErrorCode_ERROR_CODE_EXECUTION_TIMEOUT, Message: "the task ran past " + a.opts.TaskTimeout.String(), Recoverable: true}
			_, _ = a.record(t, synapsev1.MessageType_MESSAGE_TYPE_TASK_FAILED, &synapsev1.TaskFailedPayload{TaskId: t.id, Error: t.failure}, "", synapsev1.TaskState_TASK_STATE_FAILED)
		}
	})
	return msg, t, nil
}

// callback takes an executor's event pushed for a task this agent requested.
func (a *Agent) callback(o *Opened) (*synapsev1.SignedMessage, *taskRecord, error) {
	box := a.expected[o.Header.GetTaskId()]
	if box == nil || box.executor.AgentID != o.Header.GetSender().GetAgentId() {
		if t := a.tasks[o.Header.GetTaskId()]; t != nil && t.requester.AgentID == o.Header.GetSender().GetAgentId() {
			return nil, nil, refuse(synapsev1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, "%v is sent by a task's executor, and this agent is the executor of task %s", o.Type(), t.id)
		}
		return nil, nil, taskNotFound(o.Header.GetTaskId())
	}
	seq := o.Header.GetSequence()
	switch {
	case seq != 0 && seq <= box.last:
		// Already received: acknowledged again, without effect.
	case seq == box.last+1:
		box.last = seq
		a.mu.Unlock()
		box.ch <- o
		a.mu.Lock()
		if IsTerminalEvent(o) {
			close(box.ch)
			delete(a.expected, o.Header.GetTaskId())
		}
	default:
		r := refuse(synapsev1.ErrorCode_ERROR_CODE_ILLEGAL_TRANSITION, "event %d arrived where %d was due", seq, box.last+1)
		r.Details = map[string]any{"expected_sequence": strconv.FormatUint(box.last+1, 10)}
		return nil, nil, r
	}
	msg, err := a.reply(o, synapsev1.MessageType_MESSAGE_TYPE_ACK, &synapsev1.AckPayload{AcknowledgedMessageId: o.Header.GetMessageId()})
	return msg, nil, err
}

// authorize verifies a read's bearer token: the caller's agent id.
func (a *Agent) authorize(ctx context.Context) (*Caller, error) {
	token := BearerToken(ctx)
	if token == "" {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_UNAUTHENTICATED, "this call needs Authorization: Bearer <token> (PROTOCOL.md §5.4)")
	}
	return VerifyToken(token, VerifyTokenOptions{Audience: a.id.AgentID, Trust: a.trust})
}

// readable is the caller's own task, or task_not_found.
func (a *Agent) readable(ctx context.Context, id string) (*taskRecord, *Caller, error) {
	caller, err := a.authorize(ctx)
	if err != nil {
		return nil, nil, err
	}
	a.mu.Lock()
	t := a.tasks[id]
	a.mu.Unlock()
	if t == nil || t.requester.AgentID != caller.AgentID {
		return nil, nil, taskNotFound(id)
	}
	return t, caller, nil
}

func (s *p2pServer) GetTask(ctx context.Context, req *synapsev1.GetTaskRequest) (*synapsev1.GetTaskResponse, error) {
	t, _, err := s.a.readable(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	return &synapsev1.GetTaskResponse{Task: s.a.view(t)}, nil
}

func (s *p2pServer) ListTasks(ctx context.Context, req *synapsev1.ListTasksRequest) (*synapsev1.ListTasksResponse, error) {
	caller, err := s.a.authorize(ctx)
	if err != nil {
		return nil, err
	}
	size := int(req.GetPageSize())
	if size <= 0 {
		size = 50
	}
	size = min(size, 500)
	start := 0
	if req.GetPageToken() != "" {
		if start, err = strconv.Atoi(req.GetPageToken()); err != nil || start < 0 {
			return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_INVALID_PARAMS, "page_token is not one this agent gave")
		}
	}
	states := map[synapsev1.TaskState]bool{}
	for _, st := range req.GetStates() {
		states[st] = true
	}
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	var mine []*taskRecord
	for _, t := range a.tasks {
		if t.requester.AgentID == caller.AgentID && (len(states) == 0 || states[t.state]) {
			mine = append(mine, t)
		}
	}
	sort.Slice(mine, func(i, j int) bool {
		if !mine[i].created.Equal(mine[j].created) {
			return mine[i].created.After(mine[j].created)
		}
		return mine[i].id < mine[j].id
	})
	resp := &synapsev1.ListTasksResponse{}
	for i := start; i < len(mine) && i < start+size; i++ {
		resp.Tasks = append(resp.Tasks, a.view(mine[i]))
	}
	if start+size < len(mine) {
		resp.NextPageToken = strconv.Itoa(start + size)
	}
	return resp, nil
}

func (s *p2pServer) Watch(req *synapsev1.WatchRequest, stream grpc.ServerStreamingServer[synapsev1.WatchResponse]) error {
	a := s.a
	t, caller, err := a.readable(stream.Context(), req.GetTaskId())
	if err != nil {
		return err
	}
	next := max(req.GetFromSequence(), 1)
	a.mu.Lock()
	snapshot := a.view(t)
	a.mu.Unlock()
	if err := stream.Send(&synapsev1.WatchResponse{Kind: &synapsev1.WatchResponse_Snapshot{Snapshot: snapshot}}); err != nil {
		return err
	}
	for {
		a.mu.Lock()
		pending := t.events[min(int(next-1), len(t.events)):]
		over, changed := IsTerminalState(t.state), t.changed
		a.mu.Unlock()
		for _, ev := range pending {
			if err := stream.Send(&synapsev1.WatchResponse{Kind: &synapsev1.WatchResponse_Event{Event: ev}}); err != nil {
				return err
			}
			next = ev.GetSequence() + 1
		}
		if over {
			return nil
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-time.After(a.opts.HeartbeatInterval):
			payload := a.lockedHeartbeat()
			env, header, err := Seal(a.id, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_HEARTBEAT, Payload: payload, Receiver: Peer{AgentID: caller.AgentID, KeyID: caller.KeyID}})
			if err != nil {
				return err
			}
			hb := &synapsev1.SignedMessage{Envelope: env, View: (&Opened{Header: header, Payload: payload}).View()}
			if err := stream.Send(&synapsev1.WatchResponse{Kind: &synapsev1.WatchResponse_Heartbeat{Heartbeat: hb}}); err != nil {
				return err
			}
		}
	}
}

func (a *Agent) lockedHeartbeat() *synapsev1.HeartbeatPayload {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heartbeat()
}

func (s *p2pServer) ReadResult(req *synapsev1.ReadResultRequest, stream grpc.ServerStreamingServer[synapsev1.ReadResultResponse]) error {
	if _, _, err := s.a.readable(stream.Context(), req.GetTaskId()); err != nil {
		return err
	}
	return status.Error(codes.FailedPrecondition, "task "+req.GetTaskId()+" has no result stream")
}

// ── CapabilitiesService ─────────────────────────────────────────────────

type capabilitiesServer struct {
	synapsev1.UnimplementedCapabilitiesServiceServer
	a *Agent
}

func (s *capabilitiesServer) GetCapabilities(context.Context, *synapsev1.GetCapabilitiesRequest) (*synapsev1.GetCapabilitiesResponse, error) {
	return &synapsev1.GetCapabilitiesResponse{Capabilities: s.a.Capabilities()}, nil
}

func (s *capabilitiesServer) GetSupportedInterfaces(context.Context, *synapsev1.GetSupportedInterfacesRequest) (*synapsev1.GetSupportedInterfacesResponse, error) {
	return &synapsev1.GetSupportedInterfacesResponse{Interfaces: s.a.Interfaces()}, nil
}

func (s *capabilitiesServer) GetTaskTypeCapabilities(_ context.Context, req *synapsev1.GetTaskTypeCapabilitiesRequest) (*synapsev1.GetTaskTypeCapabilitiesResponse, error) {
	t, ok := s.a.types[req.GetTaskType()]
	if !ok {
		r := refuse(synapsev1.ErrorCode_ERROR_CODE_CAPABILITY_LACKING, "task type %q is not supported", clip(req.GetTaskType()))
		r.Status = codes.NotFound
		return nil, r
	}
	return &synapsev1.GetTaskTypeCapabilitiesResponse{TaskType: supportedType(t)}, nil
}
