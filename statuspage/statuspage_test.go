package statuspage

import (
	"math"
	"strings"
	"testing"
)

func TestSparkline(t *testing.T) {
	nan := Sample(math.NaN())
	svg := string(sparkline([]Sample{1, 2, nan, 3}, []Sample{0.5, 0.5, 0.5, 0.5}))
	if strings.Count(svg, "<polyline") != 2 || strings.Count(svg, "<circle") != 1 {
		t.Errorf("sparkline with a gap: %s", svg)
	}
	if !strings.Contains(svg, ">3.00ms<") {
		t.Errorf("sparkline lacks its scale: %s", svg)
	}
	if svg := string(sparkline(nil, nil)); !strings.Contains(svg, "no samples yet") {
		t.Errorf("empty sparkline: %s", svg)
	}
}
