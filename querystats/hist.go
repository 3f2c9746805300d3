package querystats

import (
	"math/bits"
	"time"
)

// histBase is the upper bound of the first histogram bucket; bucket i
// (i > 0) holds durations in [histBase<<(i-1), histBase<<i), and the last
// one everything longer.
const histBase = 32 * time.Microsecond

// histBuckets is how many buckets a histogram has: up to about 2 minutes.
const histBuckets = 24

// histogram counts durations in buckets that double in width: 96 bytes,
// no allocation, quantiles within a factor of two.
type histogram [histBuckets]uint32

func (h *histogram) add(d time.Duration) {
	i := 0
	if d >= histBase {
		i = min(bits.Len64(uint64(d/histBase)), histBuckets-1)
	}
	if h[i] < ^uint32(0) {
		h[i]++
	}
}

// quantile returns the upper bound of the bucket holding quantile q; 0
// for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	var total uint64
	for _, c := range h {
		total += uint64(c)
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h {
		seen += uint64(c)
		if seen >= rank {
			if i == histBuckets-1 {
				return time.Duration(1<<63 - 1)
			}
			return histBase << i
		}
	}
	return time.Duration(1<<63 - 1)
}
