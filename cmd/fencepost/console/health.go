package console

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
)

// chart is one series drawn for the Health page.
type chart struct {
	Title, Unit, Total string
	SVG                template.HTML
}

// healthBody is the Health page's data.
type healthBody struct {
	Charts     []chart
	ResumeRate string
	Sources    int
	Scrapes    int
	Every      string
	Err        string
}

func (s *Server) healthPage(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	body := healthBody{Sources: len(s.cfg.MetricsURLs), Every: ScrapeEvery.String()}
	s.metrics.mu.Lock()
	body.Scrapes, body.Err = s.metrics.scrapes, s.metrics.lastErr
	s.metrics.mu.Unlock()
	sums := map[string]float64{}
	for _, se := range healthSeries {
		pts := s.metrics.lastHour(now, se.Key)
		var total float64
		for _, p := range pts {
			total += p.Value
		}
		sums[se.Key] = total
		body.Charts = append(body.Charts, chart{Title: se.Title, Unit: se.Unit, Total: number(total), SVG: bars(se.Title, pts)})
	}
	body.ResumeRate = "no reclaims"
	if sums["reclaimed"] > 0 {
		body.ResumeRate = fmt.Sprintf("%.0f%% (%s resumed of %s reclaimed)", 100*sums["resumed"]/sums["reclaimed"], number(sums["resumed"]), number(sums["reclaimed"]))
	}
	s.render(w, r, http.StatusOK, "health", s.view(r, "health", "Health", body))
}

func number(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// Chart geometry: one bar per minute.
const (
	chartW, chartH = 240, 60
	barW           = chartW / window
)

// bars draws the points as an inline SVG bar chart, tallest bar at full
// height, with a title and one <title> per bar for screen readers and
// tooltips. It uses presentation attributes only: the page's CSP allows
// no inline style.
func bars(title string, pts []point) template.HTML {
	var peak float64
	for _, p := range pts {
		peak = max(peak, p.Value)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" aria-label="%s per minute, last hour, peak %s" xmlns="http://www.w3.org/2000/svg">`,
		chartW, chartH+12, template.HTMLEscapeString(title), number(peak))
	fmt.Fprintf(&b, `<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#d8dde2"/>`, chartH, chartW, chartH)
	for i, p := range pts {
		if p.Value <= 0 || peak == 0 {
			continue
		}
		h := max(1, int(p.Value/peak*float64(chartH-2)))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#0b5cad"><title>%s: %s</title></rect>`,
			i*barW, chartH-h, barW-1, h, p.Minute.UTC().Format("15:04"), number(p.Value))
	}
	fmt.Fprintf(&b, `<text x="0" y="%d" font-size="9" fill="#5b6670">-60 min</text><text x="%d" y="%d" font-size="9" fill="#5b6670" text-anchor="end">now · peak %s</text></svg>`,
		chartH+10, chartW, chartH+10, number(peak))
	return template.HTML(b.String()) // built here from numbers and an escaped title
}
