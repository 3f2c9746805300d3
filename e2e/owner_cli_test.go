package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOwnerStreamMariaDBCLI: the README's STREAM example works as
// printed: in a terminal, `mariadb --quick -e 'STREAM * FROM ...'` shows
// each message as it arrives. (Without --quick the client keeps the rows
// until the result ends, which a STREAM never does; with its output in a
// pipe the client's stdio buffer holds them.) script(1) gives the client
// a terminal.
func TestOwnerStreamMariaDBCLI(t *testing.T) {
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		t.Skip("mariadb client not installed")
	}
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) not installed")
	}
	st := startOwnerStack(t, 1)
	host, port, _ := net.SplitHostPort(st.gateways[0])
	cli := fmt.Sprintf("%s --no-defaults -h%s -P%s -u%s -p%s %s --quick -e 'STREAM * FROM msgs'", bin, host, port, appUser, appPass, ownerDB)
	cmd := exec.Command(script, "-qfec", cli, "/dev/null")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	db := st.session(t, 0)
	deadline := time.After(20 * time.Second)
	insert := time.NewTicker(500 * time.Millisecond)
	defer insert.Stop()
	id := 0
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("mariadb exited")
			}
			if strings.Contains(l, "hello from the cli test") {
				return
			}
		case <-insert.C:
			// Until the client has subscribed, a message may go
			// unseen: insert another.
			id++
			mustExec(t, db, "INSERT INTO msgs (id, body) VALUES ("+strconv.Itoa(id)+", 'hello from the cli test')")
		case <-deadline:
			t.Fatal("no message shown by mariadb --quick")
		}
	}
}
