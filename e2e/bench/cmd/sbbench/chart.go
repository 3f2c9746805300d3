package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
)

// ratioSVG draws one horizontal bar per case: the gateway/direct QPS ratio,
// with the per-round ratios as ticks, reference lines at 1.0 (as fast as
// direct) and 0.7 (the target for point_select), and "failed" where
// no round had both sides succeed. Replica-read cases are marked: their
// gateway side runs on two servers, their direct side on one. Self-contained
// SVG: no fonts, scripts or external assets.
func ratioSVG(sums []caseSummary, title string) string {
	const (
		labelW = 300 // case names
		plotW  = 520
		valueW = 150 // ratio text right of the bars
		barH   = 20
		rowH   = 30
		top    = 66
	)
	bottom := 40
	replicas := false
	for _, s := range sums {
		replicas = replicas || s.ReplicaReads
	}
	if replicas {
		bottom += 18 // the footnote
	}
	maxR := 1.2
	for _, s := range sums {
		if s.Ratio != nil {
			maxR = math.Max(maxR, *s.Ratio*1.1)
		}
		for _, r := range s.RoundRatios {
			maxR = math.Max(maxR, r*1.05)
		}
	}
	maxR = math.Ceil(maxR*5) / 5 // a multiple of 0.2
	width := labelW + plotW + valueW
	height := top + rowH*len(sums) + bottom
	x := func(r float64) float64 { return labelW + r/maxR*plotW }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", esc(title))
	fmt.Fprintf(&b, `<text x="10" y="40" fill="#555">median over rounds; ticks are single rounds; higher is better</text>`+"\n")

	plotTop, plotBottom := top-6, top+rowH*len(sums)
	// Grid and axis labels every 0.2.
	for r := 0.0; r <= maxR+1e-9; r += 0.2 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`+"\n", x(r), plotTop, x(r), plotBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%.1f</text>`+"\n", x(r), plotBottom+16, r)
	}
	for i, s := range sums {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+barH/2+4, esc(s.Name))
		if s.Ratio == nil {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#b00020">failed (%s)</text>`+"\n", labelW+6, y+barH/2+4, esc(strings.TrimPrefix(s.Status, "FAILED: ")))
			continue
		}
		color := "#d9822b" // below the 0.7 target
		switch {
		case *s.Ratio >= 1:
			color = "#2e8540"
		case *s.Ratio >= 0.7:
			color = "#2b6cb0"
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, y, x(*s.Ratio)-labelW, barH, color)
		for _, r := range s.RoundRatios {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#111" stroke-width="1.5"/>`+"\n", x(r), y-2, x(r), y+barH+2)
		}
		label := fmt.Sprintf("%.2f", *s.Ratio)
		if s.Status != "ok" {
			label += " (some runs failed)"
		}
		if s.ReplicaReads {
			label += " *"
		}
		end := *s.Ratio
		for _, r := range s.RoundRatios {
			end = math.Max(end, r)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-weight="bold">%s</text>`+"\n", x(end)+8, y+barH/2+4, esc(label))
	}
	for _, ref := range []struct {
		r     float64
		label string
		color string
	}{{1, "direct", "#111"}, {0.7, "target 0.7", "#b00020"}} {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="5,3"/>`+"\n", x(ref.r), plotTop, x(ref.r), plotBottom, ref.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s" font-size="11">%s</text>`+"\n", x(ref.r), plotTop-4, ref.color, ref.label)
	}
	if replicas {
		fmt.Fprintf(&b, `<text x="10" y="%d" fill="#555">* gateway side on two servers (primary + replica, replica_reads on), direct side on the primary alone; sysbench --skip-trx=on</text>`+"\n", plotBottom+36)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
