package main

import "math"

// Run is one measurement of one system, as written to the raw JSON.
type Run struct {
	Workload string             `json:"workload"`
	Case     string             `json:"case"`
	System   string             `json:"system"`
	Rep      int                `json:"rep"`
	Measure  Measure            `json:"measure"`
	Extra    map[string]float64 `json:"extra,omitempty"`
	// Failed marks a run that completed no operation; it is kept in the
	// raw JSON but left out of medians.
	Failed bool `json:"failed,omitempty"`
}

// Row is one line of the comparison table: a metric of ours against a
// peer's, with every repetition's value kept.
type Row struct {
	Workload string    `json:"workload"`
	Case     string    `json:"case"`
	Metric   string    `json:"metric"`
	Higher   bool      `json:"higherIsBetter"`
	Ours     string    `json:"ours"`
	Peer     string    `json:"peer"`
	A        []float64 `json:"ours_values"`
	B        []float64 `json:"peer_values"`
}

// Ratio is median(ours) / median(peer). It is undefined (NaN) when
// either median is not positive: an "added latency" below direct's, say,
// has no meaningful ratio.
func (r Row) Ratio() float64 {
	a, b := median(r.A), median(r.B)
	if !(a >= 0 && b > 0) {
		return math.NaN()
	}
	return a / b
}

// Goal is one target from the issue, checked against the measured rows.
type Goal struct {
	Target string `json:"target"`
	Figure string `json:"figure"`
	Status string `json:"status"` // met, missed, or not measured
	// Bound is the evidence for what limits the figure: CPU use of both
	// sides at that point, from the same runs.
	Bound string `json:"bound,omitempty"`
}

// Results is everything one run produced.
type Results struct {
	Mode     string   `json:"mode"`
	Machine  Machine  `json:"machine"`
	Settings Plan     `json:"settings"`
	Runs     []Run    `json:"runs"`
	Rows     []Row    `json:"rows"`
	Goals    []Goal   `json:"goals"`
	Skipped  []string `json:"skipped,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	Seconds  float64  `json:"seconds"`
	// Rounds is how many plaintext/TLS pass pairs the run made.
	Rounds int `json:"tlsRounds,omitempty"`
	// TLS is the TLS pass of the run; this run is then its plaintext
	// pass.
	TLS *Results `json:"tls,omitempty"`
	// TLSSectionOnly marks a --tls run, which rewrites only the TLS
	// section of BENCHMARKS.md.
	TLSSectionOnly bool `json:"tlsSectionOnly,omitempty"`
}

// add records a raw run.
func (r *Results) add(run Run) {
	run.Failed = run.Measure.Ops == 0 && run.Measure.Errors > 0
	r.Runs = append(r.Runs, run)
}

// values returns, in rep order, f of every run of workload/case/system.
func (r *Results) values(workload, cs, system string, f func(Run) float64) []float64 {
	var out []float64
	for _, run := range r.Runs {
		if run.Workload == workload && run.Case == cs && run.System == system && !run.Failed {
			if v := f(run); !math.IsNaN(v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// row appends a table row comparing system a with system b on metric f.
func (r *Results) row(workload, cs, metric string, higher bool, a, b string, f func(Run) float64) {
	va, vb := r.values(workload, cs, a, f), r.values(workload, cs, b, f)
	if len(va) == 0 && len(vb) == 0 {
		return
	}
	r.Rows = append(r.Rows, Row{Workload: workload, Case: cs, Metric: metric, Higher: higher,
		Ours: a, Peer: b, A: va, B: vb})
}

// find returns the first row matching workload, case, metric and peer.
func (r *Results) find(workload, cs, metric, peer string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Workload == workload && row.Case == cs && row.Metric == metric && row.Peer == peer {
			return row, true
		}
	}
	return Row{}, false
}

// rate, p50ms and p99ms are the usual extractors.
func rate(r Run) float64  { return r.Measure.Rate }
func p50ms(r Run) float64 { return ms(r.Measure.P50) }
func p99ms(r Run) float64 { return ms(r.Measure.P99) }

// extra returns an extractor for a named extra figure.
func extra(name string) func(Run) float64 {
	return func(r Run) float64 {
		if v, ok := r.Extra[name]; ok {
			return v
		}
		return math.NaN()
	}
}

// cpuPerOp extracts the server CPU time per operation, in µs.
func cpuPerOp(r Run) float64 {
	if r.Measure.ServerUsPerOp == 0 {
		return math.NaN()
	}
	return r.Measure.ServerUsPerOp
}
