package sqlconnect

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// scripted is a connector whose logins fail with errs in turn, then
// succeed.
type scripted struct {
	errs  []error
	tries int
}

func (s *scripted) Connect(context.Context) (driver.Conn, error) {
	s.tries++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return nil, err
	}
	return nil, nil
}

func (s *scripted) Driver() driver.Driver { return nil }

func TestRetrying(t *testing.T) {
	other := errors.New("connection refused")
	for _, tc := range []struct {
		name  string
		errs  []error
		tries int
		want  error
	}{
		{"ok", nil, 1, nil},
		{"malformed once", []error{mysql.ErrMalformPkt}, 2, nil},
		{"malformed twice", []error{mysql.ErrMalformPkt, mysql.ErrMalformPkt}, 2, mysql.ErrMalformPkt},
		{"another error", []error{other}, 1, other},
	} {
		s := &scripted{errs: tc.errs}
		_, err := Retrying(s).Connect(context.Background())
		if !errors.Is(err, tc.want) || tc.want == nil && err != nil || s.tries != tc.tries {
			t.Errorf("%s: %v after %d logins, want %v after %d", tc.name, err, s.tries, tc.want, tc.tries)
		}
	}
}
