// Command synapse-interop proves that a Go program using only code generated
// from proto/synapse/v1 (protoc-gen-go, protoc-gen-go-grpc) and the standard
// library's crypto/ed25519 speaks the Synapse protocol: it checks the
// language-neutral vectors, then talks gRPC to a running server, and runs a
// gRPC-only agent that registers there and receives callbacks. It prints
// one line per check, "PASS <name>" or "FAIL <name>: <why>", and exits 1 if
// any check failed.
//
//	synapse-interop -url http://127.0.0.1:8080 -vectors test/vectors [-v]
package main

import (
	"flag"
	"fmt"
	"os"
)

// verbose: -v logs the server's answers to stderr.
var verbose bool

func logf(format string, args ...any) {
	if verbose {
		fmt.Fprintf(os.Stderr, "  "+format+"\n", args...)
	}
}

// report prints check results and remembers whether any failed.
type report struct{ failed int }

func (r *report) pass(name string) { fmt.Printf("PASS %s\n", name) }

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
	r.pass(name)
	return true
}

func main() {
	url := flag.String("url", "", "the server's base URL, http://host:port")
	vectors := flag.String("vectors", "test/vectors", "directory holding rfc8032-ed25519.json and envelopes.json")
	flag.BoolVar(&verbose, "v", false, "log what the server answered to stderr")
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "usage: synapse-interop -url http://host:port [-vectors DIR]")
		os.Exit(2)
	}
	r := &report{}
	checkVectors(r, *vectors)
	checkLive(r, *url)
	checkAgent(r, *url)
	if r.failed > 0 {
		fmt.Fprintf(os.Stderr, "%d check(s) failed\n", r.failed)
		os.Exit(1)
	}
}
