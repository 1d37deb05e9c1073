package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// postgresDSN returns a DSN for a PostgreSQL server to test against:
// FENCEPOST_TEST_POSTGRES_DSN if set; else, when running as root with a
// PostgreSQL installation under /usr/lib/postgresql, a throwaway server
// started in tb.TempDir() as the postgres OS user and stopped (by PID) when
// tb ends; else "" and the reason, for the caller to t.Skip with.
func postgresDSN(tb testing.TB) (dsn, skip string) {
	tb.Helper()
	if dsn := os.Getenv("FENCEPOST_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn, ""
	}
	if os.Geteuid() != 0 {
		return "", "PostgreSQL tests skipped: FENCEPOST_TEST_POSTGRES_DSN is unset and not running as root to start a throwaway server"
	}
	initdbs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(initdbs) == 0 {
		return "", "PostgreSQL tests skipped: FENCEPOST_TEST_POSTGRES_DSN is unset and no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)"
	}
	bin := filepath.Dir(initdbs[len(initdbs)-1])
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		return "", "PostgreSQL tests skipped: no postgres OS user to run the server as: " + err.Error()
	}
	uid, _ := strconv.ParseUint(pgUser.Uid, 10, 32)
	gid, _ := strconv.ParseUint(pgUser.Gid, 10, 32)
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}

	dir := tb.TempDir()
	// The postgres user must be able to reach the data directory.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			tb.Fatalf("chmod %s: %v", d, err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chown(data, int(uid), int(gid)); err != nil {
		tb.Fatal(err)
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.Dir = dir
	initdb.SysProcAttr = cred
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(tb)
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		tb.Fatal(err)
	}
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1",
		"-k", data, "-F", "-c", "max_connections=60", "-c", "shared_buffers=16MB")
	srv.Dir = dir
	srv.SysProcAttr = cred
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		tb.Fatalf("start postgres: %v", err)
	}
	pid := srv.Process.Pid
	tb.Cleanup(func() {
		// SIGINT is PostgreSQL's fast shutdown; only our own PID is touched.
		_ = syscall.Kill(pid, syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-done
		}
		_ = logf.Close()
	})
	dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	waitPostgres(tb, dsn, filepath.Join(dir, "postgres.log"))
	return dsn, ""
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// waitPostgres polls until the server answers, up to a deadline.
func waitPostgres(tb testing.TB, dsn, logPath string) {
	tb.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			tb.Fatalf("postgres did not come up: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by the deadline
	}
}
