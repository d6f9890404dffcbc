package main

import (
	"fmt"
	"io"
	"slices"
	stdsync "sync"
	"time"
)

// recorder collects the latency of every request, by kind.
type recorder struct {
	mu    stdsync.Mutex
	kinds map[Kind]*kindStats
}

type kindStats struct {
	requests, errors, retries int
	latencies                 []time.Duration
	first, last               time.Time // when the first request went out, the last answer came
}

func newRecorder() *recorder {
	r := &recorder{kinds: map[Kind]*kindStats{}}
	for _, k := range Kinds {
		r.kinds[k] = &kindStats{}
	}
	return r
}

// record adds one request of kind k that took took; ok is a wanted answer,
// retry a request that repeats an earlier one.
func (r *recorder) record(k Kind, took time.Duration, ok, retry bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.kinds[k]
	s.requests++
	if !ok {
		s.errors++
	}
	if retry {
		s.retries++
	}
	s.latencies = append(s.latencies, took)
	if start := now.Add(-took); s.first.IsZero() || start.Before(s.first) {
		s.first = start
	}
	if now.After(s.last) {
		s.last = now
	}
}

// KindSummary is the numbers of one kind of operation.
type KindSummary struct {
	Kind               Kind
	Requests           int     // HTTP requests, retries included
	Errors             int     // answered with an unwanted status, or not at all
	Retries            int     // requests that repeated a delivery after a 5xx or no answer
	PerSecond          float64 // requests over the time from the first to the last
	P50, P95, P99, Max time.Duration
}

func (r *recorder) summaries() []KindSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []KindSummary
	for _, k := range Kinds {
		s := r.kinds[k]
		out = append(out, summarize(k, s.requests, s.errors, s.retries, s.latencies, s.last.Sub(s.first)))
	}
	return out
}

func summarize(k Kind, requests, errs, retries int, lat []time.Duration, span time.Duration) KindSummary {
	sum := KindSummary{Kind: k, Requests: requests, Errors: errs, Retries: retries}
	if len(lat) == 0 {
		return sum
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	sum.P50, sum.P95, sum.P99 = percentile(sorted, 50), percentile(sorted, 95), percentile(sorted, 99)
	sum.Max = sorted[len(sorted)-1]
	if span > 0 {
		sum.PerSecond = float64(requests) / span.Seconds()
	}
	return sum
}

// percentile is the nearest-rank percentile p of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}

// Report is what a run did and what the check found.
type Report struct {
	RunID    string
	Seed     int64
	URL      string
	Config   Config
	Plan     PlanCounts
	Elapsed  time.Duration // from the first request to the end of sending
	Kinds    []KindSummary // one per kind, in the order of Kinds
	Webhooks WebhookCounts
	Check    Check
	Outbound *Outbound // what the app's endpoint received (-endpoint); nil without
}

// OK reports whether the end-state check passed. The check is not applied
// to the naive handler of the baseline (Config.Naive), which keeps no
// order, no event log and no deduplication: its run is always OK, and its
// problems are printed for information.
// With -endpoint, every user the load created must also have arrived at
// the app's endpoint in its final state, every delivery verified.
func (r *Report) OK() bool { return r.Config.Naive || r.Check.OK() && r.Outbound.OK() }

// Total is the numbers of every request of the run; its throughput is
// over the time of sending.
func (r *Report) Total() KindSummary {
	total := KindSummary{Kind: "all"}
	for _, s := range r.Kinds {
		total.Requests += s.Requests
		total.Errors += s.Errors
		total.Retries += s.Retries
	}
	if r.Elapsed > 0 {
		total.PerSecond = float64(total.Requests) / r.Elapsed.Seconds()
	}
	return total
}

// naiveShown is how many of the naive handler's problems a report spells
// out.
const naiveShown = 3

// Kind returns the numbers of kind k.
func (r *Report) Kind(k Kind) KindSummary {
	for _, s := range r.Kinds {
		if s.Kind == k {
			return s
		}
	}
	return KindSummary{Kind: k}
}

// Print writes the report as a table and a verdict.
func (r *Report) Print(w io.Writer) {
	c := r.Config
	target := r.URL
	if c.Naive {
		target = "the naive handler at " + r.URL
	}
	fmt.Fprintf(w, "usersync-load run %s against %s (seed %d)\n", r.RunID, target, r.Seed)
	updates := "updates"
	if c.Sessions {
		updates = "sign-ins (session.created)"
	}
	fmt.Fprintf(w, "  %d users × %d %s = %d events (%d users shuffled), %d duplicates, %d reads, concurrency %d\n\n",
		c.Users, c.Updates, updates, r.Plan.Events, r.Plan.Shuffled, r.Plan.Duplicates, r.Plan.Reads, c.Concurrency)
	fmt.Fprintf(w, "%-10s %8s %7s %8s %9s %9s %9s %9s %9s\n", "kind", "requests", "errors", "retries", "req/s", "p50", "p95", "p99", "max")
	for _, s := range r.Kinds {
		fmt.Fprintln(w, row(s))
	}
	total := r.Total()
	fmt.Fprintf(w, "%-10s %8d %7d %8d %9.1f   (%s sending)\n\n", total.Kind, total.Requests, total.Errors, total.Retries,
		total.PerSecond, r.Elapsed.Round(time.Millisecond))
	h := r.Webhooks
	fmt.Fprintf(w, "deliveries: %d acknowledged, %d unacknowledged after %d attempts, %d rejected, %d not sent (time ran out)\n",
		h.Acknowledged, h.Unacknowledged, c.Attempts, h.Rejected, h.NotSent)
	if c.Naive {
		r.printNaiveEndState(w)
		return
	}
	defer r.printOutbound(w)
	if r.Check.OK() {
		fmt.Fprintf(w, "end state: OK: %d users read back, %d listed, each in its newest acknowledged state\n", r.Check.Users, r.Check.Listed)
		return
	}
	fmt.Fprintf(w, "end state: FAILED: %d users read back, %d listed; %d problems:\n", r.Check.Users, r.Check.Listed, len(r.Check.Problems)+r.Check.More)
	for _, p := range r.Check.Problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
	if r.Check.More > 0 {
		fmt.Fprintf(w, "  - and %d more\n", r.Check.More)
	}
}

// printOutbound writes what the app's endpoint received, and its verdict.
func (r *Report) printOutbound(w io.Writer) {
	o := r.Outbound
	if o == nil {
		return
	}
	fmt.Fprintf(w, "\noutbound: endpoint %s at %s (user.*), ", o.Endpoint, o.URL)
	if o.DeleteError != "" {
		fmt.Fprintf(w, "NOT deleted: %s\n", o.DeleteError)
	} else {
		fmt.Fprintln(w, "deleted at the end")
	}
	fmt.Fprintf(w, "  deliveries: %d received, %d invalid signatures, %d webhook-ids of the run's users, %d of other users\n",
		o.Deliveries, o.Invalid, o.WebhookIDs, o.Foreign)
	if h := o.Hanging; h != nil {
		fmt.Fprintf(w, "  hanging endpoints: %d at %s (user.*, never answer), %d requests received and held, %d still held at the end; ",
			h.Endpoints, h.URL, h.Requests, h.HeldAtEnd)
		if h.DeleteError != "" {
			fmt.Fprintf(w, "NOT deleted: %s\n", h.DeleteError)
		} else {
			fmt.Fprintln(w, "deleted at the end")
		}
	}
	lag := "-"
	if o.Received > 0 {
		lag = o.Lag.Round(time.Millisecond).String()
	}
	if o.Drain {
		rate := "-"
		if o.Lag > 0 {
			rate = fmt.Sprintf("%.0f", float64(o.Received)/o.Lag.Seconds())
		}
		fmt.Fprintf(w, "  drain: %d of %d users received, the last %s after the resync started: %s a second\n",
			o.Received, o.Users, lag, rate)
	} else {
		fmt.Fprintf(w, "  final state: %d of %d users received; lag %s from the end of sending to the last (waited %s after the check)\n",
			o.Received, o.Users, lag, o.Waited.Round(time.Millisecond))
	}
	if st := o.Steady; st != nil {
		st.print(w)
	}
	if len(o.AfterAck) > 0 {
		sorted := slices.Clone(o.AfterAck)
		slices.Sort(sorted)
		fmt.Fprintf(w, "  arrival after the acknowledgment of the event that made it: p50 %s, p99 %s, max %s (%d users)\n",
			ms(percentile(sorted, 50)), ms(percentile(sorted, 99)), ms(sorted[len(sorted)-1]), len(sorted))
	}
	if o.OK() {
		fmt.Fprintln(w, "outbound: OK: every user the load created arrived in its final state, every signature verified")
		return
	}
	fmt.Fprintf(w, "outbound: FAILED: %d problems:\n", len(o.Problems)+o.More)
	for _, p := range o.Problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
	if o.More > 0 {
		fmt.Fprintf(w, "  - and %d more\n", o.More)
	}
}

// printNaiveEndState says that the naive handler's end state is not
// checked, and what the check found, for information.
func (r *Report) printNaiveEndState(w io.Writer) {
	fmt.Fprint(w, "end state: not checked: the naive handler keeps no order, no event log and no deduplication, so its end state is not expected to be right")
	n := len(r.Check.Problems) + r.Check.More
	switch n {
	case 0:
		fmt.Fprint(w, "; the check found no problem this time\n")
		return
	case 1:
		fmt.Fprint(w, "; for information, the check found 1 problem:\n")
	default:
		fmt.Fprintf(w, "; for information, the check found %d problems, such as:\n", n)
	}
	for _, p := range r.Check.Problems[:min(naiveShown, len(r.Check.Problems))] {
		fmt.Fprintf(w, "  - %s\n", p)
	}
}

func row(s KindSummary) string {
	if s.Requests == 0 {
		return fmt.Sprintf("%-10s %8d %7s %8s %9s %9s %9s %9s %9s", s.Kind, 0, "-", "-", "-", "-", "-", "-", "-")
	}
	return fmt.Sprintf("%-10s %8d %7d %8d %9.1f %9s %9s %9s %9s", s.Kind, s.Requests, s.Errors, s.Retries, s.PerSecond,
		ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
}

// ms formats d in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
