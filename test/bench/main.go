// Command bench is fencepost's side-by-side benchmark harness (issue 6).
// It builds fencepost from this repository, installs the peers it is
// compared with (Debian's etcd-server, nginx, squid) when they are missing,
// starts a 3-node fencepost cluster and a 3-node etcd cluster on loopback,
// runs every workload against both, alternating A B A B, and writes a
// markdown table (medians, min–max, ratios), the raw numbers as JSON, and
// BENCHMARKS.md at the repository root.
//
//	cd test/bench && go run . [--quick] [--plain] [--out results.json] [--md ../../BENCHMARKS.md]
//
// A run has two passes: every selected workload plaintext, then every
// selected workload that has a TLS form (1–6; 7 is HTTPS already) again
// with TLS on both systems, on fresh clusters (tls.go; proxytls.go says
// what TLS means for the proxy path). BENCHMARKS.md gets the plaintext
// tables and, in its marked TLS section, the TLS pass beside them
// (tlsreport.go). --plain skips the TLS pass; --tls runs only the TLS
// workloads, in alternating ABBA rounds, and rewrites only the TLS
// section.
//
// Everything it starts listens on 127.0.0.1 only, runs from one temporary
// directory removed at the end, and is stopped by PID.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Plan is the size of a run; --quick shrinks every bound.
type Plan struct {
	Reps         int           `json:"reps"`
	Dur          time.Duration `json:"runNs"`
	MaxOps       int64         `json:"maxOpsPerRun"`
	Conc         []int         `json:"concurrency"`
	Sessions     int           `json:"sessions"`
	LeasesPer    int           `json:"leasesPerSession"`
	FailoverReps int           `json:"failoverReps"`
	MemLeases    int           `json:"memoryLeases"`
	MemLimit     time.Duration `json:"memoryFillLimitNs"`
	ProxyReps    int           `json:"proxyReps"`
	ProxyDur     time.Duration `json:"proxyRunNs"`
	ProxyConns   int           `json:"proxyConns"`
	FixedRate    float64       `json:"fixedRate"`
}

// fullPlan is the published run: a plaintext pass of every workload and
// a TLS pass of 1–6. The plaintext pass alone took 547 s with 5 reps and
// 7 failover reps; with the TLS pass added the reps are 4 and the
// failover reps 5, in both passes, so the whole run stays under 20
// minutes on 2 cores.
var fullPlan = Plan{
	Reps: 4, Dur: 2 * time.Second, MaxOps: 5_000_000, Conc: []int{1, 16, 64},
	Sessions: 1000, LeasesPer: 10, FailoverReps: 5,
	MemLeases: 100_000, MemLimit: 180 * time.Second,
	ProxyReps: 3, ProxyDur: 2 * time.Second, ProxyConns: 32, FixedRate: 5000,
}

// quickPlan is the smoke run: under two minutes.
var quickPlan = Plan{
	Reps: 1, Dur: 600 * time.Millisecond, MaxOps: 1_000_000, Conc: []int{1, 16, 64},
	Sessions: 100, LeasesPer: 10, FailoverReps: 2,
	MemLeases: 5_000, MemLimit: 10 * time.Second,
	ProxyReps: 1, ProxyDur: 600 * time.Millisecond, ProxyConns: 32, FixedRate: 5000,
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "upstream" {
		runUpstream(os.Args[2])
		return
	}
	if len(os.Args) == 4 && os.Args[1] == "bare-proxy" {
		runBareProxy(os.Args[2], os.Args[3])
		return
	}
	if len(os.Args) == 5 && os.Args[1] == "upstream-tls" {
		runUpstreamTLS(os.Args[2], os.Args[3], os.Args[4])
		return
	}
	quick := flag.Bool("quick", false, "smoke run: fewer repetitions, shorter runs (under 2 minutes)")
	out := flag.String("out", "bench-results.json", "raw results JSON file")
	md := flag.String("md", "../../BENCHMARKS.md", "BENCHMARKS.md to regenerate; empty to skip")
	only := flag.String("only", "", "comma-separated workload numbers to run (1-7); default all")
	keep := flag.Bool("keep", false, "keep the temporary directory (logs, data dirs)")
	fpBin := flag.String("fencepost", "", "use this fencepost binary instead of building ./cmd/fencepost")
	from := flag.String("from", "", "run nothing: re-render the tables and --md from this raw results JSON")
	tlsOn := flag.Bool("tls", false, "run the workloads (default "+defaultTLSOnly+") plaintext and with TLS in ABBA rounds, and rewrite only the TLS section of --md")
	plainOnly := flag.Bool("plain", false, "plaintext pass only: no TLS pass")
	rounds := flag.Int("tls-rounds", 2, "with --tls: alternate plaintext and TLS passes this many times, the reps split among them")
	profDir := flag.String("profile", "", "serve pprof on the fencepost nodes and save a CPU profile of every metered fencepost run into this directory")
	flag.Parse()
	if *from != "" {
		if err := rerender(*from, *md); err != nil {
			fatal(err)
		}
		return
	}

	if *tlsOn {
		if *only == "" {
			*only = defaultTLSOnly
		}
		if *rounds < 1 {
			fmt.Fprintln(os.Stderr, "bench: --tls-rounds: must be at least 1")
			os.Exit(2)
		}
		for n := range parseOnly(*only) {
			if !tlsWorkloads[n] {
				fmt.Fprintf(os.Stderr, "bench: --only: workload %s has no TLS pass; with --tls use %s\n", n, defaultTLSOnly)
				os.Exit(2)
			}
		}
		if *plainOnly {
			fmt.Fprintln(os.Stderr, "bench: --plain: cannot be combined with --tls")
			os.Exit(2)
		}
	}
	plan, mode := fullPlan, "full"
	if *quick {
		plan, mode = quickPlan, "quick"
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "fencepost")); err != nil {
		fatal(fmt.Errorf("run from test/bench inside the fencepost repository: %w", err))
	}
	dir, err := os.MkdirTemp("", "fencepost-bench-")
	if err != nil {
		fatal(err)
	}
	// MkdirTemp makes it 0700; squid's certificate helper runs as the
	// "proxy" user and must reach its ssl_db below it.
	if err := os.Chmod(dir, 0o711); err != nil {
		fatal(err)
	}
	cleanup := func() {
		stopAll()
		if !*keep {
			os.RemoveAll(dir)
		} else {
			logf("kept %s", dir)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		logf("%s: stopping everything the harness started", s)
		cleanup()
		os.Exit(130)
	}()
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			fatal(err)
		}
		prof, profileDur = &profiler{dir: *profDir}, plan.Dur-plan.Dur%time.Second
	}
	res := &Results{Mode: mode, Settings: plan}
	h := &harness{plan: plan, res: res, root: root, dir: dir, only: parseOnly(*only), prebuilt: *fpBin}
	var runErr error
	switch tlsOnly := tlsSubset(h.only); {
	case *tlsOn:
		runErr = h.tlsRounds(*rounds, h.only)
		res.TLSSectionOnly = true
	case *plainOnly || len(tlsOnly) == 0:
		runErr = h.run()
	default:
		runErr = h.tlsRounds(1, tlsOnly)
	}
	cleanup()
	res.Machine.LoadEnd = loadAvg()
	res.Seconds = time.Since(startTime).Seconds()
	if runErr != nil {
		res.Notes = append(res.Notes, "run stopped early: "+runErr.Error())
		logf("error: %v", runErr)
	}
	buildGoals(res)
	if res.TLS != nil {
		buildGoals(res.TLS)
	}
	table := markdownTable(res)
	printReport(res, table)
	if err := writeJSON(*out, res); err != nil {
		fatal(err)
	}
	logf("raw results: %s", *out)
	if *md != "" {
		if err := writeMD(*md, res, table); err != nil {
			fatal(err)
		}
		logf("wrote %s", *md)
	}
	if runErr != nil {
		os.Exit(1)
	}
}

// rerender reads a raw results file and writes its tables and, when md is
// set, BENCHMARKS.md again, so a change in the report needs no new run.
func rerender(path, md string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	proxyRSSRows(&res)
	res.Goals = nil
	buildGoals(&res)
	if res.TLS != nil {
		res.TLS.Goals = nil
		buildGoals(res.TLS)
	}
	table := markdownTable(&res)
	printReport(&res, table)
	if md == "" {
		return nil
	}
	return writeMD(md, &res, table)
}

// parseOnly turns "1,5" into a set; empty means all.
func parseOnly(s string) map[string]bool {
	if s == "" {
		return nil
	}
	m := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		m[strings.TrimSpace(f)] = true
	}
	return m
}

// writeJSON writes v indented to path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// fatal prints err, stops every child and exits.
func fatal(err error) {
	stopAll()
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
