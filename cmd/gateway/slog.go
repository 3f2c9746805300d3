package main

import (
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogBridge sends vitess's slog records to an hclog logger, mapping
// levels explicitly (hclog's standard writer does not parse slog levels).
type slogBridge struct {
	log   hclog.Logger
	attrs []any
}

func newSlogBridge(log hclog.Logger) *slog.Logger { return slog.New(&slogBridge{log: log}) }

func (b *slogBridge) Enabled(_ context.Context, l slog.Level) bool {
	return hclogLevel(l) >= b.log.GetLevel()
}

func (b *slogBridge) Handle(_ context.Context, r slog.Record) error {
	args := append([]any(nil), b.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, a.Key, a.Value.Any())
		return true
	})
	b.log.Log(hclogLevel(r.Level), r.Message, args...)
	return nil
}

func (b *slogBridge) WithAttrs(as []slog.Attr) slog.Handler {
	n := &slogBridge{log: b.log, attrs: append([]any(nil), b.attrs...)}
	for _, a := range as {
		n.attrs = append(n.attrs, a.Key, a.Value.Any())
	}
	return n
}

func (b *slogBridge) WithGroup(name string) slog.Handler {
	return &slogBridge{log: b.log.Named(name), attrs: b.attrs}
}

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l >= slog.LevelError:
		return hclog.Error
	case l >= slog.LevelWarn:
		return hclog.Warn
	case l >= slog.LevelInfo:
		return hclog.Info
	}
	return hclog.Debug
}
