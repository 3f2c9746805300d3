package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strings"
)

// targetColors are the bar colors of the built-in targets; peers take
// peerColors in turn.
var (
	targetColors = map[string]string{targetHAProxy: "#2b6cb0", targetGorelay: "#718096", targetGateway: "#d9822b", targetGatewayLoop: "#c05621", targetGatewayPipe: "#9c4221"}
	peerColors   = []string{"#2e8540", "#805ad5", "#b83280", "#319795", "#975a16"}
)

// ratioSVG draws, per case, one horizontal bar per target other than
// direct: its QPS / direct QPS ratio, with the per-round ratios as ticks,
// reference lines at 1.0 (as fast as direct) and 0.7 (the goal
// for the gateway on point_select), and "failed" where no round had both
// the target and direct succeed. Bars are colored by target (a legend on
// top). Replica-read cases are marked: their gateway runs on two servers,
// direct on one. Self-contained SVG: no fonts, scripts or external assets.
func ratioSVG(sums []targetSummary, title string) string {
	const (
		labelW = 300 // case and target names
		plotW  = 520
		valueW = 150 // ratio text right of the bars
		barH   = 14
		rowH   = 20
		caseH  = 20 // the case name above its bars
		gap    = 8  // between cases
		top    = 76
	)
	// Rows to draw: case headers and bars, in order.
	type row struct {
		header string
		s      *targetSummary
	}
	var rows []row
	var targets []string
	replicas := false
	maxR := 1.2
	for i := range sums {
		s := &sums[i]
		if s.Target == targetDirect {
			continue
		}
		if len(rows) == 0 || rows[len(rows)-1].s == nil || rows[len(rows)-1].s.Case != s.Case {
			rows = append(rows, row{header: s.Case})
		}
		rows = append(rows, row{s: s})
		if !slices.Contains(targets, s.Target) {
			targets = append(targets, s.Target)
		}
		replicas = replicas || s.ReplicaReads
		if s.Ratio != nil {
			maxR = math.Max(maxR, *s.Ratio*1.1)
		}
		for _, r := range s.RoundRatios {
			maxR = math.Max(maxR, r*1.05)
		}
	}
	color := map[string]string{}
	peers := 0
	for _, t := range targets {
		if c, ok := targetColors[t]; ok {
			color[t] = c
			continue
		}
		color[t] = peerColors[peers%len(peerColors)]
		peers++
	}
	maxR = math.Ceil(maxR*5) / 5 // a multiple of 0.2
	plotH := 0
	for i, r := range rows {
		switch {
		case r.s != nil:
			plotH += rowH
		case i > 0:
			plotH += gap + caseH
		default:
			plotH += caseH
		}
	}
	bottom := 40
	if replicas {
		bottom += 18 // the footnote
	}
	width := labelW + plotW + valueW
	height := top + plotH + bottom
	x := func(r float64) float64 { return labelW + r/maxR*plotW }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", esc(title))
	fmt.Fprintf(&b, `<text x="10" y="40" fill="#555">QPS / direct QPS in the same round, median over rounds; ticks are single rounds; higher is better</text>`+"\n")
	lx := 10
	for _, t := range targets {
		fmt.Fprintf(&b, `<rect x="%d" y="49" width="12" height="12" fill="%s"/>`+"\n", lx, color[t])
		fmt.Fprintf(&b, `<text x="%d" y="59">%s</text>`+"\n", lx+16, esc(t))
		lx += 16 + 7*len(t) + 18
	}

	plotTop, plotBottom := top-6, top+plotH
	// Grid and axis labels every 0.2.
	for r := 0.0; r <= maxR+1e-9; r += 0.2 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`+"\n", x(r), plotTop, x(r), plotBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%.1f</text>`+"\n", x(r), plotBottom+16, r)
	}
	y := top
	for i, r := range rows {
		if r.s == nil {
			if i > 0 {
				y += gap
			}
			fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+caseH-6, esc(r.header))
			y += caseH
			continue
		}
		s := r.s
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+barH/2+4, esc(s.Target))
		if s.Ratio == nil {
			why := "failed (" + strings.TrimPrefix(s.Status, "FAILED: ") + ")"
			if s.Status == "ok" {
				why = "no ratio: direct failed in its rounds"
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#b00020">%s</text>`+"\n", labelW+6, y+barH/2+4, esc(why))
			y += rowH
			continue
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, y, x(*s.Ratio)-labelW, barH, color[s.Target])
		for _, rr := range s.RoundRatios {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#111" stroke-width="1.5"/>`+"\n", x(rr), y-2, x(rr), y+barH+2)
		}
		label := fmt.Sprintf("%.2f", *s.Ratio)
		if s.Status != "ok" {
			label += " (some runs failed)"
		}
		if s.ReplicaReads {
			label += " *"
		}
		end := *s.Ratio
		for _, rr := range s.RoundRatios {
			end = math.Max(end, rr)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-weight="bold">%s</text>`+"\n", x(end)+8, y+barH/2+4, esc(label))
		y += rowH
	}
	for _, ref := range []struct {
		r     float64
		label string
		color string
	}{{1, "direct", "#111"}, {0.7, "gateway goal 0.7", "#b00020"}} {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="5,3"/>`+"\n", x(ref.r), plotTop, x(ref.r), plotBottom, ref.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s" font-size="11">%s</text>`+"\n", x(ref.r), plotTop-4, ref.color, ref.label)
	}
	if replicas {
		fmt.Fprintf(&b, `<text x="10" y="%d" fill="#555">* read_only_replicas: gateway on two servers (primary + replica, replica_reads on), direct on the primary alone; sysbench --skip-trx=on</text>`+"\n", plotBottom+36)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
