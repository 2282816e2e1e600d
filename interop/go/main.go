// Command synapse-interop proves that a Go program built on the Go kit
// (github.com/synapse-connect/synapse-go and the stubs it ships, generated
// from proto/synapse/v1) speaks the Synapse protocol: it checks the
// language-neutral vectors, then talks gRPC to a running server (a signed
// task, a verified watch, refusals, bearer tokens, a result stream, a
// confidential task with a sealed need-info and a sealed result), runs a
// gRPC-only agent that registers there and receives signed callbacks, and
// serves a task type of its own with the kit's Agent, submitted to by the
// kit's client and, with -cli, by the TypeScript command line (in the clear
// and confidentially). It prints one
// line per check, "PASS <name>" or "FAIL <name>: <why>", and exits 1 if any
// check failed.
//
//	synapse-interop -url http://127.0.0.1:8080 -vectors test/vectors [-cli dist/src/cli/main.js] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"
)

// verbose: -v logs the server's answers to stderr.
var verbose bool

func logf(format string, args ...any) {
	if verbose {
		fmt.Fprintf(os.Stderr, "  "+format+"\n", args...)
	}
}

// report prints check results and remembers whether any failed.
type report struct{ passed, failed int }

func (r *report) fail(name string, format string, args ...any) {
	r.failed++
	fmt.Printf("FAIL %s: %s\n", name, fmt.Sprintf(format, args...))
}

// check runs fn as the check called name: a nil error passes it; an error
// or a panic fails it.
func (r *report) check(name string, fn func() error) bool {
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		return fn()
	}()
	if err != nil {
		r.fail(name, "%v", err)
		return false
	}
	r.passed++
	fmt.Printf("PASS %s\n", name)
	return true
}

// skip fails the checks that could not run.
func (r *report) skip(names []string, why string) {
	for _, name := range names {
		r.fail(name, "not run: %s", why)
	}
}

func rpcContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func main() {
	url := flag.String("url", "", "the server's base URL, http://host:port")
	vectors := flag.String("vectors", "test/vectors", "directory holding rfc8032-ed25519.json, envelopes.json and confidential.json")
	cli := flag.String("cli", "", "the TypeScript command line (dist/src/cli/main.js) to submit to this program's agent; empty skips that check")
	flag.BoolVar(&verbose, "v", false, "log what the server answered to stderr")
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "usage: synapse-interop -url http://host:port [-vectors DIR] [-cli main.js]")
		os.Exit(2)
	}
	r := &report{}
	checkVectors(r, *vectors)
	checkConfidentialVectors(r, *vectors)
	checkLive(r, *url)
	checkConfidential(r, *url)
	checkRegisteredAgent(r, *url)
	checkOwnAgent(r, *cli)
	fmt.Printf("%d passed, %d failed\n", r.passed, r.failed)
	if r.failed > 0 {
		os.Exit(1)
	}
}
