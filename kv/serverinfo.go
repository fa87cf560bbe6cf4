package kv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ServerInfo is what a running `baton up` writes so that other commands on
// the host find its server without flags.
type ServerInfo struct {
	URL      string    `json:"url"`
	PID      int       `json:"pid"`
	PIDStart string    `json:"pid_start,omitempty"`
	Store    string    `json:"store"`
	Started  time.Time `json:"started_at"`
	Replicas int       `json:"replicas"`
}

// WriteServerInfo writes info to path (mode 0600) atomically.
func WriteServerInfo(path string, info ServerInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".server-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadServerInfo reads what WriteServerInfo wrote. A missing file is an
// error wrapping fs.ErrNotExist.
func ReadServerInfo(path string) (ServerInfo, error) {
	var info ServerInfo
	b, err := os.ReadFile(path)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	return info, nil
}
