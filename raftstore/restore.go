package raftstore

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Restore starts a new cluster from a backup (Config.Restore). The
// restoring node becomes the only voter of a new cluster; others join it
// with empty data dirs and receive the state by raft snapshot.
type Restore struct {
	// File is the backup, from 'fencepost ctl snapshot save'.
	File string
	// EpochMargin, when set, is how far above the backup's index the new
	// log starts; 0 sizes it from the backup's age (RestoreFloor).
	EpochMargin uint64
}

// Epoch margin defaults (DESIGN.md, "Backup and restore"). An epoch is the
// raft index of its grant, so the old cluster can have granted epochs up
// to the last index it reached after the backup. That index grows by at
// most one per entry; DefaultRestoreIndexRate is an entry rate no cluster
// reaches (the benchmarks' best is a few thousand entries a second, and
// every entry is an fsync'd append), and DefaultRestoreMinMargin covers
// clock skew between the saving leader and the restoring host (1000 s at
// that rate) and a backup restored at once.
const (
	DefaultRestoreIndexRate = 1_000_000
	DefaultRestoreMinMargin = 1_000_000_000
	// maxRestoreFloor keeps epochs exact in JSON numbers (2^53) with room
	// for the new cluster's own life.
	maxRestoreFloor = 1 << 52
)

// RestoreFloor returns the index the restored cluster's log starts above,
// which every new epoch exceeds: the backup's index plus margin, or plus
// max(DefaultRestoreMinMargin, age × DefaultRestoreIndexRate) when margin
// is 0, where age is the time since the backup was saved.
func RestoreFloor(hdr BackupHeader, margin uint64, now time.Time) (uint64, error) {
	if margin == 0 {
		age := max(now.Sub(hdr.SavedAt), 0)
		margin = max(uint64(DefaultRestoreMinMargin), uint64(math.Ceil(age.Seconds()*DefaultRestoreIndexRate)))
	}
	if hdr.Index > maxRestoreFloor || margin > maxRestoreFloor-hdr.Index {
		return 0, fmt.Errorf("%w: backup index %d + epoch margin %d is over %d", ErrConfig, hdr.Index, margin, uint64(maxRestoreFloor))
	}
	return hdr.Index + margin, nil
}

// restoredMarker names the file in the data dir that records which backup
// it was restored from (its checksum trailer), so a restart that still
// passes the same --restore starts from the data dir instead of failing.
const restoredMarker = "restored-from"

// alreadyRestored reports whether the data dir was restored from the
// backup at path.
func alreadyRestored(dataDir, path string) bool {
	have, err := os.ReadFile(filepath.Join(dataDir, restoredMarker)) //nolint:gosec // our data dir
	if err != nil {
		return false
	}
	f, _, _, sum, err := openBackup(path)
	if err != nil {
		return false
	}
	_ = f.Close()
	return string(have) == sum
}

// restoreInto writes the backup as the first raft snapshot of a new
// cluster into snaps: the state with every lease of the old cluster
// expired and every session closed (lease.Model.PrepareRestore), at index
// floor, with this node the only voter at addr. Open then starts raft
// from it as from any snapshot.
func (s *Store) restoreInto(snaps raft.SnapshotStore, addr raft.ServerAddress) error {
	rcfg := s.cfg.Restore
	file, hdr, rd, sum, err := openBackup(rcfg.File)
	if err != nil {
		return err
	}
	defer file.Close()
	now := s.clock.Now()
	floor, err := RestoreFloor(hdr, rcfg.EpochMargin, now)
	if err != nil {
		return err
	}
	f := newFSM(s.log)
	if err := f.Restore(io.NopCloser(rd)); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBackup, rcfg.File, err)
	}
	ended := f.model.PrepareRestore(floor, now)
	f.nodes = map[string]nodeMeta{} // the old members' addresses mean nothing here
	f.applied.set(floor)
	snap, err := f.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.NodeID), Address: addr}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, floor, 1, conf, floor, s.trans)
	if err != nil {
		return fmt.Errorf("raftstore: restore: create snapshot: %w", err)
	}
	if err := snap.Persist(sink); err != nil {
		return fmt.Errorf("raftstore: restore: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.cfg.DataDir, restoredMarker), []byte(sum), 0o600); err != nil {
		return fmt.Errorf("raftstore: restore: %w", err)
	}
	s.log.Warn("restored a new cluster from a backup: every lease of the old cluster is expired and every session closed; new epochs start above the floor",
		zap.String("file", rcfg.File), zap.Uint64("backupIndex", hdr.Index), zap.Time("savedAt", hdr.SavedAt),
		zap.String("savedBy", hdr.Version), zap.Uint64("epochFloor", floor),
		zap.Int("leasesExpired", ended.Expired), zap.Int("sessionsClosed", ended.Sessions), zap.Int("tasks", hdr.Tasks))
	return nil
}
