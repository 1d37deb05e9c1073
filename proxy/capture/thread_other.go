//go:build !linux

package capture

import "errors"

// threadSetUID is Linux-only, as the capture rules are.
func threadSetUID(int) error {
	return errors.New("capture: probing as another uid needs Linux")
}

// threadSetns is Linux-only.
func threadSetns(string) error {
	return errors.New("capture: network namespaces need Linux")
}
