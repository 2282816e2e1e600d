// Command loadgen is the peer bench's load generator (npm run bench -- peer):
// one program drives Synapse and the A2A-js peer alike, so neither side's
// figures include a different client. It prints one JSON line on stdout.
//
//	loadgen -mode synapse-grpc|synapse-connect-json|a2a-grpc|a2a-jsonrpc -target URL
//	        [-concurrency 64] [-warmup 1] [-seconds 5 | -count N] [-pid SERVER_PID]
//	        [-text TEXT] [-text-bytes N] [-seed HEX] [-conns 1]
//	loadgen -mode synapse-watch -target URL -watchers 10000 -conns 20 [-seed HEX]
//	loadgen -mode grpc-health -target URL [-concurrency 64] [-warmup 1] [-seconds 5] [-pid SERVER_PID]
//
// -target is http://host:port: the Synapse server (both protocols on one
// port), the A2A agent's gRPC port, or its JSON-RPC URL. -pid makes it read
// the server's CPU time (Linux /proc) at the start and end of the measured
// part. -text-bytes repeats -text up to that many bytes. grpc-health sends
// grpc.health.v1.Health/Check: a bare unary call, to measure the transport.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const defaultText = "Synapse agents exchange signed task requests. Each envelope carries an Ed25519 signature over the exact bytes sent. " +
	"The executor verifies it, records the task, runs the handler and signs every event it returns."

// maxMessage lifts gRPC's 4 MiB default, for the 1 MB payload turns and their answers.
const maxMessage = 64 << 20

func dialGrpc(target string) (*grpc.ClientConn, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || u.Scheme != "http" {
		return nil, fmt.Errorf("-target %q: want http://host:port", target)
	}
	conn, err := grpc.NewClient(u.Host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
	if err != nil {
		return nil, err
	}
	conn.Connect()
	return conn, nil
}

// httpClient keeps one HTTP/1.1 connection per worker. No Accept-Encoding:
// answers are compared uncompressed (the peer's express server never compresses).
func httpClient(concurrency int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        concurrency * 2,
		MaxIdleConnsPerHost: concurrency * 2,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

func repeatTo(text string, size int) string {
	if size <= 0 {
		return text
	}
	var b strings.Builder
	b.Grow(size + len(text))
	for b.Len() < size {
		b.WriteString(text)
		b.WriteByte(' ')
	}
	return b.String()[:size]
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	mode := flag.String("mode", "", "synapse-grpc, synapse-connect-json, a2a-grpc, a2a-jsonrpc, synapse-watch or grpc-health")
	target := flag.String("target", "", "the server's URL, http://host:port")
	concurrency := flag.Int("concurrency", 64, "requests in flight (closed loop: one worker each)")
	warmup := flag.Float64("warmup", 1, "seconds of load before the measured part")
	seconds := flag.Float64("seconds", 5, "measured seconds")
	count := flag.Int("count", 0, "measure exactly this many requests instead of -seconds")
	pid := flag.Int("pid", 0, "the server's process id, to read its CPU time")
	text := flag.String("text", defaultText, "the text every task analyses")
	textBytes := flag.Int("text-bytes", 0, "repeat -text up to this many bytes")
	seedHex := flag.String("seed", "", "32-byte Ed25519 seed of the requester, hex (default: a new key)")
	conns := flag.Int("conns", 1, "gRPC connections (HTTP/2) to spread calls or watch streams over")
	watchers := flag.Int("watchers", 10000, "synapse-watch: Watch streams to open")
	timeout := flag.Duration("timeout", 2*time.Minute, "per request; for synapse-watch, the whole run")
	ids := flag.String("ids", "v7", "Synapse task and message ids: v7 (time-ordered, as Synapse's clients make them) or v4 (random)")
	flag.Parse()
	switch *ids {
	case "v7":
		newID = uuidV7
	case "v4":
		newID = uuidV4
	default:
		fmt.Fprintf(os.Stderr, "loadgen: -ids must be v7 or v4, not %q\n", *ids)
		os.Exit(2)
	}

	seed := make([]byte, 32)
	if *seedHex != "" {
		decoded, err := hex.DecodeString(*seedHex)
		if err != nil || len(decoded) != 32 {
			fatal("-seed must be 64 hex digits")
		}
		seed = decoded
	} else if _, err := rand.Read(seed); err != nil {
		fatal("%v", err)
	}
	me := identityFromSeed(seed)
	body := repeatTo(*text, *textBytes)
	options := loadOptions{
		concurrency: *concurrency,
		warmup:      time.Duration(*warmup * float64(time.Second)),
		duration:    time.Duration(*seconds * float64(time.Second)),
		count:       *count,
		pid:         *pid,
		timeout:     *timeout,
	}
	grpcConns := func() []grpc.ClientConnInterface {
		out := make([]grpc.ClientConnInterface, max(1, *conns))
		for i := range out {
			conn, err := dialGrpc(*target)
			if err != nil {
				fatal("%v", err)
			}
			out[i] = conn
		}
		return out
	}
	// Calls take the connections in turn.
	spread := func(conns []grpc.ClientConnInterface, build func(grpc.ClientConnInterface) call) call {
		calls := make([]call, 0, len(conns))
		for _, c := range conns {
			calls = append(calls, build(c))
		}
		var next atomic.Uint64
		return func(ctx context.Context) error {
			return calls[next.Add(1)%uint64(len(calls))](ctx)
		}
	}
	setup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var out any
	switch *mode {
	case "synapse-grpc":
		cs := grpcConns()
		client, err := newSynapseClient(setup, cs[0], me, map[string]any{"text": body})
		if err != nil {
			fatal("%v", err)
		}
		out = runLoad(*mode, spread(cs, client.grpcCall), options)
	case "synapse-connect-json":
		cs := grpcConns() // GetCapabilities only
		client, err := newSynapseClient(setup, cs[0], me, map[string]any{"text": body})
		if err != nil {
			fatal("%v", err)
		}
		out = runLoad(*mode, client.connectJSONCall(httpClient(*concurrency), strings.TrimRight(*target, "/")), options)
	case "a2a-grpc":
		out = runLoad(*mode, spread(grpcConns(), func(c grpc.ClientConnInterface) call { return a2aGrpcCall(c, body) }), options)
	case "a2a-jsonrpc":
		out = runLoad(*mode, a2aJSONRPCCall(httpClient(*concurrency), *target, body), options)
	case "grpc-health":
		out = runLoad(*mode, spread(grpcConns(), healthCall), options)
	case "synapse-watch":
		sender, err := dialGrpc(*target)
		if err != nil {
			fatal("%v", err)
		}
		result, err := runWatch(sender, grpcConns(), me, body, *watchers, *timeout, *pid)
		if err != nil {
			fatal("%v", err)
		}
		out = result
	default:
		fatal("unknown -mode %q", *mode)
	}
	line, err := json.Marshal(out)
	if err != nil {
		fatal("%v", err)
	}
	fmt.Println(string(line))
}
