package httpapi

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// denialBurstWindow is how long repeated identical denials (same caller,
// source, missing permission and route) are one burst in the audit log:
// the first is logged at once, the rest are counted and logged as one
// line when the burst ends. A flood of refusals is then two lines per
// window, not one per request (2,400 lines in 1.3 s in the probe).
const denialBurstWindow = 10 * time.Second

// maxOpenBursts bounds the bursts tracked at once; past it a new key's
// denials are counted under one overflow burst.
const maxOpenBursts = 10_000

type denialKey struct {
	who, missing, route, source string
}

type denialBurst struct {
	first, last time.Time
	// repeats counts the denials after the first, which were not logged.
	repeats int
	status  int
}

// denials aggregates repeated denials for the audit log.
type denials struct {
	mu   sync.Mutex
	open map[denialKey]*denialBurst
	log  *zap.Logger
	now  func() time.Time
	stop chan struct{}
	done chan struct{}
}

func newDenials(log *zap.Logger, now func() time.Time) *denials {
	return &denials{open: map[denialKey]*denialBurst{}, log: log, now: now}
}

// note records one denial and reports whether it is the first of its
// burst (the caller logs it in full).
func (d *denials) note(k denialKey, status int) bool {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if b := d.open[k]; b != nil && now.Sub(b.first) < denialBurstWindow {
		b.repeats++
		b.last = now
		return false
	}
	if b := d.open[k]; b != nil {
		d.closeLocked(k, b)
	}
	if len(d.open) >= maxOpenBursts {
		k = denialKey{who: "*", missing: "*", route: "*", source: "many"}
		if b := d.open[k]; b != nil {
			b.repeats++
			b.last = now
			return false
		}
	}
	d.open[k] = &denialBurst{first: now, last: now, status: status}
	return true
}

// flush closes the bursts whose window ended (all of them with all).
func (d *denials) flush(all bool) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, b := range d.open {
		if all || now.Sub(b.first) >= denialBurstWindow {
			d.closeLocked(k, b)
		}
	}
}

// closeLocked ends a burst: one line with the count of the denials that
// were not logged one by one.
func (d *denials) closeLocked(k denialKey, b *denialBurst) {
	delete(d.open, k)
	if b.repeats == 0 {
		return
	}
	d.log.Info("audit",
		zap.String("who", k.who),
		zap.String("missing", k.missing),
		zap.String("route", k.route),
		zap.String("remote", k.source),
		zap.Int("status", b.status),
		zap.Bool("denied", true),
		zap.Bool("repeated", true),
		zap.Int("count", b.repeats),
		zap.Time("first", b.first),
		zap.Time("last", b.last))
}

// run flushes ended bursts every second until stop closes, then all.
func (d *denials) run() {
	defer close(d.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			d.flush(true)
			return
		case <-t.C:
			d.flush(false)
		}
	}
}

func (d *denials) start() {
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.run()
}

// close stops run, logging what is still open.
func (d *denials) close() {
	if d.stop == nil {
		return
	}
	close(d.stop)
	<-d.done
	d.stop = nil
}
