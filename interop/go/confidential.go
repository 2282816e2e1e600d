// The confidential checks (docs/PROTOCOL.md §9) against the server's
// reference agent, through the kit's Client: (i) a confidential
// summarization without max_sentences asks for it with a sealed need-info,
// answered sealed, and completes with a summary; (j) a confidential
// data_analysis offers a sealed result stream, read and opened; (k) GetTask
// of it shows confidential and no content; (l) a confidential request whose
// header was changed after sealing is refused with decryption_failed. And
// the kit's own agent takes a confidential task from the kit's Client and,
// with -cli, from the TypeScript command line.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	synapse "github.com/synapse-connect/synapse-go"
	"github.com/synapse-connect/synapse-go/synapsev1"
)

const secretText = "The merger closes on Friday. Nobody outside the board knows. The price is forty dollars a share. Tell no one."

func checkConfidential(r *report, url string) {
	names := []string{"grpc/confidential-need-info", "grpc/confidential-result-stream", "grpc/confidential-get-task", "grpc/confidential-tampered-header-refused"}
	conn, err := synapse.Dial(url)
	if err != nil {
		r.skip(names, err.Error())
		return
	}
	defer conn.Close()
	s := &session{conn: conn}
	if err := s.capabilities(); err != nil {
		r.skip(names, err.Error())
		return
	}
	if len(s.client.Capabilities.GetEncryptionKeys()) == 0 {
		r.skip(names, "the server publishes no encryption key in its capabilities")
		return
	}
	r.check(names[0], s.confidentialNeedInfo)
	var taskID string
	if r.check(names[1], func() (err error) { taskID, err = s.confidentialResult(); return err }) {
		r.check(names[2], func() error { return s.confidentialGetTask(taskID) })
	} else {
		r.skip(names[2:3], "no confidential task")
	}
	r.check(names[3], s.confidentialTampered)
}

// sealedOnly: a confidential event whose envelope shows nothing of needle.
func sealedOnly(o *synapse.Opened, needle string) error {
	if !o.Confidential() || len(o.Envelope.GetSignature().GetValue()) != 0 {
		return fmt.Errorf("event %d (%v) is not sealed", o.Header.GetSequence(), o.Type())
	}
	if needle != "" && bytes.Contains(o.Envelope.GetPayload(), []byte(needle)) {
		return fmt.Errorf("event %d (%v) shows %q in its ciphertext", o.Header.GetSequence(), o.Type(), needle)
	}
	return nil
}

// (i) the sealed need-info answered with a sealed task_info_provided.
func (s *session) confidentialNeedInfo() error {
	ctx, cancel := rpcContext(60 * time.Second)
	defer cancel()
	sent, err := s.client.Submit(ctx, "summarization", map[string]any{"text": secretText}, synapse.SubmitOptions{Confidential: true, Wait: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("Send: %v", err)
	}
	if err := sealedOnly(sent.Reply, "merger"); err != nil {
		return err
	}
	asked, answered := false, false
	var summary string
	for item, err := range s.client.Watch(ctx, sent.TaskID, 1) {
		if err != nil {
			return err
		}
		if item.Event == nil {
			continue
		}
		ev := item.Event
		if err := sealedOnly(ev, "merger"); err != nil {
			return err
		}
		logf("confidential event %d %v", ev.Header.GetSequence(), ev.Type())
		switch p := ev.Payload.(type) {
		case *synapsev1.TaskNeedInfoPayload:
			if asked {
				return fmt.Errorf("asked twice")
			}
			asked = true
			if len(p.GetMissingFields()) == 0 || p.GetMissingFields()[0].GetField() != "max_sentences" {
				return fmt.Errorf("need-info asks for %v", p.GetMissingFields())
			}
			res, err := s.client.ProvideInfo(ctx, sent.TaskID, map[string]any{"max_sentences": 2}, 0)
			if err != nil {
				return fmt.Errorf("task_info_provided: %v", err)
			}
			if res.Reply != nil && !res.Reply.Confidential() && res.Reply.Header.GetSequence() != 0 {
				return fmt.Errorf("the reply to task_info_provided is an event in the clear")
			}
			answered = true
		case *synapsev1.TaskCompletePayload:
			out := p.GetResult().GetOutput().GetStructValue().GetFields()
			summary = out["summary"].GetStringValue()
			if n := len(out["sentences"].GetListValue().GetValues()); n != 2 {
				return fmt.Errorf("the summary keeps %d sentences, want 2: %v", n, out)
			}
		}
	}
	if !asked || !answered || summary == "" {
		return fmt.Errorf("need-info seen %v, answered %v, summary %q", asked, answered, summary)
	}
	return nil
}

// (j) the result stream is sealed records; ReadResult opens them.
func (s *session) confidentialResult() (string, error) {
	ctx, cancel := rpcContext(60 * time.Second)
	defer cancel()
	sent, err := s.client.Submit(ctx, "data_analysis", map[string]any{"csv": "a,b\n1,2\n3,4\n", "include_rows": true}, synapse.SubmitOptions{Confidential: true, Wait: 30 * time.Second})
	if err != nil {
		return "", fmt.Errorf("Send: %v", err)
	}
	var complete *synapsev1.TaskCompletePayload
	for item, err := range s.client.Watch(ctx, sent.TaskID, 1) {
		if err != nil {
			return "", err
		}
		if item.Event == nil {
			continue
		}
		if err := sealedOnly(item.Event, "parsed_rows"); err != nil {
			return "", err
		}
		if p, ok := item.Event.Payload.(*synapsev1.TaskCompletePayload); ok {
			complete = p
		}
	}
	if complete == nil {
		return "", fmt.Errorf("no task_complete")
	}
	stream := complete.GetResult().GetStream()
	if stream.GetTotalSize() == 0 {
		return "", fmt.Errorf("the sealed task_complete offers no result stream: %v", complete.GetResult())
	}
	plain, err := s.client.ReadResult(ctx, sent.TaskID, synapse.ReadResultOptions{Expected: stream})
	if err != nil {
		return "", err
	}
	if uint64(len(plain)) != stream.GetTotalSize()-16 {
		return "", fmt.Errorf("opened %d bytes of a %d-byte sealed stream: not one sealed record", len(plain), stream.GetTotalSize())
	}
	var doc struct {
		ParsedRows []map[string]any `json:"parsed_rows"`
	}
	if err := json.Unmarshal(plain, &doc); err != nil {
		return "", fmt.Errorf("the opened stream is not JSON: %v", err)
	}
	if len(doc.ParsedRows) != 2 || fmt.Sprint(doc.ParsedRows[1]["b"]) != "4" {
		return "", fmt.Errorf("parsed_rows %v", doc.ParsedRows)
	}
	return sent.TaskID, nil
}

// (k) GetTask of a confidential task: its state and wrapped keys, no content.
func (s *session) confidentialGetTask(taskID string) error {
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	task, err := s.client.GetTask(ctx, taskID)
	if err != nil {
		return err
	}
	if task.GetConfidential() == nil || len(task.GetConfidential().GetKeys()) == 0 {
		return fmt.Errorf("GetTask shows no confidential: %v", task)
	}
	if task.GetRequest() != nil || task.GetResult() != nil {
		return fmt.Errorf("GetTask shows the request or the result in the clear")
	}
	if task.GetState() != synapsev1.TaskState_TASK_STATE_COMPLETED {
		return fmt.Errorf("state %v", task.GetState())
	}
	return nil
}

// (l) a confidential request, its header changed after sealing.
func (s *session) confidentialTampered() error {
	taskID := synapse.NewUUID()
	env, err := s.sealedRequest(taskID)
	if err != nil {
		return err
	}
	h := &synapsev1.Header{}
	if err := proto.Unmarshal(env.GetHeader(), h); err != nil {
		return err
	}
	h.CorrelationId = "changed-after-sealing"
	if env.Header, err = proto.Marshal(h); err != nil {
		return err
	}
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	_, err = s.client.Send(ctx, env, 0)
	return expectRefusal(err, codes.InvalidArgument, "decryption_failed")
}

// sealedRequest is a confidential text_analysis request, as Submit seals it.
func (s *session) sealedRequest(taskID string) (*synapsev1.Envelope, error) {
	c := s.client
	to, err := synapse.CurrentEncryptionKey(c.Capabilities.GetEncryptionKeys(), c.Executor.AgentID, c.Executor.PublicKey)
	if err != nil {
		return nil, err
	}
	key := synapse.NewTaskKey()
	w, err := synapse.WrapTaskKey(key, taskID, &synapsev1.AgentRef{AgentId: c.Identity().AgentID, KeyId: c.Identity().KeyID}, to)
	if err != nil {
		return nil, err
	}
	env, _, err := synapse.SealConfidential(c.Identity(), synapse.Message{
		Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST, Receiver: c.Executor, TaskID: taskID,
		Payload: &synapsev1.TaskRequestPayload{Task: &synapsev1.TaskSpec{Id: taskID, Type: "text_analysis", Priority: synapsev1.TaskPriority_TASK_PRIORITY_NORMAL}},
	}, synapse.Sealing{TaskKey: key, Keys: []*synapsev1.WrappedKey{w}})
	return env, err
}

// submitConfidentialToOwnAgent: the kit's Client submits "reverse_secret"
// to the kit's agent, refused in the clear, then confidential, and reads
// its sealed events.
func submitConfidentialToOwnAgent(url string) error {
	conn, err := synapse.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	me, err := synapse.NewIdentity()
	if err != nil {
		return err
	}
	ctx, cancel := rpcContext(20 * time.Second)
	defer cancel()
	client, err := synapse.NewClient(ctx, conn, me, synapse.ClientOptions{})
	if err != nil {
		return err
	}
	if _, err := client.Submit(ctx, "reverse_secret", map[string]any{"text": "Synapse"}, synapse.SubmitOptions{}); synapse.ProtocolCode(err) != "confidentiality_required" {
		return fmt.Errorf("a request in the clear for reverse_secret: %v, want confidentiality_required", err)
	}
	sent, err := client.Submit(ctx, "reverse_secret", map[string]any{"text": "Synapse"}, synapse.SubmitOptions{Confidential: true})
	if err != nil {
		return err
	}
	var output string
	for item, err := range client.Watch(ctx, sent.TaskID, 1) {
		if err != nil {
			return err
		}
		if item.Event == nil {
			continue
		}
		if err := sealedOnly(item.Event, "espanyS"); err != nil {
			return err
		}
		if c, ok := item.Event.Payload.(*synapsev1.TaskCompletePayload); ok {
			output = c.GetResult().GetOutput().GetStructValue().GetFields()["reversed"].GetStringValue()
		}
	}
	if output != "espanyS" {
		return fmt.Errorf("output %q", output)
	}
	return nil
}

// cliSubmitsConfidential: `synapse submit URL --protocol grpc --type
// reverse_secret --confidential --watch --json` against the kit's agent
// (which takes that type only confidential): the TypeScript client seals
// to the key the Go agent publishes and opens the events it seals.
func cliSubmitsConfidential(cli, url string) error {
	home, err := os.MkdirTemp("", "synapse-cli-home-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	ctx, cancel := rpcContext(60 * time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", cli, "submit", url, "--protocol", "grpc", "--type", "reverse_secret", "--confidential",
		"--payload", `{"text":"secret Go kit"}`, "--watch", "--json", "--home", home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	var states []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var ev struct {
			Kind  string `json:"kind"`
			State string `json:"state"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == "event" {
			states = append(states, ev.State)
		}
	}
	if len(states) == 0 || states[len(states)-1] != "COMPLETED" || !strings.Contains(string(out), "tik oG terces") {
		return fmt.Errorf("the command line saw states %v:\n%s", states, out)
	}
	logf("typescript cli, confidential: %v", states)
	return nil
}
