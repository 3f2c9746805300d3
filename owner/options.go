package owner

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// msgOptions are the settings of one message table, read from its
// comment: vitess_message,vt_ack_wait=30,vt_purge_after=86400,...
type msgOptions struct {
	// AckWait is how long a sent message waits for its ack before it is
	// due again (plus the backoff). vt_ack_wait, default 30s.
	AckWait time.Duration
	// PurgeAfter is how long acked messages are kept. vt_purge_after,
	// default 86400s.
	PurgeAfter time.Duration
	// BatchSize is the most rows sent to a subscriber at once.
	// vt_batch_size, default 10.
	BatchSize int
	// CacheSize is the most due messages held in memory. vt_cache_size,
	// default 10000.
	CacheSize int
	// PollInterval is the time between two reads of due messages.
	// vt_poller_interval, default 30s.
	PollInterval time.Duration
	// MinBackoff is the backoff of a message's first resend, doubling
	// with every send. vt_min_backoff, default AckWait.
	MinBackoff time.Duration
	// MaxBackoff caps the backoff. vt_max_backoff, default 0: no cap.
	MaxBackoff time.Duration
	// Columns are the columns streamed to subscribers, from
	// vt_message_cols=id|a|b; nil means every column but priority, epoch,
	// time_next and time_acked.
	Columns []string
}

// defaultMsgOptions are Vitess's documented example values, used for
// every attribute a comment leaves out.
func defaultMsgOptions() msgOptions {
	return msgOptions{
		AckWait:      30 * time.Second,
		PurgeAfter:   86400 * time.Second,
		BatchSize:    10,
		CacheSize:    10000,
		PollInterval: 30 * time.Second,
	}
}

// parseMsgOptions reads the vt_* attributes of a message table comment.
// Durations are seconds and may be fractional (0.5). Unknown attributes
// and parts without '=' are ignored, as Vitess does; a bad value is an
// error naming the attribute.
func parseMsgOptions(comment string) (msgOptions, error) {
	o := defaultMsgOptions()
	minSet := false
	for part := range strings.SplitSeq(comment, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		var err error
		switch key {
		case "vt_ack_wait":
			o.AckWait, err = parseSeconds(val, false)
		case "vt_purge_after":
			o.PurgeAfter, err = parseSeconds(val, false)
		case "vt_poller_interval":
			o.PollInterval, err = parseSeconds(val, false)
		case "vt_min_backoff":
			o.MinBackoff, err = parseSeconds(val, true)
			minSet = o.MinBackoff > 0
		case "vt_max_backoff":
			o.MaxBackoff, err = parseSeconds(val, true)
		case "vt_batch_size":
			o.BatchSize, err = parseCount(val)
		case "vt_cache_size":
			o.CacheSize, err = parseCount(val)
		case "vt_message_cols":
			for c := range strings.SplitSeq(val, "|") {
				if c = strings.TrimSpace(c); c != "" {
					o.Columns = append(o.Columns, c)
				}
			}
			if len(o.Columns) > 0 && !strings.EqualFold(o.Columns[0], "id") {
				err = fmt.Errorf("must begin with id")
			}
		default:
			continue
		}
		if err != nil {
			return o, fmt.Errorf("%s=%s: %w", key, val, err)
		}
	}
	if !minSet {
		o.MinBackoff = o.AckWait
	}
	return o, nil
}

// parseSeconds reads a non-negative number of seconds; zero is allowed
// only where zero has a meaning (the backoffs).
func parseSeconds(s string, zeroOK bool) (time.Duration, error) {
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("not a number of seconds")
	case v < 0, v == 0 && !zeroOK:
		return 0, fmt.Errorf("must be positive")
	case v > float64(math.MaxInt64/int64(time.Second)):
		return 0, fmt.Errorf("too large")
	}
	d := time.Duration(v * float64(time.Second))
	if d == 0 && v > 0 {
		d = 1 // a positive value below a nanosecond
	}
	return d, nil
}

// parseCount reads a positive integer.
func parseCount(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("must be a positive integer")
	}
	return v, nil
}

// Jitter bounds: each backoff is multiplied by a factor drawn uniformly
// from [jitterLow, jitterLow+jitterSpan), ±33% as in Vitess.
const (
	jitterLow  = 2.0 / 3
	jitterSpan = 2.0 / 3
)

// backoff is how much later than the ack wait a message sent for the
// (epoch+1)-th time comes back: minBackoff doubled epoch times, multiplied
// by jitter, then clamped to at least minBackoff and, when maxBackoff is
// not zero, to at most maxBackoff. rnd is a uniform draw from [0, 1).
func backoff(epoch int64, minBackoff, maxBackoff time.Duration, rnd float64) time.Duration {
	b := minBackoff
	for i := int64(0); i < epoch && b > 0; i++ {
		if b > math.MaxInt64/2 {
			b = math.MaxInt64 // doubling overflows: as late as it gets
			break
		}
		b *= 2
	}
	if b < math.MaxInt64 {
		b = time.Duration(min(float64(b)*(jitterLow+jitterSpan*rnd), math.MaxInt64/2))
	}
	if b < minBackoff {
		b = minBackoff
	}
	if maxBackoff > 0 && b > maxBackoff {
		b = maxBackoff
	}
	return b
}

// nextDue is the time_next (ns since the epoch) of a message sent at now
// for the (epoch+1)-th time: now + ack wait + backoff, saturating.
func nextDue(now time.Time, epoch int64, o msgOptions, rnd float64) int64 {
	t := now.UnixNano()
	if d := int64(o.AckWait); t <= math.MaxInt64-d {
		t += d
	} else {
		return math.MaxInt64
	}
	if d := int64(backoff(epoch, o.MinBackoff, o.MaxBackoff, rnd)); t <= math.MaxInt64-d {
		return t + d
	}
	return math.MaxInt64
}
