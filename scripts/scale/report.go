package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// printTable writes the measurements of one size as a Markdown table, and
// below it what the table cannot say: seeding, budgets, unexpected results.
func printTable(w io.Writer, s size, sd seeded, rows []row, o flags) {
	fmt.Fprintf(w, "### %s users, %s events\n\n", thousands(s.users), thousands(s.events))
	fmt.Fprintln(w, "| operation | p50 | p99 | samples | database |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	var notes []string
	for _, r := range rows {
		samples := fmt.Sprint(len(r.lat))
		if r.capped {
			samples += ", capped"
		}
		if bad := failed(r.notes); bad > 0 {
			samples += fmt.Sprintf(", %d failed", bad)
		}
		share := "—"
		if sum := total(r.lat); sum > 0 && r.db >= 0 {
			share = fmt.Sprintf("%.0f %%", 100*float64(r.db)/float64(sum))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.name, fmtDur(pct(r.lat, 50)), fmtDur(pct(r.lat, 99)), samples, share)
		if len(r.notes) > 0 {
			var ns []string
			for _, k := range slices.Sorted(maps.Keys(r.notes)) {
				ns = append(ns, fmt.Sprintf("%d× %s", r.notes[k], k))
			}
			n := fmt.Sprintf("- %s: %s", r.name, strings.Join(ns, ", "))
			if len(r.errs) > 0 {
				n += " (" + strings.Join(r.errs, "; ") + ")"
			}
			notes = append(notes, n)
		}
	}
	fmt.Fprintln(w)
	if sd.users+sd.events > 0 {
		fmt.Fprintf(w, "Seeded for this size: %s users in %s (%s/s), %s events in %s (%s/s); present before: %s users, %s events.\n",
			thousands(sd.users), sd.usersIn.Round(time.Second), rate(sd.users, sd.usersIn),
			thousands(sd.events), sd.eventsIn.Round(time.Second), rate(sd.events, sd.eventsIn),
			thousands(sd.hadUsers), thousands(sd.hadEvents))
	} else {
		fmt.Fprintf(w, "Already seeded (%s users, %s events present).\n", thousands(sd.hadUsers), thousands(sd.hadEvents))
	}
	if sd.orgs+sd.memberships > 0 {
		fmt.Fprintf(w, "Seeded %s organizations and %s memberships through Apply in %s (%s/s).\n",
			thousands(sd.orgs), thousands(sd.memberships), sd.orgsIn.Round(time.Second), rate(sd.orgs+sd.memberships, sd.orgsIn))
	}
	if sd.payers > 0 {
		fmt.Fprintf(w, "Seeded %s Clerk Billing payers through Deliver in %s (%s/s).\n",
			thousands(sd.payers), sd.payersIn.Round(time.Second), rate(sd.payers, sd.payersIn))
	}
	if sd.deliveries+sd.outbox > 0 {
		fmt.Fprintf(w, "Seeded %s outbound deliveries (through Fanout and Settle) and %s outbox entries (through Deliver) in %s (%s deliveries/s).\n",
			thousands(sd.deliveries), thousands(sd.outbox), sd.deliveriesIn.Round(time.Second), rate(sd.deliveries, sd.deliveriesIn))
	}
	var capped []string
	for _, r := range rows {
		if r.capped {
			capped = append(capped, r.name)
		}
	}
	if len(capped) > 0 {
		fmt.Fprintf(w, "Capped (the %s budget of the operation was spent before %d samples): %s.\n",
			o.budget, o.requests, strings.Join(capped, "; "))
	}
	fmt.Fprintln(w, "A first call of each operation is not counted unless it took 1 s or more; \"database\" is the time the driver waited for the database, over the samples' total.")
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nFailed calls (their time is in p50/p99):")
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	fmt.Fprintln(w)
}

// pct is the nearest-rank percentile p of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}

// failed counts the failed samples (the warm-up call is not one unless
// it was kept).
func failed(notes map[string]int) int {
	n := 0
	for k, v := range notes {
		if !strings.HasPrefix(k, "(warm-up") {
			n += v
		}
	}
	return n
}

func total(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func rate(n int, d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	return thousands(int(float64(n) / d.Seconds()))
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
