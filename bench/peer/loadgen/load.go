// The closed loop: N workers each send one request after another, first for
// a warm-up that is not counted, then for a measured time (or until exactly
// -count requests have completed). Every latency is kept, so p50/p99 are
// exact. The server's CPU time (utime + stime from /proc/PID/stat) is read at
// the start and the end of the measured part only.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// call sends one request and checks its answer; an error counts as a failed request.
type call func(ctx context.Context) error

// loadResult is the one JSON line a load mode prints.
type loadResult struct {
	Mode        string `json:"mode"`
	Concurrency int    `json:"concurrency"`
	Requests    int    `json:"requests"`
	// WarmupRequests completed before the measured part (the server served them too).
	WarmupRequests int      `json:"warmup_requests"`
	Errors         int      `json:"errors"`
	Seconds        float64  `json:"seconds"`
	RPS            float64  `json:"rps"`
	P50Ms          float64  `json:"p50_ms"`
	P99Ms          float64  `json:"p99_ms"`
	ServerCPUMs    *float64 `json:"server_cpu_ms"`
	// GeneratorCPUMs is this process's own CPU time over the measured part: on
	// shared cores the server gets what the generator leaves.
	GeneratorCPUMs *float64 `json:"generator_cpu_ms"`
	FirstError     string   `json:"first_error,omitempty"`
}

const clockTicksPerSecond = 100 // USER_HZ on Linux

// cpuMs is the user + system CPU time of process pid so far, in milliseconds.
func cpuMs(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	stat := string(raw)
	// The command name may hold spaces: the fields start after its closing parenthesis.
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return (utime + stime) * 1000 / clockTicksPerSecond, nil
}

// percentile is the nearest-rank percentile of ascending values, in ms.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100 + 0.999999)
	rank = max(1, min(len(sorted), rank))
	return float64(sorted[rank-1]) / float64(time.Millisecond)
}

type loadOptions struct {
	concurrency int
	warmup      time.Duration
	duration    time.Duration
	count       int // > 0: exactly this many requests instead of duration
	pid         int // > 0: sample this process's CPU time
	timeout     time.Duration
}

// phase runs the workers until the deadline (or until count tickets are
// taken) and returns the latencies of the requests that succeeded.
func phase(fn call, o loadOptions, d time.Duration, count int) (lat []time.Duration, errors int, firstError string, elapsed time.Duration) {
	var mu sync.Mutex
	var tickets atomic.Int64
	var failed atomic.Int64
	var once sync.Once
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			for {
				if count > 0 {
					if tickets.Add(1) > int64(count) {
						break
					}
				} else if !time.Now().Before(deadline) {
					break
				}
				ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
				t0 := time.Now()
				err := fn(ctx)
				took := time.Since(t0)
				cancel()
				if err != nil {
					failed.Add(1)
					once.Do(func() { firstError = err.Error() })
					continue
				}
				local = append(local, took)
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, int(failed.Load()), firstError, time.Since(start)
}

func runLoad(mode string, fn call, o loadOptions) loadResult {
	warmed := 0
	if o.warmup > 0 {
		lat, _, _, _ := phase(fn, o, o.warmup, 0)
		warmed = len(lat)
	}
	var before float64
	var cpuErr error
	if o.pid > 0 {
		before, cpuErr = cpuMs(o.pid)
	}
	self := os.Getpid()
	selfBefore, selfErr := cpuMs(self)
	lat, errors, firstError, elapsed := phase(fn, o, o.duration, o.count)
	r := loadResult{Mode: mode, Concurrency: o.concurrency, Requests: len(lat), WarmupRequests: warmed, Errors: errors, Seconds: elapsed.Seconds(), FirstError: firstError}
	if selfErr == nil {
		if after, err := cpuMs(self); err == nil {
			used := after - selfBefore
			r.GeneratorCPUMs = &used
		}
	}
	if o.pid > 0 && cpuErr == nil {
		if after, err := cpuMs(o.pid); err == nil {
			used := after - before
			r.ServerCPUMs = &used
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r.RPS = float64(len(lat)) / elapsed.Seconds()
	r.P50Ms = percentile(lat, 50)
	r.P99Ms = percentile(lat, 99)
	return r
}
