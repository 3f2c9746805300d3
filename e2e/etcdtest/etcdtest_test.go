package etcdtest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestStartKillRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if errors.Is(err, ErrNoEtcd) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.PID() == 0 {
		t.Fatal("no pid after Start")
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.PID() != 0 {
		t.Fatal("running after Kill")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}
