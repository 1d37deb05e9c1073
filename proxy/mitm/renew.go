package mitm

import (
	"container/list"
	"context"
	"fmt"
	"time"
)

// Renewal (DESIGN.md 6, "The interception CA is renewed"). A worker
// trusts the CA through the bundle file, which most clients read when
// they build a TLS client (curl per run, Python's requests per pool, Go's
// SSL_CERT_FILE per process). A CA that signed with a fresh key the moment
// the old one neared its end would break every client that still holds the
// old bundle, so a renewal has three steps over the CA's validity V:
//
//	announce, at V/2 of the signing CA's life: a next CA is created and the
//	  bundle is rewritten to list both; leaves are still signed by the old
//	switch, at 15V/16, once the announcing bundle was written: the next CA
//	  signs every new leaf (cached leaves are dropped); the old one stays
//	  listed until it expires
//	retire, at the old CA's expiry: the bundle lists the new one alone
//
// The switch comes as late as it safely can, so a worker process that
// read the bundle once, before the announcement, keeps working for 15V/16
// (157.5 h by default), nearly as long as without renewal, and one that
// reads it at least every 7V/16 (73.5 h) never meets a leaf it cannot
// verify. A worker that outlives the switch without rereading must be
// restarted before it (the Announced event and the expiry metric say
// when).
const (
	announceAt = 2  // announce at 1/announceAt of the life
	switchNum  = 15 // switch at switchNum/switchDen of the life
	switchDen  = 16
)

// EventKind names a step of the renewal.
type EventKind string

// Renewal steps.
const (
	// Announced: a next CA exists and is listed in the bundle.
	Announced EventKind = "announced"
	// Switched: the next CA signs leaves from now on.
	Switched EventKind = "switched"
	// Retired: the previous CA expired and left the bundle.
	Retired EventKind = "retired"
	// Failed: a step could not be taken (the bundle could not be
	// written); Err says why. Renew is retried.
	Failed EventKind = "failed"
)

// Event is one renewal step; NotAfter is when the CA it concerns expires
// (the new CA for Announced and Switched, the old one for Retired, the
// signing one for Failed).
type Event struct {
	Kind     EventKind
	NotAfter time.Time
	Err      error
}

// times returns the announce and switch instants of a generation.
func (ca *CA) times(g *generation) (announce, switchAt time.Time) {
	born := g.cert.NotBefore.Add(backdate)
	life := g.cert.NotAfter.Sub(born)
	return born.Add(life / announceAt), born.Add(life * switchNum / switchDen)
}

// NextRenewal returns when Renew next has a step to take.
func (ca *CA) NextRenewal() time.Time {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	announce, switchAt := ca.times(ca.cur)
	at := announce
	if ca.next != nil {
		at = switchAt
	}
	if ca.prev != nil && ca.prev.cert.NotAfter.Before(at) {
		at = ca.prev.cert.NotAfter
	}
	return at
}

// Renew takes every renewal step that is due and returns them. When a step
// changes the trusted set and bundlePath is set, the bundle is rewritten
// (WriteBundle); the switch waits for a bundle that lists the next CA, so
// a leaf of the new CA is never served before the bundle names it. With
// bundlePath empty (the bundle is fetched over the control API only) the
// announcement counts as published at once.
func (ca *CA) Renew(bundlePath string) []Event {
	now := ca.now()
	var events []Event
	ca.mu.Lock()
	announce, switchAt := ca.times(ca.cur)
	changed := false
	if ca.prev != nil && !now.Before(ca.prev.cert.NotAfter) {
		events = append(events, Event{Kind: Retired, NotAfter: ca.prev.cert.NotAfter})
		ca.prev, changed = nil, true
	}
	if ca.next == nil && !now.Before(announce) {
		g, err := ca.newGeneration(now)
		if err != nil {
			ca.mu.Unlock()
			return append(events, Event{Kind: Failed, NotAfter: ca.cur.cert.NotAfter, Err: err})
		}
		ca.next, ca.published, changed = g, false, true
		events = append(events, Event{Kind: Announced, NotAfter: g.cert.NotAfter})
	}
	ca.mu.Unlock()
	if changed || !ca.isPublished() {
		if err := ca.publish(bundlePath); err != nil {
			return append(events, Event{Kind: Failed, NotAfter: ca.Certificate().NotAfter, Err: err})
		}
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if ca.next != nil && ca.published && !now.Before(switchAt) {
		ca.prev, ca.cur, ca.next = ca.cur, ca.next, nil
		ca.cache, ca.order = make(map[string]*list.Element), ca.order.Init()
		events = append(events, Event{Kind: Switched, NotAfter: ca.cur.cert.NotAfter})
	}
	return events
}

func (ca *CA) isPublished() bool {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.next == nil || ca.published
}

// publish writes the bundle (when bundlePath is set) and marks the next
// CA, if any, as published.
func (ca *CA) publish(bundlePath string) error {
	ca.mu.Lock()
	next := ca.next
	ca.mu.Unlock()
	if bundlePath != "" {
		if err := ca.WriteBundle(bundlePath); err != nil {
			return err
		}
	}
	ca.mu.Lock()
	if ca.next == next {
		ca.published = true
	}
	ca.mu.Unlock()
	return nil
}

// KeepRenewed runs Renew at every NextRenewal until ctx ends, reporting
// each step (nil report: none). A failed step is retried after a tenth of
// the time left to the signing CA's expiry (at least a second), so a
// bundle directory that is briefly unwritable does not stop the renewal.
// The sidecar runs it beside its listeners.
func (ca *CA) KeepRenewed(ctx context.Context, bundlePath string, report func(Event)) {
	if report == nil {
		report = func(Event) {}
	}
	for {
		wait := ca.NextRenewal().Sub(ca.now())
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for _, ev := range ca.Renew(bundlePath) {
			report(ev)
			if ev.Kind == Failed {
				left := ca.Certificate().NotAfter.Sub(ca.now())
				retry := time.NewTimer(max(left/10, time.Second))
				select {
				case <-ctx.Done():
					retry.Stop()
					return
				case <-retry.C:
				}
			}
		}
	}
}

// String describes an event for logs.
func (e Event) String() string {
	if e.Err != nil {
		return fmt.Sprintf("interception CA renewal %s: %v", e.Kind, e.Err)
	}
	return fmt.Sprintf("interception CA %s (expires %s)", e.Kind, e.NotAfter.UTC().Format(time.RFC3339))
}
