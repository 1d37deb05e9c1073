package raftstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"
)

// A backup is a file of three parts (DESIGN.md, "Backup and restore"):
//
//	{"kind":"fencepost-backup","format":1,...}\n   BackupHeader, one line
//	<the fsm snapshot: its header line, then the model, one line>
//	sha256 <64 hex digits>\n                         over everything before it
//
// The trailer has a fixed length, so a reader finds it from the file's
// size; a backup cut short (the leader died mid-stream) has no valid
// trailer and is refused whole.
const (
	// backupKind is the header's kind: what the file is.
	backupKind = "fencepost-backup"
	// backupFormat versions the layout above; restore refuses others.
	backupFormat = 1
	// BackupContentType is the media type of GET /v1/snapshot.
	BackupContentType = "application/vnd.fencepost.backup"
	trailerPrefix     = "sha256 "
	trailerLen        = len(trailerPrefix) + sha256.Size*2 + 1
)

// ErrBackup reports a backup file restore refuses: cut short, a checksum
// that does not match, or a format this build does not read. Nothing was
// written.
var ErrBackup = errors.New("raftstore: bad backup")

// BackupHeader is the first line of a backup: what it holds and when and
// by whom it was taken.
type BackupHeader struct {
	Kind           string `json:"kind"`
	Format         int    `json:"format"`
	SnapshotFormat int    `json:"snapshotFormat"`
	// Version is the build of the leader that wrote it.
	Version string `json:"version"`
	// Node is the leader that wrote it.
	Node string `json:"node"`
	// Index is the raft index the state is at: every epoch granted up to
	// the save is at most Index.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// SavedAt is the leader's clock when the state was taken; restore
	// sizes its epoch margin from the time since (restore.go).
	SavedAt  time.Time `json:"savedAt"`
	Tasks    int       `json:"tasks"`
	Sessions int       `json:"sessions"`
}

// Backup is a consistent point-in-time state, taken by Store.Backup and
// written by WriteTo. Release it when done (it holds a model view).
type Backup struct {
	Header BackupHeader
	snap   *fsmSnapshot
}

// Backup takes a backup on the leader: a barrier first, so every entry
// committed before the call is in it, then a view of the state (Apply
// goes on meanwhile). A follower returns ErrNotLeader.
func (s *Store) Backup(ctx context.Context) (*Backup, error) {
	if err := s.waitOffice(ctx); err != nil {
		return nil, err
	}
	timeout := s.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := s.raft.Barrier(timeout).Error(); err != nil {
		return nil, mapRaftError(err)
	}
	if err := s.Halted(); err != nil {
		return nil, err
	}
	f := s.fsm
	f.mu.Lock()
	snap := &fsmSnapshot{header: f.header(true), view: f.model.View()}
	tasks, sessions := f.model.Counts()
	f.mu.Unlock()
	n := 0
	for _, c := range tasks {
		n += c
	}
	return &Backup{snap: snap, Header: BackupHeader{
		Kind: backupKind, Format: backupFormat, SnapshotFormat: snapshotFormat, Version: s.cfg.Version,
		Node: s.cfg.NodeID, Index: snap.header.Applied, Term: s.raft.CurrentTerm(), SavedAt: s.clock.Now().UTC(),
		Tasks: n, Sessions: sessions,
	}}, nil
}

// WriteTo streams the backup file to w.
func (b *Backup) WriteTo(w io.Writer) (int64, error) {
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, h)}
	if err := json.NewEncoder(cw).Encode(&b.Header); err != nil {
		return cw.n, fmt.Errorf("raftstore: write backup header: %w", err)
	}
	if err := b.snap.writeTo(cw); err != nil {
		return cw.n, err
	}
	n, err := io.WriteString(w, trailerPrefix+hex.EncodeToString(h.Sum(nil))+"\n")
	return cw.n + int64(n), err
}

// Release lets the model stop keeping the backup's view.
func (b *Backup) Release() { b.snap.Release() }

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// VerifyBackup checks a backup file whole (its trailer's checksum, then
// its header) and returns the header.
func VerifyBackup(path string) (BackupHeader, error) {
	f, hdr, _, _, err := openBackup(path)
	if err != nil {
		return BackupHeader{}, err
	}
	_ = f.Close()
	return hdr, nil
}

// openBackup verifies the backup at path and returns it open, its header,
// a reader of its fsm snapshot part (which reads from the file) and its
// checksum trailer.
func openBackup(path string) (*os.File, BackupHeader, io.Reader, string, error) {
	var hdr BackupHeader
	f, err := os.Open(path) //nolint:gosec // the operator names the file
	if err != nil {
		return nil, hdr, nil, "", fmt.Errorf("%w: %v", ErrBackup, err)
	}
	fail := func(format string, a ...any) (*os.File, BackupHeader, io.Reader, string, error) {
		_ = f.Close()
		return nil, hdr, nil, "", fmt.Errorf("%w: %s: %s", ErrBackup, path, fmt.Sprintf(format, a...))
	}
	st, err := f.Stat()
	if err != nil {
		return fail("%v", err)
	}
	body := st.Size() - int64(trailerLen)
	if body <= 0 {
		return fail("%d bytes is too short to be a backup", st.Size())
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, body)); err != nil {
		return fail("read: %v", err)
	}
	if err := checkTrailer(io.NewSectionReader(f, body, int64(trailerLen)), h); err != nil {
		return fail("%v", err)
	}
	br := bufio.NewReader(io.NewSectionReader(f, 0, body))
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fail("no header line: %v", err)
	}
	if err := json.Unmarshal(line, &hdr); err != nil {
		return fail("header: %v", err)
	}
	switch {
	case hdr.Kind != backupKind:
		return fail("kind %q is not %q", hdr.Kind, backupKind)
	case hdr.Format != backupFormat:
		return fail("backup format %d (written by fencepost %s); this build reads format %d", hdr.Format, hdr.Version, backupFormat)
	case hdr.SnapshotFormat != snapshotFormat:
		return fail("snapshot format %d (written by fencepost %s); this build reads format %d", hdr.SnapshotFormat, hdr.Version, snapshotFormat)
	}
	return f, hdr, br, trailerPrefix + hex.EncodeToString(h.Sum(nil)) + "\n", nil
}

func checkTrailer(r io.Reader, h hash.Hash) error {
	t, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	want := []byte(trailerPrefix + hex.EncodeToString(h.Sum(nil)) + "\n")
	if !bytes.HasPrefix(t, []byte(trailerPrefix)) {
		return errors.New("no checksum trailer: the file is cut short or is not a backup")
	}
	if !bytes.Equal(t, want) {
		return errors.New("checksum mismatch: the file is damaged or cut short")
	}
	return nil
}
