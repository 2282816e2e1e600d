// Package synapse is a small kit for speaking the Synapse agent-to-agent task
// protocol (docs/PROTOCOL.md of synapse-connect) from Go over gRPC.
//
// It covers what generated stubs cannot: the Ed25519 envelope rules (the
// signing input, key ids, the receiver's checks in the order of §2.4),
// self-certifying agent ids, EdDSA bearer tokens (§5.4), a requester
// [Client] (Send with wait, Watch with resume and verification of every
// event, GetTask, ReadResult with resume and a SHA-256 check) and a minimal
// executor, [Agent], that serves CapabilitiesService and P2PService from a
// grpc-go server. Confidential tasks (§9) use the standard library's
// crypto/hpke, crypto/hkdf and AES-128-GCM: [SealConfidential], [Open] with
// [OpenOptions].Confidential, [SubmitOptions].Confidential, and an Agent
// that publishes its [EncryptionKey] and seals every event of such a task.
//
// The message types and gRPC stubs generated from proto/synapse/v1 live in
// the package [github.com/synapse-connect/synapse-go/synapsev1]; import that
// package for the messages rather than generating a second Go copy of
// synapse/v1 (protobuf-go refuses two registrations of the same proto names
// in one binary).
//
// A quick start:
//
//	me, _ := synapse.NewIdentity()
//	conn, _ := synapse.Dial("http://127.0.0.1:8080")
//	client, _ := synapse.NewClient(ctx, conn, me, synapse.ClientOptions{})
//	sent, _ := client.Submit(ctx, "text_analysis", map[string]any{"text": "Hi."}, synapse.SubmitOptions{})
//	for item, err := range client.Watch(ctx, sent.TaskID, 1) { ... }
package synapse
