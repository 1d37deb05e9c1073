package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
)

var ctlSnapshotSave = &ctlCmd{
	name:     "snapshot save",
	args:     []string{"FILE"},
	synopsis: "FILE",
	summary:  "save a consistent point-in-time backup of the whole cluster state, streamed from the leader and checksummed, to FILE (operator certificate; raise --timeout for a large state)",
	bind: func(*flag.FlagSet) ctlAction {
		return func(x *ctlCall) (*ctlOut, error) {
			hdr, n, err := saveSnapshot(x.ctx, x, x.args[0])
			if err != nil {
				return nil, err
			}
			v := snapshotSaved{File: x.args[0], Bytes: n, BackupHeader: hdr}
			return &ctlOut{v: v, table: func(w io.Writer) {
				fmt.Fprintf(w, "saved %s: %d bytes, index %d, %d tasks, %d sessions, taken by %s (fencepost %s) at %s\n",
					v.File, v.Bytes, hdr.Index, hdr.Tasks, hdr.Sessions, hdr.Node, hdr.Version, hdr.SavedAt.Format("2006-01-02T15:04:05Z07:00"))
			}}, nil
		}
	},
}

// snapshotSaved is the result of 'ctl snapshot save'.
type snapshotSaved struct {
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
	raftstore.BackupHeader
}

// saveSnapshot asks each endpoint in turn for GET /v1/snapshot, going to
// the leader a follower names, and writes the body to a temporary file
// beside path; only a body whose checksum trailer verifies is renamed
// to path, so path is never a partial backup.
func saveSnapshot(ctx context.Context, x *ctlCall, path string) (raftstore.BackupHeader, int64, error) {
	var none raftstore.BackupHeader
	tc, err := x.g.tlsConfig()
	if err != nil {
		return none, 0, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	scheme := "http://"
	if tc != nil {
		scheme = "https://"
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return none, 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var errs []error
	tried := map[string]bool{}
	queue := x.client.Endpoints()
	for len(queue) > 0 {
		base := queue[0]
		queue = queue[1:]
		if tried[base] {
			continue
		}
		tried[base] = true
		leader, n, err := fetchSnapshot(ctx, hc, base, tmp)
		if err == nil {
			if err := tmp.Close(); err != nil {
				return none, 0, err
			}
			hdr, err := raftstore.VerifyBackup(tmp.Name())
			if err != nil {
				return none, 0, fmt.Errorf("%s sent %d bytes that do not verify: %w", base, n, err)
			}
			return hdr, n, os.Rename(tmp.Name(), path)
		}
		errs = append(errs, fmt.Errorf("%s: %w", base, err))
		if leader != "" {
			queue = append([]string{scheme + leader}, queue...)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return none, 0, errors.Join(errs...)
}

// fetchSnapshot streams one endpoint's backup into f (truncated first).
// On a refusal it returns the leader the endpoint named, if any.
func fetchSnapshot(ctx context.Context, hc *http.Client, base string, f *os.File) (string, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+api.PathSnapshot, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var p api.Problem
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &p) == nil && p.Detail != "" {
			msg = p.Code + ": " + p.Detail
		}
		return resp.Header.Get(httpapi.HeaderLeader), 0, fmt.Errorf("%s: %s", resp.Status, oneLine(msg))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, err
	}
	if err := f.Truncate(0); err != nil {
		return "", 0, err
	}
	n, err := io.Copy(f, resp.Body)
	if err != nil {
		return "", n, fmt.Errorf("stream cut after %d bytes: %w", n, err)
	}
	return "", n, f.Sync()
}
